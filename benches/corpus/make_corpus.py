"""Makes a large real-text corpus from what this machine has, as zstd-compressed JSON-lines
shards (`{"id": ..., "text": ...}`), for the preparation benchmarks (benches/corpus/compare.sh).

Sources, in this order until TARGET bytes of text are written:
  1. every `.py`, `.txt`, `.md` and `.rst` file under the given folders (e.g. a virtual
     environment's site-packages and /usr/share/doc), each file one document;
  2. then copies of the Shakespeare corpus, each play one document with the copy's number in its
     first line, so no two documents are identical (exact duplicates would be dropped).

usage: make_corpus.py OUT_DIR TARGET_BYTES SHAKESPEARE_DIR [FOLDER ...]
"""
import json
import os
import sys

import zstandard  # noqa: F401  (optional; falls back to the zstd command)


def texts(folders, shakespeare):
    for folder in folders:
        for root, _, names in sorted(os.walk(folder)):
            for name in sorted(names):
                if name.endswith((".py", ".txt", ".md", ".rst")):
                    path = os.path.join(root, name)
                    try:
                        with open(path, encoding="utf-8") as f:
                            yield path, f.read()
                    except (UnicodeDecodeError, OSError):
                        continue
    plays = sorted(os.listdir(shakespeare))
    copy = 0
    while True:
        for play in plays:
            with open(os.path.join(shakespeare, play), encoding="utf-8") as f:
                yield f"{play}#{copy}", f"Copy {copy} of {play}\n" + f.read()
        copy += 1


def main():
    out, target, shakespeare, *folders = sys.argv[1:]
    target = int(float(target))
    os.makedirs(out, exist_ok=True)
    import zstandard as zstd

    shard, written, in_shard, docs = 0, 0, 0, 0
    cctx = zstd.ZstdCompressor(level=3)
    f = None
    for source, text in texts(folders, shakespeare):
        if not text.strip():
            continue
        if f is None or in_shard >= 64 << 20:
            if f is not None:
                f.close()
            f = cctx.stream_writer(open(os.path.join(out, f"shard-{shard:05}.jsonl.zst"), "wb"))
            shard, in_shard = shard + 1, 0
        line = (json.dumps({"id": source, "text": text}) + "\n").encode()
        f.write(line)
        n = len(text.encode())
        written, in_shard, docs = written + n, in_shard + n, docs + 1
        if written >= target:
            break
    f.close()
    print(f"{out}: {docs} documents, {written / 1e6:.1f} MB of text in {shard} shards")


if __name__ == "__main__":
    main()
