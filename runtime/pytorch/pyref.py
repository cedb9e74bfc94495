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
import contextlib
import csv
import gc
import json
import platform
import sys
from typing import Any, Dict, List, Optional

import torch

import cudasubst
import dist
import fsdp2
import hfmodels
from memtrace import HAS_UNTYPED, Trace, Tracker, _leaves

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Unsupported(Exception):
    """A scenario the tracer cannot run on this stack (exit 2)."""


def check(spec: Dict[str, Any]) -> None:
    """Raises Unsupported for what this tracer cannot run."""
    t = spec["training"]
    if t["strategy"] in ("zero1", "zero2", "zero3"):
        raise Unsupported(f"strategy {t['strategy']}: DeepSpeed is not in the reference stacks, and its "
                          "engine cannot run on meta tensors (deepspeed.initialize allocates its flat "
                          "buffers and fused optimizer through its CUDA accelerator, which has no meta "
                          "device)")
    if t["strategy"] == "dp":
        raise Unsupported("strategy dp: nn.DataParallel replicates the module onto several real devices "
                          "(torch/nn/parallel/replicate.py); it cannot run on the meta device")
    if t["tensor_parallel"] > 1 or t["offload"] != "none":
        raise Unsupported("tensor_parallel > 1 and offload are not run by the tracer")
    if spec.get("attention") == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        raise Unsupported(f"attention sdpa: torch {torch.__version__} has no scaled_dot_product_attention")
    if fsdp2.wanted(spec):
        fsdp2.check(spec)
    elif t["strategy"] == "fsdp" and not dist.TORCH2:
        raise Unsupported(dist.FSDP_113)
    hfmodels.kind(spec["model"])
    if t["recompute"] == "selective":
        hfmodels.check_selective(spec["model"])


def optimizer(params: List[torch.nn.Parameter], name: str) -> torch.optim.Optimizer:
    # CUDA's default is foreach from 2.0 (cudasubst); 1.13's default is the for-loop
    kw: Dict[str, Any] = {"foreach": True} if TORCH2 else {}
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
    # nodes are keyed by id() and kept referenced: torch 1.13 makes a new
    # Python object for a node each time next_functions is read, so an id
    # freed along the way could be reused by another node
    seen, keep, out, todo = set(), [], [], [root]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        keep.append(n)
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
    # the outputs, nested ones too (transformers 4.x returns use_cache's
    # (key, value) views of each layer's qkv product as tuples)
    outs = [v for v in _leaves(list(out.values())) if isinstance(v, torch.Tensor)] \
        if hasattr(out, "values") else []
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


def register(tracker: Tracker, model: torch.nn.Module) -> None:
    """The model's parameters and buffers, made before the trace starts (in a
    function: a loop variable left in run() would keep the last parameter alive
    after FSDP has flattened it away)."""
    for p in model.parameters():
        tracker.register(p, "params")
    for x in model.buffers():
        tracker.register(x, "buffers")


def wrap(model: torch.nn.Module, spec: Dict[str, Any], amp_dtype: Optional[torch.dtype]) -> torch.nn.Module:
    """The model as the strategy runs it (dist.py): DDP or FSDP over a fake
    process group of the data-parallel ranks, or the model itself."""
    t = spec["training"]
    if t["strategy"] == "ddp":
        return dist.ddp(model, t)
    if t["strategy"] == "fsdp":
        if fsdp2.wanted(spec):  # MixedPrecisionPolicy from the spec
            return fsdp2.wrap(model, spec)
        return dist.fsdp(model, t, amp_dtype, int(spec.get("gpus_per_node", 1)))
    return model


def retag_states(tracker: Tracker, params: List[torch.nn.Parameter], opt: torch.optim.Optimizer) -> None:
    for p in params:
        tracker.retag(p, "params")  # FSDP's flat-parameter shards
        if p.grad is not None:
            tracker.retag(p.grad, "grads")
        for v in opt.state.get(p, {}).values():
            if isinstance(v, torch.Tensor):
                tracker.retag(v, "optimizer_states")


