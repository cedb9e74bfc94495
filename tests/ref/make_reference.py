#!/usr/bin/env python3
"""make_reference.py — an independent reference for the runtime's training step.

Builds gpt-tiny (models/nn/gpt-tiny.ini: GPT-2 style, 2 layers, width 64, 4 heads,
vocabulary 256, 64 learned positions, tied embeddings) or, with --model
llama-tiny, models/nn/llama-tiny.ini (RMSNorm eps 1e-5, rotary positions with
theta 10000 and Llama's rotate_half pairing, SwiGLU, 4 query and 2 key/value
heads, no biases, untied head) in PyTorch with the same initial weights and the
same synthetic data as the C runtime, and writes

    the logits (B, T, V) and the mean cross-entropy loss of step 0,
    the gradient of every parameter (the runtime's canonical flat order),
    the losses of steps 0..5 under torch.optim.AdamW(lr 1e-3, betas (0.9, 0.999),
    eps 1e-8, weight_decay 0.01)

to tests/ref/gpt_tiny_ref.bin. PyTorch computes in float64 so the file is an
exact reference; the C backend (fp32) must match it to a relative error < 1e-5
(tests/test_reference.c). Needs torch and numpy (pip install torch numpy); `make
test` only reads the committed file.

The shared definitions, which runtime/model_rt.c implements too:
  splitmix64 stream: s(seed, i) = mix(seed + (i + 1) * 0x9e3779b97f4a7c15) mod 2^64,
    mix(x) = x ^= x >> 30, x *= 0xbf58476d1ce4e5b9, x ^= x >> 27,
    x *= 0x94d049bb133111eb, x ^= x >> 31;
  weight element i (canonical order) = float32(scale * u), u = (s(seed, i) >> 11) * 2^-53 * 2 - 1,
    scale 0.1 for embeddings, 0.08 matrices, 0.02 biases and norm biases; norm
    weights float32(1 + 0.1 u);
  canonical order: wte (V, C), wpe (P, C), final norm weight, bias; then per
    block: ln1 w, b; qkv W (3C, C), b; attn_out W (C, C), b; ln2 w, b;
    fc1 W (F, C), b; fc2 W (C, F), b  (matrices as nn.Linear's (out, in));
    llama-tiny: wte, final norm w, lm_head W (V, C); per block: norm1 w,
    qkv W ((NH + 2 NKV) hs, C), attn_out W, norm2 w, gate W (F, C), up W (F, C),
    fc2 W (C, F);
  sample n of step k = k * B + j; its tokens: h = s(seed ^ 0x5eed5eed5eed, n),
    x = h mod V, stride = 1 + (h >> 20) mod 7; for t = 0..T: r = s(h, t),
    tok = (r >> 8) mod V if r mod 8 == 0 else x; inputs tok_0..T-1, targets
    tok_1..T; x = (tok + stride) mod V.
"""
import argparse
import struct

import numpy as np
import torch
import torch.nn.functional as F

M64 = (1 << 64) - 1
GOLD = 0x9E3779B97F4A7C15


