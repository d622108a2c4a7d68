#!/usr/bin/env bash
# The stack row of the GPU benchmark (issue 12, goal >= 20x): 32 quick-start-sized students
# trained as one stack against one alone, through `pdsweep run`, on the backend given as $1
# (cuda or wgpu; the binary must be built with that feature). Prints the stack's tokens/s (sum
# over its members), one run alone's (median of the solo runs) and their ratio.
# Usage: benches/stack_gpu.sh cuda [path/to/pdsweep]
set -euo pipefail
backend="${1:-cuda}"
bin="${2:-target/release/pdsweep}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
sed "s/^backend = .*/backend = \"$backend\"/" "$here/stack_gpu.toml" > "$work/stack-gpu.toml"
for mode in off 32; do
  "$bin" run "$work/stack-gpu.toml" --results "$work/results-$mode" --stack "$mode" >&2
  "$bin" status "$work/stack-gpu.toml" --results "$work/results-$mode" --format json > "$work/$mode.json"
done
python3 - "$work/off.json" "$work/32.json" <<'PY'
import json, statistics, sys
def students(path):
    runs = json.load(open(path))["runs"]
    return [r for r in runs if r["kind"] in ("student", "baseline") and r["tokens_per_s"]]
alone = statistics.median(r["tokens_per_s"] for r in students(sys.argv[1]))
members = [r for r in students(sys.argv[2]) if r.get("stack")]
stacked = sum(r["tokens_per_s"] for r in members)
print(f"one alone: {alone:.0f} tokens/s; stack of {len(members)}: {stacked:.0f} tokens/s; ratio {stacked / alone:.1f}x")
PY
