"""dist — DDP and FSDP in one process: the per-rank trace of an N-rank job.

A fake process group of world size N (collectives that move no data: rank
0's tensors are what every rank holds, which is all a memory trace needs) lets
the real DistributedDataParallel and FullyShardedDataParallel wrap the meta
model. What they allocate — DDP's gradient buckets, FSDP's flat-parameter
shards, the all-gathered units, the reduce-scatter inputs and outputs, the
mixed-precision copies — is then traced like any other storage. What differs
from a CUDA run is substituted, each listed in SUBSTITUTIONS:

- the process group: torch >= 2.0 has one (the "fake" backend,
  torch/testing/_internal/distributed/fake_pg.py); torch 1.13 has none, so a
  Python ProcessGroup whose collectives return completed works stands in;
- DDP's all-reduce: a communication hook returns the bucket as reduced (the
  built-in hook all-reduces the bucket in place and divides it in place,
  reducer.cpp, so no allocation is skipped); the check that every rank has the
  same parameters (_verify_param_shape_across_processes) and the broadcast of
  rank 0's states are skipped (setup only, nothing is kept), and on 1.13 the
  broadcast of the buffers before each forward (a transient flat copy of the
  buffers: GPT-2's 12 MiB of causal-mask buffers on transformers 4.26) and
  the rebuild of the buckets after the first step (see _NoRebuild);
- the device handle FSDP asks for streams and events (torch.meta, see
  MetaDevice): streams are no-ops, because the meta run is synchronous. So the
  trace cannot show what streams do to memory on a GPU: a block freed on one
  stream and reused only once the other stream's work is done, and, without
  limit_all_gathers (torch < 2.1's default), the CPU issuing all-gathers ahead
  of the GPU;
- FSDP's storage resizes (torch.distributed.utils._free_storage and
  _alloc_storage resize a flat parameter's storage to 0 and back) do not pass
  the dispatcher: memtrace.Tracker patches UntypedStorage.resize_ to see them.

FSDP with fp16/bf16 is MixedPrecision(param_dtype = buffer_dtype = the
16-bit type) without autocast, as the simulator's pytorch profile assumes
(sim/drivers/predict.c), and reduce_dtype the scenario's fsdp_reduce_dtype (by
default the 16-bit type too; plan.c fsdp_reduction); DDP with fp16/bf16 runs
under autocast like a single GPU.
"""
from __future__ import annotations

import contextlib
import types
from typing import Any, Dict, List, Optional

import torch

SUBSTITUTIONS: List[Dict[str, str]] = [
    {"what": "a fake process group of world size N: collectives move no data",
     "source": "torch/testing/_internal/distributed/fake_pg.py (torch >= 2.0); a Python "
               "ProcessGroup on 1.13"},
    {"what": "DDP: a comm hook returns the bucket as all-reduced (in place, as reducer.cpp's "
             "built-in hook); the parameter check and broadcast at construction are skipped",
     "source": "torch/nn/parallel/distributed.py; torch/csrc/distributed/c10d/reducer.cpp"},
    {"what": "FSDP: no-op streams and events (torch.meta device handle); storage resizes traced",
     "source": "torch/distributed/fsdp/_common_utils.py (_FSDPDeviceHandle); "
               "torch/distributed/utils.py (_alloc_storage, _free_storage)"},
]

TORCH2 = int(torch.__version__.split(".")[0]) >= 2

# the scenario's names of dtypes (precision, fsdp_reduce_dtype but its "default")
DTYPES: Dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Unsupported(Exception):
    """A strategy this stack cannot run in one process."""


FSDP_113 = ("strategy fsdp on torch 1.13: its torch.distributed.fsdp does not import under the stack's "
            "Python 3.11 (a dataclass with a mutable default, torch/distributed/_shard/sharded_tensor/"
            "metadata.py), and its streams are torch.cuda's; FSDP's mechanisms are traced on the "
            "current stack")


# ---- the device handle FSDP uses for streams and events ----------------------

class _Event:
    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class _Stream:
    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> Any:
        return event or _Event()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


def meta_device(gpus_per_node: int) -> types.ModuleType:
    """A torch.<device> module for the meta device: CUDA's stream API as
    no-ops (a meta run is synchronous); device_count = GPUs per node, which
    is what hybrid sharding's intra-node group is made of."""
    m = types.ModuleType("torch.meta")
    default = _Stream()
    m.Stream = _Stream  # type: ignore[attr-defined]
    m.Event = _Event  # type: ignore[attr-defined]
    m.is_available = lambda: True  # type: ignore[attr-defined]
    m.device_count = lambda: gpus_per_node  # type: ignore[attr-defined]
    m.current_device = lambda: "meta"  # type: ignore[attr-defined]
    m.set_device = lambda d: None  # type: ignore[attr-defined]
    m.current_stream = lambda device=None: default  # type: ignore[attr-defined]
    m.stream = lambda s: contextlib.nullcontext()  # type: ignore[attr-defined]
    m.synchronize = lambda device=None: None  # type: ignore[attr-defined]
    m.memory_summary = lambda *a, **k: ""  # type: ignore[attr-defined]
    return m


# ---- the process group --------------------------------------------------------

