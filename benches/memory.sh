#!/usr/bin/env bash
# The memory model against what runs use: plans benches/memory/smollm2-vocab.toml (V = 49,152,
# SmolLM2's tokenizer from benches/smollm2.py's folder, PDSWEEP_SMOLLM2, default
# /var/tmp/pdsweep-smollm2), runs it one run at a time (each run's peak-RSS window is its own)
# and prints every run's predicted peak beside the recorded one. Extra arguments go to `run`.
set -euo pipefail
cd "$(dirname "$0")/.."
model="${PDSWEEP_SMOLLM2:-/var/tmp/pdsweep-smollm2}"
[ -f "$model/tokenizer.json" ] || { echo "no $model/tokenizer.json: run benches/smollm2.py $model first" >&2; exit 1; }
ln -sfn "$model" benches/memory/smollm2
work="$(mktemp -d /tmp/pdsweep-memory-XXXXXX)"
cargo build --release --quiet
bin=target/release/pdsweep
[ -n "${CARGO_TARGET_DIR:-}" ] && bin="$CARGO_TARGET_DIR/release/pdsweep"
"$bin" plan benches/memory/smollm2-vocab.toml --results "$work" --format json > "$work/plan.json"
"$bin" run benches/memory/smollm2-vocab.toml --results "$work" --jobs 1 "$@" > "$work/run.log" 2>&1
python3 - "$work" <<'PY'
import json, sqlite3, sys, glob
work = sys.argv[1]
plan = json.load(open(f"{work}/plan.json"))
db = sqlite3.connect(glob.glob(f"{work}/*/sweep.db")[0])
peaks = dict(db.execute("select run_id, peak_rss_bytes from results"))
print(f"{'run':<28} {'kind':<9} {'predicted':>10} {'measured':>10} {'ratio':>6}")
for r in plan["runs"]:
    got = peaks.get(r["id"])
    want = r["memory_bytes"]
    if got:
        print(f"{r['name']:<28} {r['kind']:<9} {want / 2**20:>8.0f}Mi {got / 2**20:>8.0f}Mi {got / want:>6.2f}")
PY
