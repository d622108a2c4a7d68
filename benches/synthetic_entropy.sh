#!/usr/bin/env bash
# Synthetic check (issue 15 item 6): runs benches/synthetic_entropy.toml (tuned baselines of
# three sizes at three budgets on the built-in corpus), fits the Chinchilla law, and compares
# the fitted irreducible loss E with the corpus's known entropy rate (goal: within 5 %).
# Usage: benches/synthetic_entropy.sh [PDSWEEP_BINARY] [JOBS]   (about 15 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/pdsweep}"
jobs="${2:-2}"
work="${SYNTH_DIR:-target/synthetic-entropy}"
mkdir -p "$work"
cp benches/synthetic_entropy.toml "$work/sweep.toml"
cd "$work"
"$bin" run sweep.toml --jobs "$jobs" --stack off > run.log 2>&1 || { tail -20 run.log; exit 1; }
"$bin" fit sweep.toml --format json > fit.json
"$bin" fit sweep.toml | grep -E "^learning rate|^warning: the tuned" || true
rate=$(sqlite3 results/synthetic-entropy/sweep.db \
  "SELECT json_extract(corpus_json, '$.entropy_rate_nats') FROM results WHERE corpus_json IS NOT NULL LIMIT 1")
python3 - "$rate" <<'PY'
import json, sys
rate = float(sys.argv[1])
fit = json.load(open("fit.json"))["supervised"]
names = fit["names"] if "names" in fit else ["E", "A", "B", "alpha", "beta"]
params = dict(zip(names, fit["params"])) if isinstance(fit["params"], list) else fit["params"]
e = params["E"]
err = abs(e - rate) / rate
print(f"entropy rate {rate:.4f} nats/token; fitted E {e:.4f}; relative error {100 * err:.1f} % "
      f"({'within' if err <= 0.05 else 'NOT within'} 5 %)")
PY