def _fake_pg_113(rank: int, size: int) -> Any:
    """torch 1.13: a ProcessGroup whose collectives complete at once."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import _create_work_from_future

    def done(result: Any) -> Any:
        f: Any = torch.futures.Future()
        f.set_result(result)
        return _create_work_from_future(f)

    class FakePG(dist.ProcessGroup):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(rank, size)

        def getBackendName(self) -> str:
            return "fake"

    for name in ("allreduce", "allreduce_coalesced", "broadcast", "reduce", "barrier", "allgather",
                 "allgather_coalesced", "_allgather_base", "reduce_scatter", "_reduce_scatter_base",
                 "alltoall", "alltoall_base", "gather", "scatter"):
        setattr(FakePG, name, lambda self, *a, **k: done(list(a[0]) if a and isinstance(a[0], list) else a[:1]))
    return FakePG()


def init_process_group(world: int) -> None:
    """The default group: world ranks, this process rank 0."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    if TORCH2:
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
        return
    import torch.distributed.distributed_c10d as c10d

    if "FAKE" not in dist.Backend.__dict__:
        dist.Backend.register_backend("fake", lambda store, rank, size, timeout: _fake_pg_113(rank, size))
    # the store-based barrier would wait for the other ranks to join
    barrier, c10d._store_based_barrier = c10d._store_based_barrier, lambda *a, **k: None
    try:
        dist.init_process_group("fake", store=dist.HashStore(), rank=0, world_size=world)
    finally:
        c10d._store_based_barrier = barrier


def destroy() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


# ---- the wrappers -----------------------------------------------------------------

def ddp(model: torch.nn.Module, t: Dict[str, Any]) -> torch.nn.Module:
    """DistributedDataParallel with the scenario's bucket size and
    gradient_as_bucket_view; the all-reduce as a comm hook (see the header)."""
    import torch.nn.parallel.distributed as D

    D._verify_param_shape_across_processes = lambda *a, **k: None
    D._sync_module_states = lambda *a, **k: None
    if not TORCH2:  # 1.13 broadcasts the buffers at each forward (c10d has no meta kernel for it)
        D.DistributedDataParallel._sync_buffers = lambda self: None
    kw: Dict[str, Any] = {"bucket_cap_mb": t.get("ddp_bucket_mb", 25)}
    if t.get("ddp_gradient_as_bucket_view"):
        kw["gradient_as_bucket_view"] = True
    m = D.DistributedDataParallel(model, **kw)

    def reduced(_state: Any, bucket: Any) -> Any:
        f: Any = torch.futures.Future()
        f.set_result(bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor())
        return f

    import torch.distributed as td

    # DDP checks the hook's annotations (not strings, as this module's are)
    reduced.__annotations__ = {"_state": object, "bucket": td.GradBucket, "return": torch.futures.Future[torch.Tensor]}
    m.register_comm_hook(None, reduced)
    if not TORCH2:
        m.reducer = _NoRebuild(m.reducer)
    return m


class _NoRebuild:
    """torch 1.13's reducer, but for the rebuild of the buckets in the order
    the first backward made the gradients ready (reducer.cpp
    rebuild_buckets): its broadcast of the new order has no meta kernel on
    1.13. The buckets keep their construction order; their sizes are the
    same, and only the swap of old for new buckets at the second step's
    start goes untraced."""

    def __init__(self, reducer: Any) -> None:
        self._r = reducer

    def _rebuild_buckets(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._r, name)


def block_classes(model: torch.nn.Module) -> set:
    """The transformer block classes (transformer_based_wrap's transformer_layer_cls)."""
    names = {"GPT2Block", "BertLayer", "T5Block", "LlamaDecoderLayer"}
    return {type(m) for m in model.modules() if type(m).__name__ in names}


def fsdp(model: torch.nn.Module, t: Dict[str, Any], amp_dtype: Optional[torch.dtype],
         gpus_per_node: int) -> torch.nn.Module:
    """FullyShardedDataParallel with the scenario's sharding strategy, wrap
    policy, prefetch and mixed precision, on the meta device."""
    import functools

    from torch.distributed import fsdp as F
    from torch.distributed.fsdp import wrap

    if not TORCH2:
        raise Unsupported(FSDP_113)
    torch.meta = meta_device(gpus_per_node)  # type: ignore[attr-defined]
    strategies = {"full_shard": "FULL_SHARD", "shard_grad_op": "SHARD_GRAD_OP", "no_shard": "NO_SHARD",
                  "hybrid_shard": "HYBRID_SHARD", "hybrid_shard_zero2": "_HYBRID_SHARD_ZERO2"}
    policy: Any = None
    if t["fsdp_auto_wrap_policy"] == "transformer_based_wrap":
        policy = functools.partial(wrap.transformer_auto_wrap_policy,
                                   transformer_layer_cls=block_classes(model))
    elif t["fsdp_auto_wrap_policy"] == "size_based_wrap":
        policy = functools.partial(wrap.size_based_auto_wrap_policy,
                                   min_num_params=int(t["fsdp_min_num_params"]))
    prefetch = {"backward_pre": F.BackwardPrefetch.BACKWARD_PRE,
                "backward_post": F.BackwardPrefetch.BACKWARD_POST, "none": None}
    # reduce_dtype: the scenario's fsdp_reduce_dtype, by default the compute
    # dtype (MixedPrecision's fields left None keep the parameters' fp32)
    reduce = DTYPES.get(t.get("fsdp_reduce_dtype", "default"), amp_dtype)
    mp = None
    if amp_dtype is not None or reduce is not None:
        mp = F.MixedPrecision(param_dtype=amp_dtype, reduce_dtype=reduce, buffer_dtype=amp_dtype)
    return F.FullyShardedDataParallel(
        model, sharding_strategy=getattr(F.ShardingStrategy, strategies[t["fsdp_sharding_strategy"]]),
        auto_wrap_policy=policy, backward_prefetch=prefetch[t["fsdp_backward_prefetch"]],
        forward_prefetch=bool(t["fsdp_forward_prefetch"]), mixed_precision=mp,
        limit_all_gathers=bool(t.get("fsdp_limit_all_gathers", True)), device_id=torch.device("meta"),
        sync_module_states=False, param_init_fn=lambda module: None)  # meta stays meta
