#!/usr/bin/env bash
# Side by side on this machine: the wall time of a whole sweep under two pdsweep binaries,
# interleaved (A, B, A, B, ...) in fresh results folders, and each run's final losses compared.
# Runs are deterministic, but two builds that sum in different orders agree only to float
# rounding, which a sensitive run (one leaving a loss plateau) can amplify. CPU time (user +
# sys) is printed too: on a shared machine it moves less with the load than wall time.
#
#   benches/compare_sweep.sh BASELINE_BIN NEW_BIN [SWEEP] [ROUNDS] [-- extra `run` options]
#
# SWEEP defaults to benches/capacity_gap_subset.toml (a fixed subset of the capacity-gap
# sweep; its logit pass stores 1M positions, not 2M), ROUNDS to 3. Prints each round's wall
# and CPU time, the medians and their ratios, and the final losses of both, run by run.
set -euo pipefail
cd "$(dirname "$0")/.."
base="$1"
new="$2"
sweep="${3:-benches/capacity_gap_subset.toml}"
rounds="${4:-3}"
shift $(($# < 4 ? $# : 4))
[ "${1:-}" = "--" ] && shift
work="$(mktemp -d /tmp/pdsweep-compare-XXXXXX)"
name="$(sed -n 's/^name *= *"\(.*\)"/\1/p' "$sweep" | head -1)"
declare -a times_a times_b cpu_a cpu_b
for r in $(seq 1 "$rounds"); do
  for side in a b; do
    bin="$base"; [ "$side" = b ] && bin="$new"
    out="$work/$side$r"
    /usr/bin/time -f '%e %U %S' -o "$out.time" "$bin" run "$sweep" --results "$out" "$@" \
      >/dev/null 2>"$out.log" || { echo "round $r ($side) failed: see $out.log" >&2; exit 1; }
    read -r t user sys < "$out.time"
    cpu=$(echo "$user + $sys" | bc)
    if [ "$side" = a ]; then times_a+=("$t"); cpu_a+=("$cpu"); else times_b+=("$t"); cpu_b+=("$cpu"); fi
    printf 'round %d %-5s wall %8.1f s   cpu %8.1f s   load %s\n' "$r" \
      "$([ "$side" = a ] && echo base || echo new)" "$t" "$cpu" "$(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ma=$(median "${times_a[@]}"); mb=$(median "${times_b[@]}")
echo "median wall: base $ma s, new $mb s, ratio base/new $(echo "scale=2; $ma / $mb" | bc)"
ca=$(median "${cpu_a[@]}"); cb=$(median "${cpu_b[@]}")
echo "median cpu:  base $ca s, new $cb s, ratio base/new $(echo "scale=2; $ca / $cb" | bc)"
query="SELECT r.name, s.val_loss, IFNULL(s.train_loss, '-') FROM runs r JOIN results s ON s.run_id = r.id ORDER BY r.name"
sqlite3 -separator ' ' "$work/a1/$name/sweep.db" "$query" | LC_ALL=C sort > "$work/losses_a"
sqlite3 -separator ' ' "$work/b1/$name/sweep.db" "$query" | LC_ALL=C sort > "$work/losses_b"
LC_ALL=C join "$work/losses_a" "$work/losses_b" | awk '
  function abs(x) { return x < 0 ? -x : x }
  { dv = abs($2 - $4); dt = ($3 == "-" || $5 == "-") ? 0 : abs($3 - $5);
    printf "  %-28s val %.6f vs %.6f (|d| %.2e)   train %s vs %s\n", $1, $2, $4, dv, $3, $5;
    if (dv > mv) mv = dv; if (dt > mt) mt = dt; n++ }
  END { printf "%d runs: max |d val_loss| %.2e, max |d train_loss| %.2e\n", n, mv, mt }'
echo "results kept in $work"
