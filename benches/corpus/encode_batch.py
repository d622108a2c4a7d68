"""The reference for benches/corpus/compare.sh: the Python `tokenizers` library's encode_batch
on every document of the JSON-lines shards (read first, not timed), in batches of 1,000
documents, with special tokens as pdsweep adds them; threads from RAYON_NUM_THREADS."""
import glob
import json
import sys
import time

import tokenizers
import zstandard

shards, tokenizer = sys.argv[1], sys.argv[2]
docs = []
for path in sorted(glob.glob(shards + "/*.jsonl.zst")):
    with open(path, "rb") as f:
        text = zstandard.ZstdDecompressor().stream_reader(f).read().decode()
    docs.extend(json.loads(line)["text"] + "\n\n" for line in text.splitlines() if line.strip())
tok = tokenizers.Tokenizer.from_file(tokenizer)
start = time.perf_counter()
n = 0
for i in range(0, len(docs), 1000):
    n += sum(len(e.ids) for e in tok.encode_batch(docs[i : i + 1000], add_special_tokens=True))
elapsed = time.perf_counter() - start
mb = sum(len(d.encode()) for d in docs) / 1e6
print(f"encode_batch: {len(docs)} documents, {mb:.1f} MB, {n} tokens in {elapsed:.1f} s: {n / elapsed / 1e6:.2f} M tokens/s")
