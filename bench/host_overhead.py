#!/usr/bin/env python3
"""host_overhead — PyTorch's host-side cost of a training step, without a GPU.

Runs forward, backward and optimizer steps of a Hugging Face model with the
real model's structure (layers, modules, parameter tensors) but tiny tensors
(hidden 64, 16 tokens) on one CPU thread: every op goes through Python module
code, the dispatcher, autograd's graph building and its engine, and
torch.optim's bookkeeping, and its kernel does almost no work. The time per op
is what the host spends to issue it, with a CPU kernel of a few elements in
place of the CUDA launch (cudaLaunchKernel, the simulator's dispatch_native).
The meta device is not used: many of its kernels are Python meta functions,
about 50x slower than the dispatch they would stand for (measured: 1 ms per
op on torch 2.15).

Prints one JSON object (--json) or a table: aten ops per forward and backward,
host seconds per forward op and per backward op, per module hook call (a
forward pre/post hook pair on every module, as FSDP and DDP install), and per
parameter tensor of the optimizer step for each implementation (for_loop,
foreach, fused). The figures feed models/frameworks/pytorch.ini.

Usage: host_overhead.py [--model gpt2|llama] [--layers N] [--seq S (16)] [--batch B]
                        [--steps K] [--json]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from typing import Any, Callable, Dict

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class OpCount(TorchDispatchMode):
    """Counts the aten ops dispatched while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.n += 1
        return func(*args, **(kwargs or {}))


def build(kind: str, layers: int) -> torch.nn.Module:
    """A transformers model of the given family on the meta device."""
    import transformers  # imported here: --help works without it

    if kind == "gpt2":
        cfg: Any = transformers.GPT2Config(n_layer=layers, n_embd=64, n_head=4, vocab_size=256,
                                           n_positions=64, attn_implementation="sdpa")
    else:
        cfg = transformers.LlamaConfig(num_hidden_layers=layers, hidden_size=64,
                                       intermediate_size=176, num_attention_heads=4,
                                       num_key_value_heads=4, vocab_size=256,
                                       max_position_embeddings=64, attn_implementation="sdpa")
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    model.train()
    return model


def best(fn: Callable[[], None], steps: int) -> float:
    """The fastest of steps runs of fn, CPU seconds of this process (after one
    warm-up): a shared machine's other load does not count, only this thread's."""
    fn()
    t = []
    for _ in range(steps):
        t0 = time.process_time()
        fn()
        t.append(time.process_time() - t0)
    return min(t)


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    torch.set_num_threads(1)
    model = build(args.model, args.layers)
    ids = torch.zeros((args.batch, args.seq), dtype=torch.long)
    out: Dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                           "machine": platform.processor() or platform.machine(),
                           "model": args.model, "layers": args.layers}

    def fwd() -> torch.Tensor:
        return model(input_ids=ids, labels=ids).loss

    def fwd_bwd() -> None:
        fwd().backward()

    with OpCount() as c:
        loss = fwd()
    out["forward_ops"] = c.n
    with OpCount() as c:
        loss.backward()
    out["backward_ops"] = c.n
    t_f = best(lambda: fwd(), args.steps)
    t_fb = best(fwd_bwd, args.steps)
    out["forward_s"] = t_f
    out["backward_s"] = t_fb - t_f
    out["per_forward_op_s"] = t_f / out["forward_ops"]
    out["per_backward_op_s"] = (t_fb - t_f) / out["backward_ops"]

    mods = list(model.modules())
    handles = []
    for m in mods:
        handles.append(m.register_forward_pre_hook(lambda mod, inp: None))
        handles.append(m.register_forward_hook(lambda mod, inp, o: None))
    t_h = best(lambda: fwd(), args.steps)
    for h in handles:
        h.remove()
    out["modules"] = len(mods)
    out["per_module_hooks_s"] = max(0.0, (t_h - t_f) / len(mods))

    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.zeros_like(p)
    out["param_tensors"] = len(params)
    for impl in ("for_loop", "foreach", "fused"):
        kw = {"foreach": impl == "foreach", "fused": impl == "fused"}
        try:
            opt = torch.optim.AdamW(params, lr=1e-4, **kw)
            t_o = best(lambda: opt.step(), args.steps)
        except (RuntimeError, NotImplementedError) as exc:  # fused may refuse meta
            out[f"optimizer_{impl}_error"] = str(exc).splitlines()[0]
            continue
        out[f"optimizer_{impl}_s"] = t_o
        out[f"optimizer_{impl}_per_tensor_s"] = t_o / len(params)
    return out


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("gpt2", "llama"), default="gpt2")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = measure(args)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for k, v in out.items():
            print(f"{k:32s} {v * 1e6:10.2f} us" if k.endswith("_s") else f"{k:32s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
