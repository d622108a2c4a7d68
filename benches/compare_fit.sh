#!/usr/bin/env bash
# Side by side: pdsweep's Chinchilla fit (benches/fit_laws.rs: 300 synthetic points, the full
# 4,500-start grid, 1,000 bootstrap resamples) and SciPy's L-BFGS-B doing the same fit on the
# same points and resamples (benches/fit_reference.py). SciPy is installed into a throwaway
# virtual environment. Prints both JSON lines, then median times, their ratio and both optima.
# Usage: benches/compare_fit.sh [REPEATS]   (default 3; SciPy takes minutes per repeat)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-3}"
venv="${SCIPY_VENV:-/tmp/pdsweep-scipy-venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import scipy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q scipy numpy
fi
rust=$(cargo bench --bench fit_laws -- --repeats "$repeats" 2>/dev/null | tail -n 1)
echo "$rust"
scipy=$("$venv/bin/python" benches/fit_reference.py --dir target/fit_bench --repeats "$repeats")
echo "$scipy"
python3 - "$rust" "$scipy" <<'PY'
import json, sys
r, s = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"pdsweep ({r['threads']} threads): grid {r['grid_s']:.2f} s, total {r['total_s']:.2f} s")
print(f"scipy   (1 thread):  grid {s['grid_s']:.2f} s, total {s['total_s']:.2f} s")
print(f"ratio (scipy / pdsweep): grid {s['grid_s'] / r['grid_s']:.0f}x, total {s['total_s'] / r['total_s']:.0f}x")
print(f"objective: pdsweep {r['objective']:.12e}, scipy {s['objective']:.12e}")
for k in ["E", "A", "B", "alpha", "beta"]:
    print(f"  {k:6s} pdsweep {r['params'][k]:.6g}  scipy {s['params'][k]:.6g}")
print(f"  alpha 95% CI: pdsweep {r['ci']['alpha']}, scipy {s['ci']['alpha']}")
print(f"  beta  95% CI: pdsweep {r['ci']['beta']}, scipy {s['ci']['beta']}")
PY
