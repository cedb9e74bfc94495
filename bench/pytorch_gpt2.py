#!/usr/bin/env python3
"""pytorch_gpt2.py — training throughput of GPT-2 under eager PyTorch, for the
side-by-side with bin/gpu_bench (shardcast's CUDA kernels) on the same GPU.

The model is built in code from its configuration (no downloads, no
transformers): GPT-2 as Radford et al. 2019 define it and as shardcast's
runtime runs it — learned positions, pre-LayerNorm blocks (eps 1e-5), fused
qkv with biases, GELU tanh approximation, tied LM head, cross-entropy over the
vocabulary. Dropout 0 on both sides. Mixed precision is torch.autocast(bf16)
over fp32 weights with torch.optim.AdamW (lr 1e-3, betas (0.9, 0.999), eps
1e-8, weight decay 0.01) — the same arrangement and hyperparameters as the
runtime. Attention is "eager" by default (matmul, causal mask, softmax,
matmul: what Hugging Face's eager implementation does and what the runtime's
unfused kernels do); --attention sdpa uses F.scaled_dot_product_attention.

    python3 bench/pytorch_gpt2.py --model gpt2 --batch 8 --seq 1024 [--steps 20]

3 warm-up steps, then STEPS timed steps between torch.cuda.synchronize();
each step reads loss.item() as the runtime's step reads its loss. Prints a
human line and "RESULT key=value ..." like bin/gpu_bench.
"""
import argparse
import math
import sys
import time

CONFIGS = {  # layers, width, heads (models/nn/*.ini; vocabulary 50257, 1024 positions)
    "gpt-tiny": (2, 64, 4, 256, 64),
    "gpt2": (12, 768, 12, 50257, 1024),
    "gpt2-medium": (24, 1024, 16, 50257, 1024),
    "gpt2-large": (36, 1280, 20, 50257, 1024),
    "gpt2-xl": (48, 1600, 25, 50257, 1024),
}


def build(torch, name, attention):
    nn = torch.nn
    F = torch.nn.functional
    L, C, NH, V, P = CONFIGS[name]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(C, eps=1e-5)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.ln2 = nn.LayerNorm(C, eps=1e-5)
            self.fc = nn.Linear(C, 4 * C)
            self.fc_proj = nn.Linear(4 * C, C)

        def attn(self, x):
            B, T, _ = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)
            q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))
            if attention == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
                att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
                y = att @ v
            return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(P, C)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for b in self.blocks:
                x = b(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
            return F.cross_entropy(logits.float().view(-1, V), targets.view(-1))

    return GPT(), V


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt2", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--attention", default="eager", choices=["eager", "sdpa"])
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: PyTorch is not installed")
        return 0
    if a.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: no CUDA device for PyTorch")
        return 0
    torch.manual_seed(1234)
    dev = torch.device(a.device)
    model, V = build(torch, a.model, a.attention)
    model.to(dev)
    # the runtime's fp32 products are plain fp32 (no TF32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    gen = torch.Generator(device="cpu").manual_seed(5)
    idx = torch.randint(0, V, (a.batch, a.seq + 1), generator=gen).to(dev)
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16")

    def step():
        with amp:
            loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    first = step()
    for _ in range(2):
        step()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        last = step()
    sync()
    dt = time.perf_counter() - t0
    tps = a.batch * a.seq * a.steps / dt
    peak = torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else 0.0
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    print(f"pytorch {torch.__version__} {a.model} {a.dtype} {a.attention} B={a.batch} T={a.seq} on {name}: "
          f"{tps:.0f} tokens/s, step {dt / a.steps * 1e3:.1f} ms, loss {first:.3f} -> {last:.3f}, "
          f"peak {peak:.2f} GiB allocated")
    print(f"RESULT framework=pytorch model={a.model} dtype={a.dtype} attention={a.attention} batch={a.batch} "
          f"seq={a.seq} tokens_per_s={tps:.1f} step_ms={dt / a.steps * 1e3:.3f} loss={last:.4f} "
          f"torch={torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
