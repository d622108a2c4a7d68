"""What crossing tokenizers costs, from a reference sweep's exported runs (issue 27).

    python benches/cross_share.py results/cross-byte/export/runs.csv [--tokens-per-s]

For every student, its gain is its same-seed baseline's held-out loss minus its own (nats per
student token). Students are grouped by the sweep's other distillation axes (the `distill`
column, e.g. `α=0.5`), each group compared with the same-tokenizer teachers of that group. Teachers of the students' own tokenizer give gain as a function of the
teacher's held-out bits per byte (linear through their seed-mean points; with two teachers,
the line through them), read only within 0.2 bits per byte of them: a teacher of another
tokenizer further away gets its gain and interval but no share. For each teacher of another tokenizer and each loss, the *share kept*
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


def setting_of(distill):
    # the export names a student's cross-tokenizer loss ("α=0.9 GOLD across"): that is `loss`;
    # where crossing is the sweep's only difference, the others are the "same tokenizer"
    words = [w for w in distill.split() if w not in ("GOLD", "ULD", "across")]
    return "" if words in (["reference", "setting"], ["same", "tokenizer"]) else " ".join(words)


def loss_of(name, distill):
    # the cross-tokenizer loss: from the export's distill column, else the run's name suffix
    words = distill.split()
    for label in ("GOLD", "ULD"):
        if label in words:
            return label.lower()
    return teacher_of(name)[1]


def main():
    path = sys.argv[1]
    runs = read(path)
    teachers = {r["id"]: r for r in runs if r["kind"] == "teacher"}
    students = [r for r in runs if r["kind"] == "student"]
    # setting (the distill column) -> (teacher id, loss) -> seed -> gain
    gains = defaultdict(lambda: defaultdict(dict))
    speed = defaultdict(list)
    for s in students:
        if not s["gain"]:
            continue
        loss = loss_of(s["name"], s["distill"])
        gains[setting_of(s["distill"])][(s["teacher_id"], loss)][int(s["seed"])] = float(s["gain"])
        speed[loss is not None].append(float(s["tokens_per_s"]))
    for setting in sorted(gains):
        compare(setting, gains[setting], teachers)
    if speed[True] and speed[False]:
        a, b = statistics.median(speed[True]), statistics.median(speed[False])
        print(f"students' tokens/s (medians): across {a:.0f}, same {b:.0f}: ratio {a / b:.2f}")


def compare(setting, gains, teachers):
    same = [k for k in gains if k[1] is None]
    cross = sorted(k for k in gains if k[1] is not None)
    label = setting or "(one setting)"
    if len(same) < 2:
        print(f"{label}: need two teachers of the students' tokenizer for the reference line")
        return
    seeds = sorted(set.intersection(*(set(gains[k]) for k in gains)))
    bpb = {k: float(teachers[k[0]]["val_bpb"]) for k in gains}

    def line(sample):
        xs = [bpb[k] for k in same]
        ys = [statistics.mean(gains[k][s] for s in sample) for k in same]
        mx, my = statistics.mean(xs), statistics.mean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        return lambda x: my + slope * (x - mx)

    print(f"{label}: seeds {seeds}; teachers of the students' tokenizer:")
    for k in same:
        g = [gains[k][s] for s in seeds]
        print(f"  {teachers[k[0]]['name']:<32} bpb {bpb[k]:.4f}  gain {statistics.mean(g):+.4f}")
    rng = random.Random(27)
    resamples = [[rng.choice(seeds) for _ in seeds] for _ in range(2000)]
    xs = sorted(bpb[k] for k in same)
    print("  across tokenizers (gain and share of the same-tokenizer gain at equal bits per byte, 95 % seed intervals):")
    for k in cross:
        mean = lambda sample: statistics.mean(gains[k][s] for s in sample)
        g = mean(seeds)
        g_lo, g_hi = interval([mean(sample) for sample in resamples])
        head = (
            f"  {teachers[k[0]]['name']:<30} {k[1]:<5} bpb {bpb[k]:.4f}"
            f"  gain {g:+.4f} [{g_lo:+.4f}, {g_hi:+.4f}]"
        )
        # the same-tokenizer line is read only near the teachers it was drawn through
        if not xs[0] - REACH <= bpb[k] <= xs[-1] + REACH:
            print(f"{head}  share: no teacher of the students' tokenizer within {REACH} bpb")
            continue
        ref = line(seeds)(bpb[k])
        shares = []
        for sample in resamples:
            r = line(sample)(bpb[k])
            if abs(r) > 1e-9:
                shares.append(mean(sample) / r)
        lo, hi = interval(shares)
        print(f"{head}  same-tokenizer gain there {ref:+.4f}  share {g / ref:+.2f} [{lo:+.2f}, {hi:+.2f}]")


# how far (bits per byte) outside its teachers the same-tokenizer line is read
REACH = 0.2


def interval(values):
    values = sorted(values)
    return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]

if __name__ == "__main__":
    main()
