"""Reference side of pdsweep's teacher-family interop tests: tiny random decoder models of every
Hugging Face family pdsweep loads as a teacher, saved with the real `transformers`, each with
transformers' logits on the fixed batch of hf_reference.py.

    families_reference.py make OUT
        for each variant below, OUT/<variant>/ holds
          config.json + model.safetensors   save_pretrained, float32, safetensors
          logits.safetensors                "logits": float32 [2, 24, vocab] on batch(vocab)
          meta.json                         {"params", "tokens", "family", "transformers", ...}
        The `*-legacy` variants hold the same weights as their base variant with config.json
        rewritten in the transformers-4.x layout released checkpoints use (top-level rope_theta,
        rope_scaling, rope_local_base_freq, sliding_window_pattern, rotary_pct ...); the script
        checks that transformers reads them back to the very same logits.

Every model is built with attn_implementation="eager" (the straight matmul-softmax-matmul path;
Gemma 2 has no sdpa path at all because of its attention softcap). The script also runs the
default implementation (sdpa where the family has one) and checks it agrees to 1e-5 relative,
and reloads each saved folder with AutoModelForCausalLM and asserts bit-identical logits.

float32 on the CPU, one thread."""

import json
import math
import os
import shutil
import sys
import time

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Olmo2Config,
    Olmo2ForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

torch.set_num_threads(1)
transformers.utils.logging.disable_progress_bar()


def batch(vocab, rows=2, cols=24):
    """The fixed batch (same as hf_reference.py): token i of row r is (7·(r·cols + i) + 3) mod vocab."""
    return [[(7 * (r * cols + i) + 3) % vocab for i in range(cols)] for r in range(rows)]


def logits(model, tokens):
    with torch.no_grad():
        return model(torch.tensor(tokens)).logits.float().contiguous()


# name: (config class, model class, config kwargs, 2-D weight scale, 1-D jitter); GAINS below
VARIANTS = {
    # LLaMA-3.1 rope: head_dim 16, θ 50000 → wavelengths 2π·50000^(k/8) = 6.3, 24.3, 93.6, ...
    # With original_max_position_embeddings 32, low 1, high 4: 6.3 < 8 stays, 24.3 ∈ [8, 32] is
    # smoothed, the rest (> 32) are divided by factor 8, so all three branches are used.
    "llama-llama3": (LlamaConfig, LlamaForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="llama3", rope_theta=50000.0, factor=8.0,
                             low_freq_factor=1.0, high_freq_factor=4.0,
                             original_max_position_embeddings=32)), 4.0, 0.1),
    # Linear rope (factor 2), head_dim 24 ≠ 64/4, biases on q/k/v/o and on the MLP, tied head.
    "llama-linear": (LlamaConfig, LlamaForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=24, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=True, mlp_bias=True,
        rope_parameters=dict(rope_type="linear", rope_theta=20000.0, factor=2.0)), 4.0, 0.1),
    # q/k/v biases (always on in Qwen2), GQA 4→2, tied head, θ 1e6.
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0)), 4.0, 0.1),
    # Per-head q/k RMSNorm, head_dim 24 ≠ 64/4, GQA, untied.
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0)), 4.0, 0.1),
    # Sliding window 5 on every layer (a query at i sees keys i-4..i), explicit head_dim 24.
    "mistral": (MistralConfig, MistralForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, max_position_embeddings=64,
        rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=5,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0)), 4.0, 0.1),
    # Both softcaps, query_pre_attn_scalar 24 ≠ head_dim 32, window 5 on layers 0 and 2.
    "gemma2": (Gemma2Config, Gemma2ForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=64,
        query_pre_attn_scalar=24, attn_logit_softcapping=10.0, final_logit_softcapping=15.0,
        sliding_window=5, rms_norm_eps=1e-6,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0)), 3.0, 0.1),
    # Two sliding layers (θ 20000, default rope) then a full layer (θ 5e5, linear factor 8 like
    # Gemma-3 4B+), window 5, per-head q/k norms, query_pre_attn_scalar 48 ≠ head_dim 32. Both θ
    # differ from the class defaults (1e4 local, 1e6 global) so gemma3-legacy proves they are read.
    "gemma3": (Gemma3TextConfig, Gemma3ForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=64,
        query_pre_attn_scalar=48, sliding_window=5, rms_norm_eps=1e-6,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": dict(rope_type="default", rope_theta=20000.0),
            "full_attention": dict(rope_type="linear", rope_theta=500000.0, factor=8.0),
        }), 3.0, 0.1),
    # Fused per-head q|k|v, rotary on the first 25 % of each head (4 of 16 dims), parallel residual.
    "gpt_neox": (GPTNeoXConfig, GPTNeoXForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=64, layer_norm_eps=1e-5,
        use_parallel_residual=True, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25)),
        4.0, 0.1),
    # Sequential residual, rotary on half of each head, θ 20000.
    "gpt_neox-sequential": (GPTNeoXConfig, GPTNeoXForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=64, layer_norm_eps=1e-5,
        use_parallel_residual=False, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=20000.0, partial_rotary_factor=0.5)),
        4.0, 0.1),
    # Conv1D [in, out] weights, learned positions, gelu_new, tied head, n_inner default 4·n_embd.
    "gpt2": (GPT2Config, GPT2LMHeadModel, dict(
        vocab_size=300, n_embd=64, n_layer=2, n_head=4, n_positions=32,
        bos_token_id=299, eos_token_id=299), 4.0, 0.1),
    # Post-norm (no input norm), q_norm over all 4·16 query dims, k_norm over 2·16 key dims.
    "olmo2": (Olmo2Config, Olmo2ForCausalLM, dict(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=False, eos_token_id=299,
        rope_parameters=dict(rope_type="default", rope_theta=500000.0)), 4.0, 0.1),
}


