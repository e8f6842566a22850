#!/usr/bin/env bash
# One-time (idempotent) set-up of a fresh clone: a Python 3.11 virtualenv in .venv with the locked
# stack, the `pipeline` package installed editable, and the SLURM profile made reachable as the bare
# name `slurm` (Snakemake looks for bare profile names only in ./, ~/.config/snakemake and
# /etc/xdg/snakemake). Re-running it with an unchanged lock file does nothing and takes a second.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 required, found {sys.version}"'

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.installed-lock
wanted="$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet torch==2.13.0
  .venv/bin/python -m pip install --quiet -r requirements.lock
  .venv/bin/python -m pip install --quiet --no-deps -e .
  echo "$wanted" > "$stamp"
fi

config_home="${XDG_CONFIG_HOME:-$HOME/.config}/snakemake"
mkdir -p "$config_home"
ln -sfn "$PWD/profiles/slurm" "$config_home/slurm"
echo "environment ready: .venv ($(.venv/bin/python -c 'import levanter, jax; print("levanter", levanter.__version__ if hasattr(levanter, "__version__") else "", "jax", jax.__version__)'))"