def step(spec: Dict[str, Any], runner: torch.nn.Module, params: List[torch.nn.Parameter],
         opt: torch.optim.Optimizer, k: str, b: int, device: str, trace: Trace,
         amp: Optional[cudasubst.Amp], scale: Optional[List[torch.Tensor]], probe: Any) -> None:
    """One optimizer step: grad_accum micro-steps (those before the last in
    the wrapper's no_sync() where the scenario's plan says so: DDP by
    default, FSDP1 with no_sync = true; FSDP2's set_requires_gradient_sync(False)
    with no_sync = true), the step, zero_grad as the stack defaults
    (set_to_none from 2.0)."""
    t, m = spec["training"], spec["model"]
    # FSDP2's counterpart of no_sync(): set_requires_gradient_sync(False)
    # (fully_shard.py), as verl's FSDP2 accumulation and hand-written loops
    # call it (Accelerate's no_sync() looks up the module's no_sync(), which
    # fully_shard modules lack)
    fsdp2_sync = hasattr(runner, "set_requires_gradient_sync")
    no_sync = bool(t.get("no_sync", False)) and (hasattr(runner, "no_sync") or fsdp2_sync)
    for micro in range(t["grad_accum"]):
        sync = micro == t["grad_accum"] - 1 or not no_sync
        if no_sync and fsdp2_sync:
            runner.set_requires_gradient_sync(sync)
        with (contextlib.nullcontext() if sync or fsdp2_sync else runner.no_sync()):
            trace.phase = "input"
            batch = hfmodels.batch(k, m, b, spec["seq_len"], spec["target_len"], device)
            trace.phase = "forward"
            with (torch.autocast(device, dtype=amp.dtype) if amp is not None else contextlib.nullcontext()):
                out = runner(**batch)
            loss = out["loss"]
            probe(batch, out)
            trace.phase = "backward"
            (loss * scale[0] if scale else loss).backward()
            trace.module = ""
            del out, loss, batch
    trace.phase = "optimizer"
    if scale:  # GradScaler.unscale_: in place (1.13's _foreach_mul_ has no meta kernel)
        grads = [p.grad for p in params if p.grad is not None]
        if TORCH2:
            torch._foreach_mul_(grads, 1.0 / 65536)
        else:
            for g in grads:
                g.mul_(1.0 / 65536)
    opt.step()
    trace.phase = "zero_grad"
    opt.zero_grad()


def run(spec: Dict[str, Any], b: int, device: str) -> Dict[str, Any]:
    """Trains spec's model at micro-batch b for spec['steps'] steps; the trace."""
    t = spec["training"]
    fsdp_mp = t["strategy"] == "fsdp" and t["precision"] in AMP_DTYPES  # MixedPrecision, no autocast
    amp = cudasubst.Amp(AMP_DTYPES[t["precision"]]) if t["precision"] in AMP_DTYPES and not fsdp_mp else None
    subst = device == "meta"
    model, k = hfmodels.build(spec["model"], spec["dropout"], spec.get("attention", "eager"), device)
    if t["recompute"] == "full":
        model.gradient_checkpointing_enable()
    trace = Trace()
    tracker = Tracker(trace, device)
    trace.phase = "params"
    register(tracker, model)
    names = ModuleNames(model, trace)
    eof: List[int] = []
    indep: List[int] = []
    fmode = cudasubst.CudaSubst(amp, spec.get("attention", "eager")) if subst else None
    patch = cudasubst.AutocastPatch(amp, fmode) if subst else None
    with contextlib.ExitStack() as es:
        es.callback(names.remove)
        if t["recompute"] == "selective":
            es.enter_context(hfmodels.selective(model))
        if t["strategy"] in ("ddp", "fsdp"):
            dist.init_process_group(int(spec.get("dp", spec["world"])))
            es.callback(dist.destroy)
        if patch:
            es.enter_context(patch)
        if fmode:
            es.enter_context(fmode)
        es.enter_context(tracker)
        trace.phase = "setup"
        runner = wrap(model, spec, AMP_DTYPES[t["precision"]] if fsdp_mp else None)
        params = [p for p in runner.parameters() if p.requires_grad]
        opt = optimizer(params, t["optimizer"])
        scale = None
        if t["precision"] == "fp16":
            scale = [torch.full((), 65536.0, device=device), torch.zeros((), dtype=torch.int32, device=device),
                     torch.zeros((), device=device)]

        def probe(batch: Dict[str, Any], out: Any) -> None:
            eof.append(trace.live)
            if device == "cpu" and trace.step == spec["steps"] - 1:
                indep.append(independent_count(model, opt, batch, out, amp))

        for n in range(spec["steps"]):
            trace.step = n
            step(spec, runner, params, opt, k, b, device, trace, amp, scale, probe)
            retag_states(tracker, params, opt)
        trace.phase = "end"
        del opt, runner, params
        gc.collect()
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


