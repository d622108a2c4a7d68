#!/usr/bin/env bash
# Throughput of offline students across tokenizers against same-tokenizer students of the same
# shape (issue 27's goal: at least 0.8x). Runs benches/cross_throughput.toml (BPE-1K students;
# teachers of that BPE and of a BPE-2K) and benches/cross_throughput_byte.toml (byte students;
# teachers of bytes and of a BPE-1K), one run at a time, each into a fresh results folder, and
# prints each student's tokens/s, the medians and their ratio.
#   benches/cross_throughput.sh [path/to/pdsweep]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/pdsweep}"
for name in cross-throughput cross-throughput-byte; do
    toml="benches/${name//-/_}.toml"
    rm -rf "results/$name"
    "$bin" run "$toml" --jobs 1 --stack off >/dev/null
    echo "$toml:"
    python3 - "$name" <<'PY'
import sqlite3, statistics, sys
c = sqlite3.connect(f"results/{sys.argv[1]}/sweep.db")
rows = c.execute("""SELECT r.name, s.tokens_per_s FROM runs r JOIN results s ON s.run_id = r.id
                    WHERE r.kind = 'student' ORDER BY r.name""").fetchall()
same = [t for n, t in rows if "-from-t-same" in n]
cross = [t for n, t in rows if "-from-t-cross" in n]
for n, t in rows:
    print(f"  {n:<40} {t:>9.0f} tokens/s")
a, b = statistics.median(cross), statistics.median(same)
print(f"  median tokens/s: across tokenizers {a:.0f}, same tokenizer {b:.0f}; ratio {a / b:.2f}")
PY
    rm -rf "results/$name"
done
