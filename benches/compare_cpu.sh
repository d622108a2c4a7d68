#!/usr/bin/env bash
# Side by side, in one run: pdsweep's CPU training throughput (burn, every CPU backend built in)
# and PyTorch eager on the same model, batch and thread count. PyTorch is installed into a
# throwaway virtual environment (never in CI). Extra arguments go to both, e.g. --steps 50.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TORCH_VENV:-/tmp/pdsweep-torch-venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch
fi
export RAYON_NUM_THREADS=2 OMP_NUM_THREADS=2
cargo bench --bench train_throughput ${FEATURES:+--features "$FEATURES"} -- "$@"
"$venv/bin/python" benches/torch_reference.py --threads 2 "$@"