def trace_spec(spec: Dict[str, Any], batches: List[int], device: str, trace_csv: Optional[str]) -> Dict[str, Any]:
    """The tracer's output object for spec at each micro-batch; raises
    Unsupported (or hfmodels'/dist's) for what it cannot run."""
    check(spec)
    runs = [run(spec, bb, device) for bb in batches]
    if device == "cpu":
        for r, bb in zip(runs, batches):
            r["cpu_allocator_peak_bytes"] = cpu_allocator_peak(spec, bb)
    if trace_csv:
        write_csv(runs[-1]["_trace"], trace_csv)
    for r in runs:
        del r["_trace"]
    subs = cudasubst.SUBSTITUTIONS + (fsdp2.SUBSTITUTIONS if fsdp2.wanted(spec)
                                      else dist.SUBSTITUTIONS if spec["training"]["strategy"] in ("ddp", "fsdp")
                                      else [])
    out = {"stack": versions(), "device": device, "substitutions": subs if device == "meta" else [],
           "runs": runs}
    if len(runs) >= 2:
        r0, r1 = runs[0], runs[-1]
        slope = (r1["steady_peak_bytes"] - r0["steady_peak_bytes"]) / (r1["batch"] - r0["batch"])
        out["per_sample_bytes"] = slope
        out["fixed_bytes"] = r0["steady_peak_bytes"] - slope * r0["batch"]
    return out


UNSUPPORTED = (Unsupported, hfmodels.Unsupported, dist.Unsupported, fsdp2.Unsupported)


def batch(path: str, steps: int) -> int:
    """--batch: one line per case, "SPEC OUT_JSON OUT_CSV A,B"; each case's
    output (or {"error": message} for what the tracer cannot run) is written to
    OUT_JSON, atomically. One process for many cases: the imports (most of a
    case's time) are paid once."""
    import os

    with open(path) as f:
        cases = [ln.split() for ln in f if ln.strip()]
    for spec_path, out_json, out_csv, bs in cases:
        with open(spec_path) as f:
            spec = json.load(f)
        spec["steps"] = steps
        try:
            out = trace_spec(spec, [int(x) for x in bs.split(",")], "meta", out_csv)
        except UNSUPPORTED as e:
            out = {"error": str(e)}
        except Exception as e:  # a tracer bug: this case fails, the others still run
            import traceback

            traceback.print_exc()
            out = {"failed": f"{type(e).__name__}: {e}"}
        with open(out_json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(out_json + ".tmp", out_json)
        gc.collect()
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", help="the scenario as JSON (written by bin/validate)")
    ap.add_argument("--batch", help="a file of cases, one per line: SPEC OUT_JSON OUT_CSV A,B (meta device)")
    ap.add_argument("--device", default="meta", choices=["meta", "cpu", "cuda"],
                    help="meta: trace with CUDA substitutions (default); cpu: run for real and "
                         "compare with the CPU allocator; cuda: run for real (untested here)")
    ap.add_argument("--batches", default="1,2", help="micro-batches to run (>= 2 for the slope)")
    ap.add_argument("--steps", type=int, default=2,
                    help="training steps per batch (default 2: the second is the steady one)")
    ap.add_argument("--trace-csv", help="write the last batch's events as CSV")
    a = ap.parse_args(argv)
    if a.batch:
        return batch(a.batch, a.steps)
    if not a.spec:
        ap.error("--spec or --batch is required")
    with open(a.spec) as f:
        spec = json.load(f)
    spec["steps"] = a.steps
    try:
        if a.device == "cuda":
            check(spec)
            return run_cuda(spec, a)
        out = trace_spec(spec, [int(x) for x in a.batches.split(",")], a.device, a.trace_csv)
    except UNSUPPORTED as e:
        print(f"pyref: error: {e}", file=sys.stderr)
        return 2
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
