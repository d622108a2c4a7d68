"""What crossing tokenizers costs, from a reference sweep's exported runs (issue 27).

    python benches/cross_share.py results/cross-byte/export/runs.csv [--tokens-per-s]

For every student, its gain is its same-seed baseline's held-out loss minus its own (nats per
student token). Teachers of the students' own tokenizer give gain as a function of the
teacher's held-out bits per byte (linear through their seed-mean points; with two teachers,
the line through them). For each teacher of another tokenizer and each loss, the *share kept*
is the mean gain across tokenizers divided by the gain the same-tokenizer line gives at that
teacher's bits per byte: 1 means crossing costs nothing, 0 that the teacher is worth nothing
across. The 95 % interval comes from resampling the seeds (the same seeds for every run, as
the fits' seed bootstrap does). Students' tokens/s compare the cost of alignment: offline
cross-tokenizer students against offline same-tokenizer students of the same shape (medians).

Standard library only, so it runs without the CI's venv.
"""

import csv
import random
import statistics
import sys
from collections import defaultdict


def read(path):
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["state"] == "done"]


def teacher_of(name):
    # student-S-from-TEACHER[-uld|-gold]-sN
    rest = name.split("-from-", 1)[1]
    parts = rest.split("-")
    loss = None
    if parts[-1].startswith("s") and parts[-1][1:].isdigit():
        parts = parts[:-1]
    if parts[-1] in ("uld", "gold"):
        loss = parts[-1]
        parts = parts[:-1]
    return "-".join(parts), loss


def main():
    path = sys.argv[1]
    runs = read(path)
    teachers = {r["id"]: r for r in runs if r["kind"] == "teacher"}
    students = [r for r in runs if r["kind"] == "student"]
    # group: (teacher id, loss) -> seed -> gain
    gains = defaultdict(dict)
    speed = defaultdict(list)
    for s in students:
        if not s["gain"]:
            continue
        _, loss = teacher_of(s["name"])
        key = (s["teacher_id"], loss)
        gains[key][int(s["seed"])] = float(s["gain"])
        speed[loss is not None].append(float(s["tokens_per_s"]))
    same = [k for k in gains if k[1] is None]
    cross = sorted(k for k in gains if k[1] is not None)
    if len(same) < 2:
        sys.exit("need two teachers of the students' tokenizer for the reference line")
    seeds = sorted(set.intersection(*(set(gains[k]) for k in gains)))
    bpb = {k: float(teachers[k[0]]["val_bpb"]) for k in gains}

    def line(sample):
        xs = [bpb[k] for k in same]
        ys = [statistics.mean(gains[k][s] for s in sample) for k in same]
        mx, my = statistics.mean(xs), statistics.mean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        return lambda x: my + slope * (x - mx)

    print(f"seeds {seeds}; teachers of the students' tokenizer:")
    for k in same:
        g = [gains[k][s] for s in seeds]
        print(f"  {teachers[k[0]]['name']:<32} bpb {bpb[k]:.4f}  gain {statistics.mean(g):+.4f}")
    rng = random.Random(27)
    print("across tokenizers (share of the same-tokenizer gain at equal bits per byte, 95 % seed interval):")
    for k in cross:
        g = statistics.mean(gains[k][s] for s in seeds)
        ref = line(seeds)(bpb[k])
        shares = []
        for _ in range(2000):
            sample = [rng.choice(seeds) for _ in seeds]
            r = line(sample)(bpb[k])
            if abs(r) > 1e-9:
                shares.append(statistics.mean(gains[k][s] for s in sample) / r)
        shares.sort()
        lo, hi = shares[int(0.025 * len(shares))], shares[int(0.975 * len(shares)) - 1]
        print(
            f"  {teachers[k[0]]['name']:<24} {k[1]:<5} bpb {bpb[k]:.4f}  gain {g:+.4f}"
            f"  same-tokenizer gain there {ref:+.4f}  share {g / ref:+.2f} [{lo:+.2f}, {hi:+.2f}]"
        )
    if speed[True] and speed[False]:
        a, b = statistics.median(speed[True]), statistics.median(speed[False])
        print(f"students' tokens/s (medians): across {a:.0f}, same {b:.0f}: ratio {a / b:.2f}")


if __name__ == "__main__":
    main()