# Extra gains on top of the 2-D scale, by parameter-name substring. The token embedding (and the
# head) ×4 gives logits of ~±10-17 instead of ~±2.5; Gemma-2's q/k ×3 takes its attention scores
# to ~±10 so the attention softcap (10) bends them, and its head output to ~13 so the final cap
# (15) bends it too. GPT-2's c_fc ×2 spreads the MLP pre-activations over the range where gelu_new
# (tanh) and exact gelu differ, so using the wrong one shows.
EMBEDDING_GAIN = 4.0
GAINS = {"gemma2": {"q_proj": 3.0, "k_proj": 3.0}, "gpt2": {"c_fc": 2.0}}


def legacy_llama3(cfg):
    """transformers-4.x layout of a LLaMA-3.1 config.json: rope_theta on top, rope_scaling."""
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    cfg["rope_scaling"] = rope
    return cfg


def legacy_gemma3(cfg):
    """transformers-4.5x layout of a Gemma-3 config.json: rope_theta (global), rope_local_base_freq,
    rope_scaling for the global layers only, sliding_window_pattern and no layer_types."""
    rope = cfg.pop("rope_parameters")
    full, local = dict(rope["full_attention"]), rope["sliding_attention"]
    cfg["rope_theta"] = full.pop("rope_theta")
    cfg["rope_local_base_freq"] = local["rope_theta"]
    cfg["rope_scaling"] = full if full.get("rope_type", "default") != "default" else None
    # layer_types [sliding, sliding, full] is the pattern-3 rule: layer i is full iff (i+1) % 3 == 0
    assert cfg.pop("layer_types") == ["sliding_attention", "sliding_attention", "full_attention"]
    cfg.pop("_sliding_window_pattern", None)
    cfg["sliding_window_pattern"] = 3
    return cfg


