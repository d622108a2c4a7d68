"""Reference side of the released-teacher test (tests/it/released.rs): transformers' token ids
and mean cross-entropy for a converted SmolLM2-135M folder (benches/smollm2.py).

    released_reference.py encode FOLDER TEXT OUT
        ids of TEXT (read as bytes, newlines kept) with AutoTokenizer: with and without special
        tokens, and how many tokens the same file gives when read in text mode (universal
        newlines: CRLF becomes LF)
    released_reference.py heldout FOLDER IDS CONTEXT OUT
        mean next-token cross-entropy (nats) of the model over every whole window of CONTEXT + 1
        tokens of IDS (a JSON list), windows starting at multiples of CONTEXT, as pdsweep's
        held-out evaluation reads them
    released_reference.py heldout_bos FOLDER IDS CONTEXT OUT
        the same windows and the same CONTEXT scored targets, with the model's BOS token
        (config.bos_token_id) put before each window: the inputs are [BOS] + w[0:CONTEXT] and
        the targets w[1:CONTEXT + 1], read at input positions 1..CONTEXT (the prediction made at
        BOS, of w[0], is not scored), for a model such as Gemma's that expects BOS first

float32 on the CPU, two threads."""

import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

torch.set_num_threads(2)


def encode(folder, text_path, out):
    tok = AutoTokenizer.from_pretrained(folder)
    with open(text_path, encoding="utf-8", newline="") as f:
        text = f.read()
    with open(text_path, encoding="utf-8") as f:
        translated = f.read()
    result = {
        "ids": tok(text)["input_ids"],
        "ids_plain": tok(text, add_special_tokens=False)["input_ids"],
        "crlf": text.count("\r\n"),
        "universal_newlines_tokens": len(tok(translated, add_special_tokens=False)["input_ids"]),
    }
    with open(out, "w") as f:
        json.dump(result, f)


def heldout(folder, ids_path, context, out):
    context = int(context)
    with open(ids_path) as f:
        ids = json.load(f)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    windows = (len(ids) - 1) // context
    total, count = 0.0, 0
    with torch.no_grad():
        for w in range(0, windows, 4):
            rows = range(w, min(w + 4, windows))
            x = torch.tensor([ids[r * context : r * context + context] for r in rows])
            y = torch.tensor([ids[r * context + 1 : r * context + context + 1] for r in rows])
            logits = model(x).logits.double()  # f64 cross-entropy: f32 over 262K classes drifts ~5e-6
            nll = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum"
            )
            total += nll.item()
            count += y.numel()
    with open(out, "w") as f:
        json.dump({"loss": total / count, "positions": count}, f)


def heldout_bos(folder, ids_path, context, out):
    context = int(context)
    with open(ids_path) as f:
        ids = json.load(f)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    bos = model.config.bos_token_id
    assert isinstance(bos, int), f"the config names no single BOS token: {bos!r}"
    windows = (len(ids) - 1) // context
    total, count = 0.0, 0
    with torch.no_grad():
        for w in range(0, windows, 4):
            rows = range(w, min(w + 4, windows))
            x = torch.tensor([[bos] + ids[r * context : r * context + context] for r in rows])
            y = torch.tensor([ids[r * context + 1 : r * context + context + 1] for r in rows])
            logits = model(x).logits[:, 1:].double()
            nll = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum"
            )
            total += nll.item()
            count += y.numel()
    with open(out, "w") as f:
        json.dump({"loss": total / count, "positions": count, "bos": bos}, f)


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"encode": encode, "heldout": heldout, "heldout_bos": heldout_bos}[command](*args)
