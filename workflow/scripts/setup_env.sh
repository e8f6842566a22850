#!/usr/bin/env bash
# One-time (idempotent) set-up of a fresh clone: a Python 3.11 virtualenv in .venv with the locked stack and the
# `pipeline` package installed editable. It writes nothing outside the clone: name the SLURM profile by its path,
# `snakemake --profile profiles/slurm`. Re-running it with unchanged locks does nothing and takes seconds (the stamp
# .venv/.installed-lock holds the accelerator and the hash of the locks and pyproject.toml).
#
# Accelerator: PIPELINE_ACCELERATOR=cuda adds the CUDA 12 build of the same jax (requirements-cuda.lock), =cpu removes
# it, and the default (auto) adds it when `nvidia-smi -L` lists a GPU and keeps a venv already set up for CUDA.
# On a cluster whose compute nodes have no network: build the CUDA venv on the login node with
# PIPELINE_ACCELERATOR=cuda on the shared filesystem; GPU jobs refuse a CPU venv.
#
# Python: $PYTHON (default python3.11, else python3), which must be 3.11.
# torch (lm-eval's dependency, run on CPU only) is the CPU build the lock pins (2.13.0+cpu) in both venvs, never a
# CUDA torch: it comes from PIPELINE_TORCH_INDEX (default PyTorch's CPU index; empty: only the indexes and
# find-links pip is configured with, e.g. a site mirror or a local wheel).
set -euo pipefail
cd "$(dirname "$0")/../.."
step() { echo "setup_env.sh: $*"; }
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null || {
  step "Python 3.11 is required but $PYTHON is $("$PYTHON" --version 2>&1 | head -1); load one (e.g." \
    "\`module load python/3.11\`, or conda: environment.yml) and rerun, or name it: PYTHON=/path/to/python3.11" >&2
  exit 1
}

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
torch_index="${PIPELINE_TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
torch_pin="$(grep '^torch==' requirements.lock)"

if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi
wanted="$accelerator $(cat "${locks[@]}" pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  step "installing the $accelerator stack (${locks[*]}) into .venv; a first install downloads some GB"
  .venv/bin/python -m pip install --quiet --upgrade pip
  step "1/4 $torch_pin${torch_index:+ (index $torch_index)}"
  .venv/bin/python -m pip install --quiet --no-compile ${torch_index:+--extra-index-url "$torch_index"} "$torch_pin"
  step "2/4 the locked packages (requirements.lock)"
  .venv/bin/python -m pip install --quiet --no-compile -r requirements.lock
  if [ "$accelerator" = cuda ]; then
    step "3/4 JAX's CUDA 12 plugin (requirements-cuda.lock)"
    .venv/bin/python -m pip install --quiet --no-compile -r requirements-cuda.lock
  else
    step "3/4 no JAX CUDA plugin (removed if an earlier set-up added it)"
    .venv/bin/python -m pip uninstall --quiet --yes jax-cuda12-plugin jax-cuda12-pjrt 2>/dev/null || true
  fi
  step "4/4 the pipeline package (editable)"
  .venv/bin/python -m pip install --quiet --no-deps -e .
  # pip byte-compiles each package on one core as it installs it (78 s on one core for requirements.lock); every
  # core does it at once here. As with pip, a file that is not Python 3.11 (a 3.12-only torch test helper) stays
  # uncompiled: compileall's status 1 (some file did not compile) is accepted, any other failure stops the set-up.
  step "byte-compiling .venv on every core"
  .venv/bin/python -m compileall -q -j 0 .venv/lib/python3.11/site-packages > /dev/null || [ $? -eq 1 ]
  echo "$wanted" > "$stamp"
else
  step ".venv already holds the $accelerator stack of these locks (stamp $stamp)"
fi
step "environment ready: .venv ($(.venv/bin/python -c 'import levanter, jax; print("levanter", levanter.__version__ if hasattr(levanter, "__version__") else "", "jax", jax.__version__, "backend", jax.default_backend())'))"