def legacy_gpt_neox(cfg):
    """transformers-4.x layout of a GPT-NeoX (Pythia) config.json: rotary_pct, rotary_emb_base."""
    rope = cfg.pop("rope_parameters")
    cfg["rotary_pct"] = rope["partial_rotary_factor"]
    cfg["rotary_emb_base"] = rope["rope_theta"]
    return cfg


# legacy variant: (base variant, rewrite of its config.json)
LEGACY = {
    "llama-llama3-legacy": ("llama-llama3", legacy_llama3),
    "gemma3-legacy": ("gemma3", legacy_gemma3),
    "gpt_neox-legacy": ("gpt_neox-sequential", legacy_gpt_neox),
}


def _rope(**changes):
    def mutate(c):
        c.rope_parameters.update(changes)
    return mutate


def _rope_of(layer_type, **changes):
    def mutate(c):
        c.rope_parameters[layer_type].update(changes)
    return mutate


def _set(**changes):
    def mutate(c):
        for key, value in changes.items():
            setattr(c, key, value)
    return mutate


# Each feature a variant is meant to exercise must move its logits: reloading the folder with the
# feature switched off has to change them by more than 5e-5 relative (5× the 1e-5 tolerance
# pdsweep is held to), or the variant would not catch an implementation that ignores the feature.
FEATURES = [
    ("llama-llama3", "llama3 rope scaling -> none", _rope(rope_type="default")),
    ("llama-llama3", "llama3 original_max_position_embeddings 32 -> 64",
     _rope(original_max_position_embeddings=64)),
    ("llama-linear", "linear rope factor 2 -> 1", _rope(factor=1.0)),
    ("mistral", "sliding_window 5 -> none", _set(sliding_window=None)),
    ("gemma2", "attn_logit_softcapping -> none", _set(attn_logit_softcapping=None)),
    ("gemma2", "final_logit_softcapping -> none", _set(final_logit_softcapping=None)),
    ("gemma2", "sliding_window 5 -> 64", _set(sliding_window=64)),
    ("gemma2", "query_pre_attn_scalar 24 -> head_dim 32", _set(query_pre_attn_scalar=32)),
    ("gemma3", "sliding_window 5 -> 64", _set(sliding_window=64)),
    ("gemma3", "local rope theta 2e4 -> 5e5", _rope_of("sliding_attention", rope_theta=5e5)),
    ("gemma3", "global linear rope factor 8 -> 1", _rope_of("full_attention", factor=1.0)),
    ("gemma3", "query_pre_attn_scalar 48 -> head_dim 32", _set(query_pre_attn_scalar=32)),
    ("gpt_neox", "partial rotary 0.25 -> 0.5", _rope(partial_rotary_factor=0.5)),
    ("gpt_neox", "parallel residual -> sequential", _set(use_parallel_residual=False)),
    ("gpt_neox-sequential", "sequential residual -> parallel", _set(use_parallel_residual=True)),
    ("gpt2", "gelu_new -> exact gelu", _set(activation_function="gelu")),
    ("gpt2", "attention scaled by 1/sqrt(d) -> unscaled", _set(scale_attn_weights=False)),
    ("gpt2", "scale_attn_by_inverse_layer_idx false -> true",
     _set(scale_attn_by_inverse_layer_idx=True)),
]


