"""PyTorch reference for the CPU training-throughput benchmark.

The same model as pdsweep's (LLaMA style: RMSNorm, rotary embeddings in the rotate-half
convention, SwiGLU, tied head, no biases), the same AdamW step and the same loss read-back each
step, in eager mode with 2 threads. Prints tokens/s in the same format as
`cargo bench --bench train_throughput`. Run through benches/compare_cpu.sh.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(context, head_dim):
    half = head_dim // 2
    freqs = 10000.0 ** (-2.0 * (torch.arange(head_dim) % half).float() / head_dim)
    angles = torch.arange(context).float()[:, None] * freqs[None, :]
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.wq, self.wk = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.wv, self.wo = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h = self.attn_norm(x)
        split = lambda z: z.view(b, t, self.heads, self.hd).transpose(1, 2)
        q, k, v = split(self.wq(h)), split(self.wk(h)), split(self.wv(h))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, d))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, vocab, d, layers, heads, ff, context):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d, heads, ff) for _ in range(layers)])
        self.norm = RMSNorm(d)
        cos, sin = rope_tables(context, d // heads)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos[:t], self.sin[:t])
        return self.norm(x) @ self.embed.weight.T


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    a, _ = p.parse_known_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    ff = math.ceil((8 * a.d_model // 3) / 32) * 32
    model = Model(a.vocab, a.d_model, a.layers, a.heads, ff, a.context)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    n = a.batch * a.context
    non_embedding = sum(p.numel() for name, p in model.named_parameters() if name != "embed.weight")
    times = []
    for step in range(a.steps + 3):
        tokens = torch.randint(0, a.vocab, (a.batch, a.context + 1))
        start = time.perf_counter()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(n, a.vocab), tokens[:, 1:].reshape(n))
        loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= 3:
            times.append(time.perf_counter() - start)
    tps = a.steps * n / sum(times)
    median = sorted(times)[len(times) // 2] * 1e3
    print(f"  {'torch':<8} {tps:>10.0f} tokens/s   median step {median:.1f} ms   "
          f"{6 * non_embedding * tps / 1e9:.2f} GFLOP/s (6·N·D)   torch {torch.__version__}, {a.threads} threads")


if __name__ == "__main__":
    main()
