#!/usr/bin/env bash
# The shared logit store against per-seed stores, side by side on this machine: the design of
# benches/shared_store/shared.toml (a named subset of the round-9 capacity-gap design) run once
# as written (one store per teacher for the four seeds) and once as four one-seed sweeps (each
# seed its own logit passes and stores, as before stores were shared), each into an empty
# results folder. Prints, per way, the summed run wall times by kind (`--jobs 1`, so a run has
# the machine's cores to itself: wall time stands for CPU time), the logit stores' bytes, and
# whether every student's held-out loss is the same both ways.
#   benches/shared_store.sh [PDSWEEP_BINARY]   (default: target/release/pdsweep)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/pdsweep}"
out="${PDSWEEP_BENCH_DIR:-/var/tmp/pdsweep-shared-store-bench}"
rm -rf "$out" && mkdir -p "$out"
dir=benches/shared_store
for seed in 1 2 3 4; do
    sed -e "s/^name = \"shared-store\"/name = \"per-seed-$seed\"/" \
        -e "s/^seed = \[1, 2, 3, 4\]/seed = [$seed]/" "$dir/shared.toml" > "$dir/per-seed-$seed.toml"
done
trap 'rm -f "$dir"/per-seed-*.toml' EXIT
/usr/bin/time -f "shared: %e s wall, %U s user" "$bin" run "$dir/shared.toml" --results "$out" --jobs 1 > "$out/shared.log" 2>&1 || { tail "$out/shared.log"; exit 1; }
tail -1 "$out/shared.log"
for seed in 1 2 3 4; do
    /usr/bin/time -f "per-seed-$seed: %e s wall, %U s user" "$bin" run "$dir/per-seed-$seed.toml" --results "$out" --jobs 1 > "$out/per-seed-$seed.log" 2>&1 || { tail "$out/per-seed-$seed.log"; exit 1; }
    tail -1 "$out/per-seed-$seed.log"
done
python3 - "$out" <<'PY'
import json, sqlite3, sys
out = sys.argv[1]
def load(name):
    c = sqlite3.connect(f"{out}/{name}/sweep.db")
    rows = c.execute("select r.id, r.kind, r.name, s.val_loss, s.wall_s, s.extra_json from runs r join results s on s.run_id = r.id").fetchall()
    return rows
def summary(rows):
    by = {}
    store = 0
    for id_, kind, name, loss, wall, extra in rows:
        by[kind] = by.get(kind, 0.0) + wall
        if kind == "logits":
            store += json.loads(extra or "{}").get("store_bytes", 0)
    return by, store
shared = load("shared-store")
per = [r for s in (1, 2, 3, 4) for r in load(f"per-seed-{s}")]
(bs, ss), (bp, sp) = summary(shared), summary(per)
# the per-seed way trains the same teachers once per sweep; a design trains them once
teachers = bs.get("teacher", 0.0)
def total(by, teachers):
    return teachers + sum(v for k, v in by.items() if k != "teacher")
ts, tp = total(bs, teachers), total(bp, teachers)
print(f"{'':24}{'shared':>12}{'per-seed':>12}{'ratio':>8}")
for kind in ("teacher", "logits", "student", "baseline"):
    a = bs.get(kind, 0.0); b = bp.get(kind, 0.0) if kind != "teacher" else teachers
    print(f"{kind + ' wall (s)':24}{a:12.1f}{b:12.1f}{a / b if b else float('nan'):8.3f}")
print(f"{'design wall (s)':24}{ts:12.1f}{tp:12.1f}{ts / tp:8.3f}   (teachers counted once both ways)")
print(f"{'logit store bytes':24}{ss:12d}{sp:12d}{ss / sp:8.3f}")
ls = {(n, k): l for _, k, n, l, _, _ in shared if k in ("student", "baseline")}
lp = {}
for _, k, n, l, _, _ in per:
    if k in ("student", "baseline"):
        lp[(n, k)] = l
# names carry the seed only when a sweep has several seeds: match on the name without it
def strip(n):
    import re
    return re.sub(r"-s[0-9]+$", "", n)
worst, matched = 0.0, 0
per_by = {}
for (n, k), l in lp.items():
    per_by.setdefault((strip(n), k), []).append(l)
shared_ids = {i: l for i, k, n, l, _, _ in shared if k in ("student", "baseline")}
per_ids = {i: l for i, k, n, l, _, _ in per if k in ("student", "baseline")}
for i, l in shared_ids.items():
    if i in per_ids:
        matched += 1
        worst = max(worst, abs(l - per_ids[i]))
print(f"students and baselines with the same id both ways: {matched} of {len(shared_ids)}; largest held-out loss difference {worst:.3e} nats")
PY
