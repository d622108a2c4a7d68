#!/usr/bin/env bash
# Side by side, in one run: pdsweep's large-vocabulary head, distillation step and released
# teacher's logit pass (`cargo bench --bench large_vocab`) and PyTorch eager on the same shapes
# and thread count (benches/large_vocab_torch.py). PyTorch comes from CI's environment
# (PDSWEEP_CI_VENV, default /var/tmp/pdsweep-ci-venv; .ci/run makes it), SmolLM2-135M from
# benches/smollm2.py's folder (PDSWEEP_SMOLLM2, default /var/tmp/pdsweep-smollm2), Gemma-3-270M from
# benches/gemma3.py's (PDSWEEP_GEMMA3, default /var/tmp/pdsweep-gemma3).
# THREADS=N (default 2) sets both sides' threads; VOCAB (default 49152) the vocabulary.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${PDSWEEP_CI_VENV:-/var/tmp/pdsweep-ci-venv}"
export PDSWEEP_SMOLLM2="${PDSWEEP_SMOLLM2:-/var/tmp/pdsweep-smollm2}"
"$venv/bin/python" benches/smollm2.py "$PDSWEEP_SMOLLM2" >/dev/null
export PDSWEEP_GEMMA3="${PDSWEEP_GEMMA3:-/var/tmp/pdsweep-gemma3}"
"$venv/bin/python" benches/gemma3.py "$PDSWEEP_GEMMA3" >/dev/null
threads="${THREADS:-2}"
vocab="${VOCAB:-49152}"
export RAYON_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
grep -o -w 'avx512f\|avx512bw\|avx512vl\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
cargo bench --bench large_vocab -- "$vocab" 32 head,step,released
(cd benches && "$venv/bin/python" large_vocab_torch.py --threads "$threads" --vocab "$vocab" --model "$PDSWEEP_SMOLLM2" --model "$PDSWEEP_GEMMA3")
