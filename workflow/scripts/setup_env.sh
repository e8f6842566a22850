#!/usr/bin/env bash
# One-time (idempotent) set-up of a fresh clone: a Python 3.11 virtualenv in .venv with the locked
# stack, the `pipeline` package installed editable, and the SLURM profile made reachable as the bare
# name `slurm` (Snakemake looks for bare profile names only in ./, ~/.config/snakemake and
# /etc/xdg/snakemake). Re-running it with an unchanged lock file does nothing and takes a second.
#
# Accelerator: PIPELINE_ACCELERATOR=cuda adds the CUDA 12 build of the same jax (requirements-cuda.lock),
# =cpu removes it, and the default (auto) adds it when `nvidia-smi -L` lists a GPU and keeps a venv already set up
# for CUDA. Run it on a GPU node (or with PIPELINE_ACCELERATOR=cuda on the login node of a shared file system),
# else GPU jobs refuse to start.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 required, found {sys.version}"'

stamp=.venv/.installed-lock
accelerator="${PIPELINE_ACCELERATOR:-auto}"
if [ "$accelerator" = auto ]; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then accelerator=cuda
  elif grep -q '^cuda ' "$stamp" 2>/dev/null; then accelerator=cuda  # a login node keeps a shared CUDA venv as it is
  else accelerator=cpu; fi
fi
case "$accelerator" in
  cpu) locks=(requirements.lock) ;;
  cuda) locks=(requirements.lock requirements-cuda.lock) ;;
  *) echo "setup_env.sh: PIPELINE_ACCELERATOR must be auto, cpu or cuda (got '$accelerator')." >&2; exit 2 ;;
esac

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
wanted="$accelerator $(cat "${locks[@]}" pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet torch==2.13.0
  .venv/bin/python -m pip install --quiet "${locks[@]/#/-r}"
  if [ "$accelerator" = cpu ]; then  # JAX's CUDA plugin only: torch may need the nvidia-* libraries
    .venv/bin/python -m pip uninstall --quiet --yes jax-cuda12-plugin jax-cuda12-pjrt 2>/dev/null || true
  fi
  .venv/bin/python -m pip install --quiet --no-deps -e .
  echo "$wanted" > "$stamp"
fi

config_home="${XDG_CONFIG_HOME:-$HOME/.config}/snakemake"
mkdir -p "$config_home"
ln -sfn "$PWD/profiles/slurm" "$config_home/slurm"
echo "environment ready: .venv ($(.venv/bin/python -c 'import levanter, jax; print("levanter", levanter.__version__ if hasattr(levanter, "__version__") else "", "jax", jax.__version__, "backend", jax.default_backend())'))"
