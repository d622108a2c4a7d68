#!/usr/bin/env bash
# Synthetic check (issue 15 item 6): runs a sweep on the built-in corpus (default
# benches/synthetic_entropy.toml: tuned models of four sizes at four budgets on the bigram
# world), fits the Chinchilla law, and compares the fitted irreducible loss E with the corpus's
# known entropy rate (goal: within 5 %). Prints the law's table too: an E "within 5 %" whose
# interval is not identified is luck, not a check.
# Usage: benches/synthetic_entropy.sh [PDSWEEP_BINARY] [JOBS] [SWEEP_FILE]
#   (about 20 minutes on 2 cores; benches/synthetic_entropy_default.toml is the default world)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
bin="$(realpath "${1:-target/release/pdsweep}")"
jobs="${2:-2}"
sweep="$root/${3:-benches/synthetic_entropy.toml}"
name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$sweep" | head -1)
work="${SYNTH_DIR:-target/synthetic-entropy}/$name"
mkdir -p "$work"
cp "$sweep" "$work/sweep.toml"
cd "$work"
start=$(date +%s)
"$bin" run sweep.toml --jobs "$jobs" --stack off > run.log 2>&1 || { tail -20 run.log; exit 1; }
echo "sweep $name: $(( $(date +%s) - start )) s"
"$bin" fit sweep.toml --format json > fit.json
"$bin" fit sweep.toml | sed -n '/^supervised law/,/^$/p'
rate=$(sqlite3 "results/$name/sweep.db" \
  "SELECT json_extract(corpus_json, '$.entropy_rate_nats') FROM results WHERE corpus_json IS NOT NULL LIMIT 1")
python3 - "$rate" <<'PY'
import json, sys
rate = float(sys.argv[1])
fit = json.load(open("fit.json"))["supervised"]
e = fit["params"]["E"]
lo, hi = fit["ci"].get("E", [float("nan"), float("nan")])
err = abs(e - rate) / rate
print(f"entropy rate {rate:.4f} nats/token; fitted E {e:.4f} (95% CI {lo:.4f} - {hi:.4f}); "
      f"relative error {100 * err:.1f} % ({'within' if err <= 0.05 else 'NOT within'} 5 %)")
PY