def expected_params(c):
    """Closed-form parameter count (tied head counted once); checked against numel below."""
    t = c.model_type
    if t == "gpt2":
        h, v, L, p = c.n_embd, c.vocab_size, c.n_layer, c.n_positions
        inner = c.n_inner if c.n_inner is not None else 4 * h
        per = (2 * 2 * h) + (h * 3 * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h)
        return v * h + p * h + L * per + 2 * h + (0 if c.tie_word_embeddings else v * h)
    if t == "gpt_neox":
        h, v, L, i = c.hidden_size, c.vocab_size, c.num_hidden_layers, c.intermediate_size
        b = 1 if c.attention_bias else 0
        per = 2 * 2 * h + (h * 3 * h + b * 3 * h) + (h * h + b * h) + (h * i + i) + (i * h + h)
        return v * h + L * per + 2 * h + (0 if c.tie_word_embeddings else v * h)
    h, v, L, i = c.hidden_size, c.vocab_size, c.num_hidden_layers, c.intermediate_size
    nh, nkv = c.num_attention_heads, c.num_key_value_heads
    hd = getattr(c, "head_dim", None) or h // nh
    q, kv = nh * hd, nkv * hd
    if t == "qwen2":
        attn = h * q + q + 2 * (h * kv + kv) + q * h
    else:
        ab = 1 if getattr(c, "attention_bias", False) else 0
        attn = h * q + 2 * h * kv + q * h + ab * (q + 2 * kv + h)
    mb = 1 if getattr(c, "mlp_bias", False) else 0
    mlp = 3 * h * i + mb * (2 * i + h)
    norms = {"llama": 2 * h, "mistral": 2 * h, "qwen2": 2 * h, "qwen3": 2 * h + 2 * hd,
             "olmo2": 2 * h + q + kv, "gemma2": 4 * h, "gemma3_text": 4 * h + 2 * hd}[t]
    return v * h + L * (attn + mlp + norms) + h + (0 if c.tie_word_embeddings else v * h)


def bite(model, scale, jitter, gains):
    """Random init gives near-uniform logits; larger 2-D weights and jittered 1-D ones (norm
    weights, biases) make the comparison bite."""
    embeddings = {id(model.get_input_embeddings().weight), id(model.get_output_embeddings().weight)}
    with torch.no_grad():
        for name, p in model.named_parameters():  # a tied head is listed once
            if p.dim() == 2:
                p.mul_(scale * (EMBEDDING_GAIN if id(p) in embeddings else 1.0))
                for part, gain in gains.items():
                    if part in name:
                        p.mul_(gain)
            else:
                p.add_(jitter * torch.randn_like(p))


def raw_head_output(model, tokens):
    """lm_head output before any final softcap (to see whether a softcap saturates)."""
    seen = {}
    handle = model.get_output_embeddings().register_forward_hook(
        lambda m, i, o: seen.__setitem__("raw", o.detach().float()))
    try:
        logits(model, tokens)
    finally:
        handle.remove()
    return seen["raw"]


def write_meta(folder, params, tokens, family, extra):
    meta = {
        "params": params,
        "tokens": tokens,
        "family": family,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "attn_implementation": "eager",
    }
    meta.update(extra)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f)


def reload_logits(folder, tokens, attn="eager"):
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation=attn).eval()
    return model, logits(model, tokens)


