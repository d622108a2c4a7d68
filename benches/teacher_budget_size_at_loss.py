# Is the optimal teacher a loss, or does size matter at equal loss? From the teacher-budget
# reference's exports (results/teacher-budget/export/runs.csv): for each student size, the mean
# gain over its same-seed baseline per teacher (every size at every budget) is fitted as
#   gain = a + b·(L_T − m) + c·(L_T − m)² + k·ln(N_T / N_S)
# (L_T the teacher's held-out nats per token, m its mean), by least squares. k is the change of
# gain per e-fold of teacher size at equal teacher loss: 0 if the teacher matters only through
# its loss. Its 95 % interval comes from resampling seeds (gains are paired with their seed's
# baseline, so a resample draws seeds, with every teacher's student of that seed). Teachers
# whose loss is above the student's own baseline loss are left out (they only hurt, and a
# quadratic in L_T does not follow them).
# Usage: python3 benches/teacher_budget_size_at_loss.py [EXPORT_DIR]   (7 December 2026)
import collections, csv, math, random, sys

folder = sys.argv[1] if len(sys.argv) > 1 else "results/teacher-budget/export"
runs = list(csv.DictReader(open(f"{folder}/runs.csv")))
teachers = {r["id"]: r for r in runs if r["kind"] == "teacher" and r["state"] == "done"}
baselines = collections.defaultdict(list)
for r in runs:
    if r["kind"] == "baseline" and r["state"] == "done" and r["val_loss"]:
        baselines[float(r["params_non_embedding"])].append(float(r["val_loss"]))


def solve(a, b):
    """Gaussian elimination with partial pivoting: x with a·x = b."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-300:
            return None
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(points):
    """Least squares of gain on [1, dL, dL², ln(N_T/N_S)]; returns the coefficients."""
    mean_l = sum(p[0] for p in points) / len(points)
    rows = [[1.0, l - mean_l, (l - mean_l) ** 2, r] for l, r, _ in points]
    ys = [g for _, _, g in points]
    ata = [[sum(x[i] * x[j] for x in rows) for j in range(4)] for i in range(4)]
    aty = [sum(x[i] * y for x, y in zip(rows, ys)) for i in range(4)]
    return solve(ata, aty)


def points_for(gains, seeds, s):
    """(L_T, ln(N_T/N_S), mean gain over `seeds`) per teacher."""
    out = []
    for tid, by_seed in gains.items():
        vals = [by_seed[x] for x in seeds if x in by_seed]
        if vals:
            t = teachers[tid]
            ratio = math.log(float(t["params_non_embedding"]) / s)
            out.append((float(t["val_loss"]), ratio, sum(vals) / len(vals)))
    return out


sizes = sorted({float(r["params_non_embedding"]) for r in runs if r["kind"] == "student"})
print("student  teachers  seeds  k (gain per e-fold of teacher size at equal loss)  95% interval")
for s in sizes:
    base = sum(baselines[s]) / len(baselines[s]) if baselines[s] else float("inf")
    gains = collections.defaultdict(dict)
    for r in runs:
        if (r["kind"] == "student" and r["state"] == "done" and r["gain"]
                and float(r["params_non_embedding"]) == s and r["teacher_id"] in teachers
                and float(teachers[r["teacher_id"]]["val_loss"]) < base):
            gains[r["teacher_id"]][int(r["seed"])] = float(r["gain"])
    seeds = sorted({x for g in gains.values() for x in g})
    if len(gains) < 5:
        print(f"{s:7.0f}  {len(gains):8d}  too few teachers below the baseline's loss")
        continue
    k = fit(points_for(gains, seeds, s))[3]
    rng = random.Random(1)
    draws = []
    for _ in range(2000):
        pick = [rng.choice(seeds) for _ in seeds]
        pts = []
        for tid, by_seed in gains.items():
            vals = [by_seed[x] for x in pick if x in by_seed]
            if vals:
                t = teachers[tid]
                pts.append((float(t["val_loss"]), math.log(float(t["params_non_embedding"]) / s), sum(vals) / len(vals)))
        c = fit(pts)
        if c:
            draws.append(c[3])
    draws.sort()
    lo, hi = draws[int(0.025 * len(draws))], draws[int(0.975 * len(draws)) - 1]
    print(f"{s:7.0f}  {len(gains):8d}  {len(seeds):5d}  {k:+.4f} nats{'':30s}[{lo:+.4f}, {hi:+.4f}]")
