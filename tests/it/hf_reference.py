"""Reference side of pdsweep's Hugging Face interop tests (tests/it/hf_interop.rs), run with the
real `transformers` and CPU `torch`.

    reference.py make OUT      tiny random LLaMA models saved with save_pretrained, each with
                               transformers' logits on a fixed batch (logits.safetensors) and
                               its parameter count (meta.json)
    reference.py logits DIR... loads each DIR with AutoModelForCausalLM (and AutoTokenizer when
                               it has tokenizer.json) and writes DIR/reference_logits.safetensors
                               for the batch of DIR/../batch.json

Logits are computed in float32 on the CPU."""

import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

torch.set_num_threads(1)


def batch(vocab, rows=2, cols=24):
    """The fixed batch: token i of row r is (7·(r·cols + i) + 3) mod vocab."""
    return [[(7 * (r * cols + i) + 3) % vocab for i in range(cols)] for r in range(rows)]


def logits(model, tokens):
    with torch.no_grad():
        return model(torch.tensor(tokens)).logits.float().contiguous()


VARIANTS = {
    # GQA, untied head, large θ, ε 1e-6: LLaMA-3-like.
    "gqa-untied": dict(vocab_size=300, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=2, rope_theta=500000.0,
                       rms_norm_eps=1e-6, tie_word_embeddings=False, max_position_embeddings=64),
    # Tied embeddings, plain multi-head attention, θ 20000, ε 1e-5: SmolLM-like.
    "tied-mha": dict(vocab_size=257, hidden_size=48, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=3, num_key_value_heads=3, rope_theta=20000.0,
                     rms_norm_eps=1e-5, tie_word_embeddings=True, max_position_embeddings=64),
    # Stored in bfloat16 and sharded (model.safetensors.index.json), 8 query heads on 2.
    "sharded-bf16": dict(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2, rope_theta=10000.0,
                         rms_norm_eps=1e-5, tie_word_embeddings=False,
                         max_position_embeddings=64),
}


def make(out):
    for i, (name, kwargs) in enumerate(VARIANTS.items()):
        torch.manual_seed(100 + i)
        model = LlamaForCausalLM(LlamaConfig(**kwargs)).eval()
        # Random init gives near-uniform logits; larger weights make the comparison bite.
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 2:
                    p.mul_(4.0)
                else:
                    p.add_(0.1 * torch.randn_like(p))
        folder = os.path.join(out, name)
        if name == "sharded-bf16":
            model = model.to(torch.bfloat16)
            model.save_pretrained(folder, max_shard_size="40KB")
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        else:
            model.save_pretrained(folder)
        tokens = batch(kwargs["vocab_size"])
        save_file({"logits": logits(model, tokens)}, os.path.join(folder, "logits.safetensors"))
        meta = {
            "params": sum(p.numel() for p in model.parameters()),
            "tokens": tokens,
            "transformers": __import__("transformers").__version__,
            "torch": torch.__version__,
        }
        with open(os.path.join(folder, "meta.json"), "w") as f:
            json.dump(meta, f)
    # A LLaMA with biases: pdsweep runs it on its released decoder, not its own transformer.
    torch.manual_seed(0)
    biased = dict(VARIANTS["tied-mha"], attention_bias=True)
    LlamaForCausalLM(LlamaConfig(**biased)).save_pretrained(os.path.join(out, "biased"))


def reference_logits(folder):
    with open(os.path.join(folder, "..", "batch.json")) as f:
        tokens = json.load(f)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    result = {"logits": logits(model, tokens)}
    if os.path.exists(os.path.join(folder, "tokenizer.json")):
        tok = AutoTokenizer.from_pretrained(folder)
        text = "the quick brown fox"
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text, (tok.decode(ids), text)
        result["tokenizer_ids"] = torch.tensor(ids, dtype=torch.int64)
    save_file(result, os.path.join(folder, "reference_logits.safetensors"))


if __name__ == "__main__":
    command, paths = sys.argv[1], sys.argv[2:]
    for path in paths:
        {"make": make, "logits": reference_logits}[command](path)
