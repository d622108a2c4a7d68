#!/usr/bin/env bash
# What running on Slurm costs against a local run, on the same machine: a tiny sweep (a teacher,
# its logit pass, an offline and an online student, a baseline: the sweep of tests/slurm.rs) run
# with `pdsweep run --jobs 2` and with `pdsweep slurm` on a one-node cluster (1 CPU per job, so
# two jobs at once), interleaved. Prints each repeat, the median wall times and their ratio, the
# teacher's training tokens/s both ways, and how many metric files the jobs wrote.
# Needs a running Slurm: `eval "$(.ci/slurm/start.sh)"` (as root) starts one.
# Usage: benches/slurm.sh [REPEATS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-3}"
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/pdsweep"
sinfo -h >/dev/null || { echo "no Slurm here: run eval \"\$(.ci/slurm/start.sh)\" first" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sweep() {
  sed -n '/^const SWEEP: &str = r#"/,/^"#;/p' tests/slurm.rs | sed '1d;$d' | sed "s/NAME/$1/"
}
teacher_tps() {
  python3 - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("SELECT s.tokens_per_s FROM results s JOIN runs r ON r.id = s.run_id WHERE r.kind = 'teacher'").fetchone()[0])
PY
}
local_s=(); slurm_s=(); local_tps=(); slurm_tps=()
for i in $(seq "$repeats"); do
  for mode in local slurm; do
    dir="$work/$mode$i"; mkdir -p "$dir"; sweep "bench-$mode$i" > "$dir/s.toml"
    start=$(date +%s.%N)
    if [ "$mode" = local ]; then
      (cd "$dir" && "$bin" run s.toml --jobs 2 2>/dev/null)
    else
      (cd "$dir" && "$bin" slurm s.toml --poll 1 --settle 1 2>/dev/null)
    fi
    secs=$(python3 -c "print(round($(date +%s.%N) - $start, 2))")
    tps=$(teacher_tps "$dir/results/bench-$mode$i/sweep.db")
    echo "repeat $i $mode: ${secs} s, teacher ${tps} tokens/s"
    if [ "$mode" = local ]; then local_s+=("$secs"); local_tps+=("$tps"); else slurm_s+=("$secs"); slurm_tps+=("$tps"); fi
  done
done
files=$(find "$work"/slurm*/results/*/slurm/runs -name 'm-*.json' | wc -l)
python3 - "${local_s[*]}" "${slurm_s[*]}" "${local_tps[*]}" "${slurm_tps[*]}" "$files" "$repeats" <<'PY'
import statistics as st, sys
ls, ss, lt, stt = ([float(x) for x in a.split()] for a in sys.argv[1:5])
files, repeats = int(sys.argv[5]), int(sys.argv[6])
print(f"median wall: local {st.median(ls):.1f} s, slurm {st.median(ss):.1f} s, ratio {st.median(ss) / st.median(ls):.2f}")
print(f"teacher tokens/s: local {st.median(lt):.0f}, in a Slurm job {st.median(stt):.0f} (ratio {st.median(stt) / st.median(lt):.2f})")
print(f"metric files written by the jobs: {files / repeats:.0f} per sweep")
PY
