"""PyTorch eager reference for the large-vocabulary benchmark (`cargo bench --bench large_vocab`).

The same three measurements as the Rust side, on the same shapes and thread count, printed in
the same format; run through benches/compare_large_vocab.sh so both are measured in one go:

- head: cross-entropy forward + backward of h @ Wᵀ over 1,024 positions (d 128, V 49,152 by
  default), the logits materialised as eager PyTorch does;
- step: one training step (forward, 0.1·CE + 0.9·KL over top-32 teacher targets at τ = 1,
  backward, AdamW) of a student d 128 × 4 layers, context 256, 8 sequences, tied head;
- logits: the logit pass of a released model (`--model DIR`, e.g. the converted SmolLM2-135M)
  under torch.no_grad: forward of 16 × 256 positions, top-32 and their log-probabilities.

Each prints its median time and the process's peak resident memory during it (Linux VmHWM,
reset through /proc/self/clear_refs before each measurement, as the Rust side does).
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F

from torch_reference import Model


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def median_time(repeats, f):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def head(a):
    torch.manual_seed(0)
    n, d, v = a.positions, a.d_model, a.vocab
    h = torch.randn(n, d, requires_grad=True)
    w = (torch.randn(v, d) * 0.3).requires_grad_()
    t = torch.randint(0, v, (n,))

    def step():
        loss = F.cross_entropy(h @ w.T, t)
        loss.backward()
        h.grad = w.grad = None

    step()
    reset_peak()
    s = median_time(5, step)
    print(f"  torch head + CE, {n} × {v}, d {d}, fwd+bwd   {s * 1e3:8.1f} ms   peak {peak_mib():.0f} MiB")


def sparse_kl(logits, ids, log_p):
    """0.9-weighted forward KL over the kept support (renormalised teacher), τ = 1."""
    s = torch.log_softmax(logits, dim=-1).gather(1, ids)
    log_q = torch.log_softmax(log_p, dim=-1)
    return (log_q.exp() * (log_q - s)).sum(-1).mean()


def step(a):
    torch.manual_seed(0)
    v, ctx, b = a.vocab, 256, 8
    ff = math.ceil((8 * a.d_model // 3) / 32) * 32
    model = Model(v, a.d_model, 4, 4, ff, ctx)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    n = b * ctx
    ids = torch.randint(0, v, (n, 32))
    log_p = -torch.rand(n, 32) * 5 - 1

    def one():
        tokens = torch.randint(0, v, (b, ctx + 1))
        logits = model(tokens[:, :-1]).reshape(n, v)
        ce = F.cross_entropy(logits, tokens[:, 1:].reshape(n))
        loss = 0.1 * ce + 0.9 * sparse_kl(logits, ids, log_p)
        loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    one()
    one()
    reset_peak()
    s = median_time(a.steps, one)
    print(f"  torch student step, d {a.d_model} × 4, V {v}, {n} tokens   {n / s:8.0f} tokens/s   "
          f"median {s * 1e3:.0f} ms   peak {peak_mib():.0f} MiB")


def logits(a, path, dtype=torch.float32):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    model.eval()
    torch.manual_seed(0)
    v = model.config.vocab_size
    tokens = torch.randint(0, v, (16, 256))

    def one():
        with torch.no_grad():
            z = model(tokens).logits.reshape(-1, v).float()
            top = z.topk(32, dim=-1)
            _ = top.values - torch.logsumexp(z, dim=-1, keepdim=True)

    one()
    reset_peak()
    s = median_time(3, one)
    name = str(dtype).removeprefix("torch.")
    print(f"  torch logit pass, {path}, {name}, 16 × 256, top-32   {16 * 256 / s:8.0f} positions/s   "
          f"peak {peak_mib():.0f} MiB")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--vocab", type=int, default=49_152)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--positions", type=int, default=1024)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--model", action="append", default=[], help="a released model's folder (repeatable)")
    p.add_argument("--only", default="head,step,logits")
    a, _ = p.parse_known_args()
    torch.set_num_threads(a.threads)
    print(f"PyTorch {torch.__version__} eager, {a.threads} threads")
    only = a.only.split(",")
    if "head" in only:
        head(a)
    if "step" in only:
        step(a)
    if "logits" in only:
        for path in a.model:
            logits(a, path)
            logits(a, path, torch.bfloat16)


if __name__ == "__main__":
    main()