def make(out):
    start = time.time()
    os.makedirs(out, exist_ok=True)
    report = []
    for i, (name, (config_cls, model_cls, kwargs, scale, jitter)) in enumerate(VARIANTS.items()):
        torch.manual_seed(200 + i)
        config = config_cls(**kwargs, attn_implementation="eager")
        model = model_cls(config).eval()
        bite(model, scale, jitter, GAINS.get(name, {}))
        tokens = batch(config.vocab_size)
        ref = logits(model, tokens)
        params = sum(p.numel() for p in model.parameters())
        assert params == expected_params(config), (name, params, expected_params(config))
        assert torch.isfinite(ref).all(), name
        spread = (ref.max(-1).values - ref.min(-1).values).min().item()
        assert spread > 1.0, (name, spread)
        max_abs = ref.abs().max().item()
        raw = raw_head_output(model, tokens).abs().max().item()
        cap = getattr(config, "final_logit_softcapping", None)
        if cap is not None:
            # the cap must bend the logits without flattening them
            assert 0.3 * cap < raw < 3.0 * cap, (name, raw, cap)
        else:
            assert max_abs < 100.0, (name, max_abs)

        folder = os.path.join(out, name)
        if os.path.exists(folder):
            shutil.rmtree(folder)
        model.save_pretrained(folder)
        save_file({"logits": ref}, os.path.join(folder, "logits.safetensors"))
        with safe_open(os.path.join(folder, "model.safetensors"), "pt") as f:
            keys = sorted(f.keys())
            assert all(f.get_slice(k).get_dtype() == "F32" for k in keys), name
            stored = sum(math.prod(f.get_slice(k).get_shape()) for k in keys)
        assert stored == params, (name, stored, params)  # tied head not stored, no buffers
        write_meta(folder, params, tokens, config.model_type, {"max_abs_logit": max_abs})

        # transformers reads the folder back to the very same logits
        reloaded, again = reload_logits(folder, tokens)
        assert type(reloaded) is model_cls, (name, type(reloaded))
        assert torch.equal(again, ref), (name, (again - ref).abs().max().item())
        # the default attention implementation (sdpa where the family has it) agrees closely
        default_impl = "eager"
        if model_cls._supports_sdpa:
            default_model, sdpa = reload_logits(folder, tokens, attn=None)
            default_impl = default_model.config._attn_implementation
            rel = ((sdpa - ref).abs().max() / ref.abs().max()).item()
            assert rel < 1e-5, (name, rel)
        else:
            rel = 0.0
        report.append((name, config.model_type, params, max_abs, raw, spread, default_impl, rel,
                       len(keys)))

    for name, (base, rewrite) in LEGACY.items():
        src, folder = os.path.join(out, base), os.path.join(out, name)
        if os.path.exists(folder):
            shutil.rmtree(folder)
        shutil.copytree(src, folder)
        path = os.path.join(folder, "config.json")
        with open(path) as f:
            cfg = rewrite(json.load(f))
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
        with open(os.path.join(folder, "meta.json")) as f:
            meta = json.load(f)
        meta["legacy_of"] = base
        with open(os.path.join(folder, "meta.json"), "w") as f:
            json.dump(meta, f)
        with safe_open(os.path.join(folder, "logits.safetensors"), "pt") as f:
            ref = f.get_tensor("logits")
        model, again = reload_logits(folder, meta["tokens"])
        assert torch.equal(again, ref), (name, (again - ref).abs().max().item())
        assert sum(p.numel() for p in model.parameters()) == meta["params"], name
        report.append((name, model.config.model_type, meta["params"], meta["max_abs_logit"],
                       float("nan"), float("nan"), "-", 0.0, 0))

    for name, what, mutate in FEATURES:
        folder = os.path.join(out, name)
        with safe_open(os.path.join(folder, "logits.safetensors"), "pt") as f:
            ref = f.get_tensor("logits")
        config = AutoConfig.from_pretrained(folder)
        mutate(config)
        model = AutoModelForCausalLM.from_pretrained(
            folder, config=config, dtype=torch.float32, attn_implementation="eager").eval()
        with open(os.path.join(folder, "meta.json")) as f:
            tokens = json.load(f)["tokens"]
        rel = ((logits(model, tokens) - ref).abs().max() / ref.abs().max()).item()
        print(f"feature {name}: {what}: logits move {rel:.2e} relative")
        assert rel > 5e-5, (name, what, rel)

    print(f"{'variant':22} {'family':12} {'params':>7} {'max|logit|':>10} {'raw max':>8} "
          f"{'min spread':>10} {'default':>7} {'default vs eager':>16} tensors")
    for name, fam, params, max_abs, raw, spread, impl, rel, n in report:
        print(f"{name:22} {fam:12} {params:7d} {max_abs:10.3f} {raw:8.3f} {spread:10.3f} "
              f"{impl:>7} {rel:16.2e} {n}")
    print(f"made {len(report)} variants in {time.time() - start:.1f} s")


if __name__ == "__main__":
    command, paths = sys.argv[1], sys.argv[2:]
    for path in paths:
        {"make": make}[command](path)
