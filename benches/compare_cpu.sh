#!/usr/bin/env bash
# Side by side, in one run: pdsweep's CPU training throughput (burn, every CPU backend built in)
# and PyTorch eager on the same model, batch and thread count. PyTorch is installed into a
# throwaway virtual environment (never in CI; TORCH_VENV=DIR uses an existing one). Extra
# arguments go to both, e.g. --steps 50, or the quick-start student's shape:
# --d-model 48 --layers 2 --heads 3 --batch 64. THREADS=N (default 2) sets both sides' threads.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TORCH_VENV:-/tmp/pdsweep-torch-venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch
fi
threads="${THREADS:-2}"
export RAYON_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
cargo bench --bench train_throughput ${FEATURES:+--features "$FEATURES"} -- "$@"
"$venv/bin/python" benches/torch_reference.py --threads "$threads" "$@"
