#!/usr/bin/env python3
"""pyref — what PyTorch really allocates in a training step, without a GPU.

Runs a shardcast scenario's model (Hugging Face transformers, built from the
simulator's model fields) for a few full training steps on the meta device,
with the CUDA behaviours of cudasubst.py substituted, and records every
storage allocated and freed (memtrace.py). Prints one JSON object: the stack's
versions, the substitutions, and per micro-batch the peak live bytes, where it
happens, the live bytes per category at the peak and the end-of-forward bytes;
then fixed + per-sample bytes from the batches. `bin/validate SCENARIO --backend
pytorch` writes the spec and reads this output.

--device cpu runs for real on the CPU instead (no substitutions) and adds the
CPU allocator's own peak from torch.profiler's memory events, and an
independent count of the end-of-forward bytes, to validate the tracer.
"""
from __future__ import annotations

import argparse
import csv
import gc
import json
import platform
import sys
from typing import Any, Dict, List, Optional

import torch

import cudasubst
import fsdp2
import hfmodels
from memtrace import HAS_UNTYPED, Trace, Tracker

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Unsupported(Exception):
    """A scenario the tracer cannot run on this stack (exit 2)."""


def check(spec: Dict[str, Any]) -> None:
    """Raises Unsupported for what this tracer cannot run."""
    t = spec["training"]
    if fsdp2.wanted(spec):
        fsdp2.check(spec)
    elif t["strategy"] not in ("single",) and spec["world"] > 1:
        raise Unsupported(f"strategy {t['strategy']} on {spec['world']} ranks: the tracer runs one "
                          "rank without a process group (strategy = single)")
    if t["tensor_parallel"] > 1 or t["offload"] != "none":
        raise Unsupported("tensor_parallel > 1 and offload are not run by the tracer")
    if t["recompute"] == "selective":
        raise Unsupported("activation_checkpointing = selective has no transformers equivalent "
                          "(gradient_checkpointing_enable checkpoints whole blocks)")
    if t["precision"] in AMP_DTYPES and not TORCH2:
        raise Unsupported(f"precision {t['precision']}: the autocast emulation needs torch >= 2.0")
    if spec.get("attention") == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        raise Unsupported(f"attention sdpa: torch {torch.__version__} has no scaled_dot_product_attention")
    hfmodels.kind(spec["model"])


def optimizer(model: torch.nn.Module, name: str) -> torch.optim.Optimizer:
    # CUDA's default is foreach from 2.0 (cudasubst); 1.13's default is the for-loop
    kw: Dict[str, Any] = {"foreach": True} if TORCH2 else {}
    params = [p for p in model.parameters() if p.requires_grad]
    if name in ("adam", "adamw"):
        cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
        return cls(params, lr=1e-4, **kw)
    return torch.optim.SGD(params, lr=1e-3, momentum=0.9 if name == "sgd_momentum" else 0.0, **kw)


class ModuleNames:
    """Keeps trace.module = the innermost module running forward."""

    def __init__(self, model: torch.nn.Module, trace: Trace) -> None:
        self.trace = trace
        self.stack: List[str] = []
        self.handles = []
        for name, mod in model.named_modules():
            self.handles.append(mod.register_forward_pre_hook(self._pre(name or "model")))
            self.handles.append(mod.register_forward_hook(self._post()))

    def _pre(self, name: str) -> Any:
        def f(*_: Any) -> None:
            self.stack.append(name)
            self.trace.module = name
        return f

    def _post(self) -> Any:
        def f(*_: Any) -> None:
            if self.stack:
                self.stack.pop()
            self.trace.module = self.stack[-1] if self.stack else ""
        return f

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def saved_storages(root: Any) -> List[torch.Tensor]:
    """Every tensor the autograd graph under root keeps for backward."""
    seen, out, todo = set(), [], [root]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        for a in dir(n):
            if a.startswith("_saved_"):
                try:
                    v = getattr(n, a)
                except Exception:
                    continue
                for x in (v if isinstance(v, (list, tuple)) else [v]):
                    if isinstance(x, torch.Tensor):
                        out.append(x)
        todo.extend(f for f, _ in getattr(n, "next_functions", ()))
    return out


def storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata if HAS_UNTYPED else t.storage()._cdata


