#!/usr/bin/env bash
# Preparation at scale, side by side: pdsweep's corpus preparation (`pdsweep plan` on
# sweep.toml: stream the shards, tokenise, split, write the cache) against the Python
# `tokenizers` library's `encode_batch` alone on the same documents, tokenizer and threads,
# with each one's wall time and peak resident memory (GNU time).
#
#   benches/corpus/compare.sh [TOKENIZER_JSON] [CORPUS_BYTES]
#
# The corpus (benches/corpus/shards/, made once by make_corpus.py, ignored by git) is every
# .py/.txt/.md/.rst file of CI's Python environment and /usr/share/doc, topped up with numbered
# copies of Shakespeare. TOKENIZER_JSON defaults to SmolLM2's (benches/smollm2.py's folder);
# CORPUS_BYTES to 250 MB. THREADS (default "1 2") are the thread counts compared.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
venv="${PDSWEEP_CI_VENV:-/var/tmp/pdsweep-ci-venv}"
tokenizer="${1:-${PDSWEEP_SMOLLM2:-/var/tmp/pdsweep-smollm2}/tokenizer.json}"
bytes="${2:-250e6}"
pdsweep="${PDSWEEP_BIN:-${CARGO_TARGET_DIR:-target}/release/pdsweep}"
[ -x "$pdsweep" ] || cargo build --release --bin pdsweep
"$venv/bin/python" -c "import zstandard" 2>/dev/null || "$venv/bin/pip" install -q zstandard
if [ ! -d "$here/shards" ]; then
    site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    "$venv/bin/python" "$here/make_corpus.py" "$here/shards" "$bytes" ../shared/data/shakespeare \
        "$site" /usr/share/doc
fi
cp "$tokenizer" "$here/tokenizer.json"
grep -m1 -o 'model name.*' /proc/cpuinfo
echo "corpus: $(du -sh "$here/shards" | cut -f1) compressed in $(ls "$here/shards" | wc -l) shards"
for t in ${THREADS:-1 2}; do
    rm -rf "$here/results"
    RAYON_NUM_THREADS=$t /usr/bin/time -f "pdsweep  threads $t: %e s, peak %M KiB" \
        "$pdsweep" plan "$here/sweep.toml" --results "$here/results" >/dev/null
    RAYON_NUM_THREADS=$t /usr/bin/time -f "python   threads $t: %e s, peak %M KiB (encode_batch alone: see above)" \
        "$venv/bin/python" "$here/encode_batch.py" "$here/shards" "$here/tokenizer.json"
done
"$venv/bin/python" - "$here/results" <<'PY'
import glob, json, sys
for f in glob.glob(sys.argv[1] + "/**/corpus-*.json", recursive=True):
    print(f, json.load(open(f))["documents"], "documents")
for f in glob.glob(sys.argv[1] + "/**/tokens-*.bin", recursive=True):
    import os; print(f, os.path.getsize(f) / 1e6, "MB")
PY