def mix(x):
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def stream(seed, idx):
    idx = np.asarray(idx, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return mix(np.uint64(seed & M64) + (idx + np.uint64(1)) * np.uint64(GOLD))


def init_values(seed, start, n, kind):
    u = (stream(seed, np.arange(start, start + n, dtype=np.uint64)) >> np.uint64(11)).astype(np.float64)
    u = u * 2.0 ** -53 * 2.0 - 1.0
    if kind == "norm_w":
        return (1.0 + 0.1 * u).astype(np.float32)
    scale = {"embed": 0.1, "matrix": 0.08, "bias": 0.02, "norm_b": 0.02}[kind]
    return (scale * u).astype(np.float32)


def sample(seed, n, T, V):
    h = int(stream(seed ^ 0x5EED5EED5EED, n))
    x, stride = h % V, 1 + (h >> 20) % 7
    toks = []
    for t in range(T + 1):
        r = int(stream(h, t))
        tok = (r >> 8) % V if r % 8 == 0 else x
        toks.append(tok)
        x = (tok + stride) % V
    return toks[:T], toks[1:]


def build(seed, V, C, P, L, F_):
    """Parameters in canonical order: (name, shape, kind)."""
    spec = [("wte", (V, C), "embed"), ("wpe", (P, C), "embed"),
            ("lnf.w", (C,), "norm_w"), ("lnf.b", (C,), "norm_b")]
    for l in range(L):
        spec += [(f"h{l}.ln1.w", (C,), "norm_w"), (f"h{l}.ln1.b", (C,), "norm_b"),
                 (f"h{l}.qkv.W", (3 * C, C), "matrix"), (f"h{l}.qkv.b", (3 * C,), "bias"),
                 (f"h{l}.proj.W", (C, C), "matrix"), (f"h{l}.proj.b", (C,), "bias"),
                 (f"h{l}.ln2.w", (C,), "norm_w"), (f"h{l}.ln2.b", (C,), "norm_b"),
                 (f"h{l}.fc1.W", (F_, C), "matrix"), (f"h{l}.fc1.b", (F_,), "bias"),
                 (f"h{l}.fc2.W", (C, F_), "matrix"), (f"h{l}.fc2.b", (C,), "bias")]
    params, off = {}, 0
    for name, shape, kind in spec:
        n = int(np.prod(shape))
        v = init_values(seed, off, n, kind).astype(np.float64).reshape(shape)
        params[name] = torch.tensor(v, dtype=torch.float64, requires_grad=True)
        off += n
    return spec, params


def build_llama(seed, V, C, L, NH, NKV, F_):
    hs = C // NH
    spec = [("wte", (V, C), "embed"), ("norm.w", (C,), "norm_w"), ("head.W", (V, C), "matrix")]
    for l in range(L):
        spec += [(f"h{l}.n1.w", (C,), "norm_w"), (f"h{l}.qkv.W", ((NH + 2 * NKV) * hs, C), "matrix"),
                 (f"h{l}.proj.W", (C, C), "matrix"), (f"h{l}.n2.w", (C,), "norm_w"),
                 (f"h{l}.gate.W", (F_, C), "matrix"), (f"h{l}.up.W", (F_, C), "matrix"),
                 (f"h{l}.down.W", (C, F_), "matrix")]
    params, off = {}, 0
    for name, shape, kind in spec:
        n = int(np.prod(shape))
        v = init_values(seed, off, n, kind).astype(np.float64).reshape(shape)
        params[name] = torch.tensor(v, dtype=torch.float64, requires_grad=True)
        off += n
    return spec, params


def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


def rotate(x, T, theta=10000.0):
    """Llama's rotary embedding: pairs (i, i + hs/2), angle t * theta^(-2i/hs)."""
    hs = x.shape[-1]
    inv = theta ** (-torch.arange(0, hs // 2, dtype=torch.float64) * 2 / hs)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    half = torch.cat([-x[..., hs // 2:], x[..., :hs // 2]], -1)
    return x * cos + half * sin


def forward_llama(p, ids, L, NH, NKV):
    B, T = ids.shape
    C = p["wte"].shape[1]
    hs = C // NH
    x = p["wte"][ids]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for l in range(L):
        h = rms(x, p[f"h{l}.n1.w"])
        qkv = h @ p[f"h{l}.qkv.W"].T
        q, k, v = qkv.split([NH * hs, NKV * hs, NKV * hs], dim=-1)
        q = rotate(q.view(B, T, NH, hs).transpose(1, 2), T)
        k = rotate(k.view(B, T, NKV, hs).transpose(1, 2), T)
        v = v.view(B, T, NKV, hs).transpose(1, 2)
        k, v = (t.repeat_interleave(NH // NKV, dim=1) for t in (k, v))  # HF repeat_kv
        att = (q @ k.transpose(-1, -2)) / hs ** 0.5
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[f"h{l}.proj.W"].T
        h = rms(x, p[f"h{l}.n2.w"])
        f = F.silu(h @ p[f"h{l}.gate.W"].T) * (h @ p[f"h{l}.up.W"].T)
        x = x + f @ p[f"h{l}.down.W"].T
    return rms(x, p["norm.w"]) @ p["head.W"].T


def forward(p, ids, L, NH):
    B, T = ids.shape
    C = p["wte"].shape[1]
    hs = C // NH
    x = p["wte"][ids] + p["wpe"][:T]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for l in range(L):
        h = F.layer_norm(x, (C,), p[f"h{l}.ln1.w"], p[f"h{l}.ln1.b"], 1e-5)
        qkv = h @ p[f"h{l}.qkv.W"].T + p[f"h{l}.qkv.b"]
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / hs ** 0.5
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + (y @ p[f"h{l}.proj.W"].T + p[f"h{l}.proj.b"])
        h = F.layer_norm(x, (C,), p[f"h{l}.ln2.w"], p[f"h{l}.ln2.b"], 1e-5)
        f = F.gelu(h @ p[f"h{l}.fc1.W"].T + p[f"h{l}.fc1.b"], approximate="tanh")
        x = x + (f @ p[f"h{l}.fc2.W"].T + p[f"h{l}.fc2.b"])
    x = F.layer_norm(x, (C,), p["lnf.w"], p["lnf.b"], 1e-5)
    return x @ p["wte"].T


def batch(seed, step, B, T, V):
    xs, ys = zip(*(sample(seed, step * B + j, T, V) for j in range(B)))
    return torch.tensor(xs), torch.tensor(ys)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt-tiny", choices=["gpt-tiny", "llama-tiny"])
    ap.add_argument("--out", default=None)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    a.out = a.out or f"tests/ref/{a.model.replace('-', '_')}_ref.bin"
    if a.model == "gpt-tiny":
        V, C, P, L, NH, F_ = 256, 64, 64, 2, 4, 256   # models/nn/gpt-tiny.ini
        spec, p = build(a.seed, V, C, P, L, F_)
        run = lambda ids: forward(p, ids, L, NH)
    else:
        V, C, L, NH, NKV, F_ = 256, 64, 2, 4, 2, 128  # models/nn/llama-tiny.ini
        spec, p = build_llama(a.seed, V, C, L, NH, NKV, F_)
        run = lambda ids: forward_llama(p, ids, L, NH, NKV)
    opt = torch.optim.AdamW(list(p.values()), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    losses = []
    for step in range(a.steps + 1):
        ids, tgt = batch(a.seed, step, a.batch, a.seq, V)
        logits = run(ids)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if step == 0:
            logits0 = logits.detach().numpy().astype("<f8").ravel()
            grads0 = np.concatenate([p[n].grad.numpy().ravel() for n, _, _ in spec]).astype("<f8")
        losses.append(loss.item())
        opt.step()
    with open(a.out, "wb") as f:
        f.write(b"SCREF001")
        f.write(struct.pack("<6i", a.batch, a.seq, V, len(grads0), len(losses), a.seed))
        f.write(logits0.tobytes())
        f.write(grads0.tobytes())
        f.write(np.array(losses, dtype="<f8").tobytes())
    print(f"{a.out}: logits {logits0.size}, gradients {grads0.size}, losses {' '.join(f'{x:.6f}' for x in losses)}")


if __name__ == "__main__":
    main()
