#!/usr/bin/env bash
# The public surface of the `pdsweep` library: the items rustdoc lists as reachable from outside
# the crate (structs, enums, functions, traits, constants, type aliases; not methods or modules),
# counted from `all.html`. Issue 49's goal is at most 450. Run from the repository root:
#   benches/pub_surface.sh
set -euo pipefail
target="${CARGO_TARGET_DIR:-target}"
cargo doc --release --no-deps --lib --quiet
python3 - "$target/doc/pdsweep/all.html" <<'PY'
import collections, re, sys
html = open(sys.argv[1]).read()
items = [h for h, _ in re.findall(r'<a href="([^"]+\.html)">([^<]+)</a>', html)
         if not h.endswith("index.html")]
kinds = collections.Counter(h.rsplit("/", 1)[-1].split(".")[0] for h in items)
print(f"{len(items)} public items: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common()))
PY
