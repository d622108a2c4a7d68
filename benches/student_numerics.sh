#!/usr/bin/env bash
# Whether two or more pdsweep binaries compute the same numbers: runs benches/student_numerics.toml
# with each binary into its own empty results folder and prints every run's held-out loss
# against the first binary's (by run id; a run whose id the first does not have is listed as
# such). Used to bisect the students' numeric change since 1 December (see
# docs/src/findings/capacity-gap.md): build a commit, copy its target/release/pdsweep aside,
# and pass the copies here, oldest first.
#   benches/student_numerics.sh BIN_A BIN_B [BIN_C ...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BIN_A BIN_B [BIN_C ...]" >&2; exit 2; }
out="${PDSWEEP_BENCH_DIR:-/var/tmp/pdsweep-student-numerics}"
rm -rf "$out" && mkdir -p "$out"
dbs=()
for i in $(seq 1 $#); do
    bin="${!i}"
    "$bin" run benches/student_numerics.toml --results "$out/$i" > "$out/$i.log" 2>&1
    dbs+=("$out/$i/student-numerics/sweep.db")
done
python3 - "$@" -- "${dbs[@]}" <<'PY'
import sqlite3, sys
args = sys.argv[1:]
cut = args.index("--")
bins, dbs = args[:cut], args[cut + 1:]
runs = []
for db in dbs:
    c = sqlite3.connect(db)
    runs.append({i: (n, l) for i, n, l in c.execute(
        "select r.id, r.name, s.val_loss from runs r join results s on s.run_id = r.id")})
print("run".ljust(28) + "".join(b[-24:].rjust(26) for b in bins[1:]))
for rid, (name, loss) in sorted(runs[0].items(), key=lambda kv: kv[1][0]):
    cells = []
    for other in runs[1:]:
        cells.append(f"{other[rid][1] - loss:+.3g}" if rid in other else "other id")
    print(name.ljust(28) + "".join(c.rjust(26) for c in cells))
PY