def storage_bytes(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() if HAS_UNTYPED else t.storage().nbytes()


def independent_count(model: torch.nn.Module, opt: torch.optim.Optimizer, batch: Dict[str, Any],
                      out: Any, amp: Optional[cudasubst.Amp]) -> int:
    """Parameters, buffers, gradients, optimizer states, inputs, the unique
    storages saved for backward, the outputs and the autocast cache, by
    storage (each counted once)."""
    ts: List[torch.Tensor] = list(model.parameters()) + list(model.buffers())
    ts += [p.grad for p in model.parameters() if p.grad is not None]
    ts += [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
    ts += list(batch.values())
    outs = [v for v in out.values() if isinstance(v, torch.Tensor)] if hasattr(out, "values") else []
    ts += outs
    for o in outs:
        if o.grad_fn is not None:
            ts += saved_storages(o.grad_fn)
    if amp is not None:
        ts += list(amp.cache.values())
    # Python numbers wrapped as 0-dim double/long tensors (TensorImpl's
    # is_wrapped_number) stay on the host on CUDA: not device memory
    ts = [t for t in ts if not (t.dim() == 0 and t.dtype in (torch.float64, torch.int64))]
    uniq = {storage_key(t): storage_bytes(t) for t in ts}
    return sum(uniq.values())


def run(spec: Dict[str, Any], b: int, device: str) -> Dict[str, Any]:
    """Trains spec's model at micro-batch b for spec['steps'] steps; the trace."""
    t = spec["training"]
    m = spec["model"]
    sharded = fsdp2.wanted(spec)  # FSDP2: MixedPrecisionPolicy instead of autocast
    amp = cudasubst.Amp(AMP_DTYPES[t["precision"]]) if t["precision"] in AMP_DTYPES and not sharded else None
    subst = device == "meta"
    model, k = hfmodels.build(m, spec["dropout"], spec.get("attention", "eager"), device)
    if t["recompute"] == "full":
        model.gradient_checkpointing_enable()
    if sharded:
        model = fsdp2.wrap(model, spec)
    trace = Trace()
    tracker = Tracker(trace)
    trace.phase = "params"
    for p in model.parameters():
        tracker.register(p, "params")
    for x in model.buffers():
        tracker.register(x, "buffers")
    names = ModuleNames(model, trace)
    eof: List[int] = []
    indep: List[int] = []
    fmode = cudasubst.CudaSubst(amp, spec.get("attention", "eager")) if subst else None
    patch = cudasubst.AutocastPatch(amp, fmode) if subst and TORCH2 else None
    try:
        if patch:
            patch.__enter__()
        if fmode:
            fmode.__enter__()
        with tracker, fsdp2.trace_resizes(tracker):
            trace.phase = "setup"
            opt = optimizer(model, t["optimizer"])
            scale = None
            if t["precision"] == "fp16":
                scale = [torch.full((), 65536.0, device=device), torch.zeros((), dtype=torch.int32, device=device),
                         torch.zeros((), device=device)]
            for step in range(spec["steps"]):
                trace.step = step
                for _micro in range(t["grad_accum"]):
                    trace.phase = "input"
                    batch = hfmodels.batch(k, m, b, spec["seq_len"], spec["target_len"], device)
                    trace.phase = "forward"
                    if amp is not None:
                        with torch.autocast(device if subst else device, dtype=amp.dtype):
                            out = model(**batch)
                    else:
                        out = model(**batch)
                    loss = out["loss"]
                    eof.append(trace.live)
                    if device == "cpu" and step == spec["steps"] - 1:
                        indep.append(independent_count(model, opt, batch, out, amp))
                    trace.phase = "backward"
                    (loss * scale[0] if scale else loss).backward()
                    trace.module = ""
                    del out, loss, batch
                trace.phase = "optimizer"
                if scale:  # GradScaler.unscale_: in place
                    torch._foreach_mul_([p.grad for p in model.parameters() if p.grad is not None], 1.0 / 65536)
                opt.step()
                trace.phase = "zero_grad"
                opt.zero_grad()
                for p in model.parameters():
                    if p.grad is not None:
                        tracker.retag(p.grad, "grads")
                    for v in opt.state.get(p, {}).values():
                        if isinstance(v, torch.Tensor):
                            tracker.retag(v, "optimizer_states")
            trace.phase = "end"
            del opt
            gc.collect()
    finally:
        if fmode:
            fmode.__exit__(None, None, None)
        if patch:
            patch.__exit__(None, None, None)
        names.remove()
    return summarize(trace, b, eof, indep)


def summarize(trace: Trace, b: int, eof: List[int], indep: List[int]) -> Dict[str, Any]:
    ev = trace.events
    live, steady, steady_at, step_peaks = 0, 0, -1, {}
    for i, e in enumerate(ev):
        live += e.sign * e.nbytes
        if e.sign > 0:
            step_peaks[e.step] = max(step_peaks.get(e.step, 0), live)
            if e.step >= 1 and live > steady:
                steady, steady_at = live, i
    pk = ev[trace.peak_event] if trace.peak_event >= 0 else None
    sp = ev[steady_at] if steady_at >= 0 else pk
    return {
        "batch": b, "events": len(ev),
        "peak_bytes": trace.peak, "peak_step": pk.step if pk else 0,
        "peak_phase": pk.phase if pk else "", "peak_op": pk.op if pk else "",
        "peak_module": pk.module if pk else "",
        "steady_peak_bytes": steady or trace.peak,
        "steady_peak_phase": sp.phase if sp else "", "steady_peak_op": sp.op if sp else "",
        "steady_peak_module": sp.module if sp else "",
        "step_peaks": [step_peaks[s] for s in sorted(step_peaks)],
        "at_peak": trace.peak_cat,
        "end_of_forward_bytes": eof[-1] if eof else 0,
        "independent_end_of_forward_bytes": indep[-1] if indep else None,
        "_trace": trace,
    }


def cpu_allocator_peak(spec: Dict[str, Any], b: int) -> int:
    """The same run on the CPU under torch.profiler(profile_memory=True): the
    peak of the CPU allocator's own accounting (its [memory] events)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        res = run(spec, b, "cpu")
    evs = []
    for e in prof.profiler.kineto_results.events():  # in order: one per malloc/free
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU:
            evs.append((e.start_ns() if hasattr(e, "start_ns") else e.start_us(), e.nbytes()))
    live = peak = 0
    for _, d in sorted(evs, key=lambda x: x[0]):
        live += d
        peak = max(peak, live)
    del res
    return peak


def versions() -> Dict[str, str]:
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version()}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", required=True, help="the scenario as JSON (written by bin/validate)")
    ap.add_argument("--device", default="meta", choices=["meta", "cpu", "cuda"],
                    help="meta: trace with CUDA substitutions (default); cpu: run for real and "
                         "compare with the CPU allocator; cuda: run for real (untested here)")
    ap.add_argument("--batches", default="1,2", help="micro-batches to run (>= 2 for the slope)")
    ap.add_argument("--steps", type=int, default=3, help="training steps per batch (default 3)")
    ap.add_argument("--trace-csv", help="write the last batch's events as CSV")
    a = ap.parse_args(argv)
    with open(a.spec) as f:
        spec = json.load(f)
    spec["steps"] = a.steps
    try:
        check(spec)
        if a.device == "cuda":
            return run_cuda(spec, a)
        batches = [int(x) for x in a.batches.split(",")]
        runs = [run(spec, bb, a.device) for bb in batches]
        if a.device == "cpu":
            for r, bb in zip(runs, batches):
                r["cpu_allocator_peak_bytes"] = cpu_allocator_peak(spec, bb)
    except (Unsupported, hfmodels.Unsupported, fsdp2.Unsupported) as e:
        print(f"pyref: error: {e}", file=sys.stderr)
        return 2
    if a.trace_csv:
        write_csv(runs[-1]["_trace"], a.trace_csv)
    for r in runs:
        del r["_trace"]
    subs = cudasubst.SUBSTITUTIONS + (fsdp2.SUBSTITUTIONS if fsdp2.wanted(spec) else [])
    out = {"stack": versions(), "device": a.device, "substitutions": subs if a.device == "meta" else [],
           "runs": runs}
    if len(runs) >= 2:
        r0, r1 = runs[0], runs[-1]
        slope = (r1["steady_peak_bytes"] - r0["steady_peak_bytes"]) / (r1["batch"] - r0["batch"])
        out["per_sample_bytes"] = slope
        out["fixed_bytes"] = r0["steady_peak_bytes"] - slope * r0["batch"]
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


def write_csv(trace: Trace, path: str) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["action", "id", "bytes", "phase", "step", "category", "op", "module"])
        for e in trace.events:
            w.writerow(["alloc" if e.sign > 0 else "free", e.sid, e.nbytes, e.phase, e.step, e.cat,
                        e.op, e.module])


def run_cuda(spec: Dict[str, Any], a: Any) -> int:
    """On a GPU: the real run's torch.cuda.max_memory_allocated/reserved and
    step times. Thin and untested here (no GPU on the build machines)."""
    import time

    res = []
    for bb in [int(x) for x in a.batches.split(",")]:
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        r = run(spec, bb, "cuda")
        torch.cuda.synchronize()
        del r["_trace"]
        r["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        r["max_memory_reserved"] = torch.cuda.max_memory_reserved()
        r["seconds"] = time.perf_counter() - t0
        res.append(r)
    json.dump({"stack": versions(), "device": "cuda", "runs": res}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
