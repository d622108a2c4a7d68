#!/usr/bin/env bash
# Throughput of offline students across tokenizers against same-tokenizer students of the same
# shape (issue 27's goal: at least 0.8x). Runs benches/cross_throughput.toml one run at a time
# into a fresh results folder and prints each student's tokens/s, the medians and their ratio.
#   benches/cross_throughput.sh [path/to/pdsweep]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/pdsweep}"
rm -rf results/cross-throughput
"$bin" run benches/cross_throughput.toml --jobs 1 --stack off >/dev/null
python3 - <<'PY'
import sqlite3, statistics
c = sqlite3.connect("results/cross-throughput/sweep.db")
rows = c.execute("""SELECT r.name, s.tokens_per_s FROM runs r JOIN results s ON s.run_id = r.id
                    WHERE r.kind = 'student' ORDER BY r.name""").fetchall()
same = [t for n, t in rows if "-from-t-same" in n]
cross = [t for n, t in rows if "-from-t-cross" in n]
for n, t in rows:
    print(f"  {n:<40} {t:>9.0f} tokens/s")
a, b = statistics.median(cross), statistics.median(same)
print(f"median tokens/s: across tokenizers {a:.0f}, same tokenizer {b:.0f}; ratio {a / b:.2f}")
PY
rm -rf results/cross-throughput
