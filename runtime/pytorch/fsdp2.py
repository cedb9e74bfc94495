"""fsdp2 — FSDP2 (torch.distributed.fsdp.fully_shard) in one process: the
per-rank trace of an N-rank job.

A fake process group of world size N (collectives that move no data: what
rank 0 holds is all a memory trace needs) and a device mesh over it let the
real fully_shard shard the meta model: per-parameter DTensor Shard(0) shards
padded to a multiple of the mesh (_fsdp_param.py), the all-gather copy-in and
copy-out buffers and the reduce-scatter input and output
(_fsdp_collectives.py), and their lifetimes across the stream handoffs
(_fsdp_param_group.py: AllGatherState, reduce_scatter_states) are then traced
like any other storage. What differs from a CUDA run is substituted (each in
SUBSTITUTIONS):

- the process group: torch's "fake" backend
  (torch/testing/_internal/distributed/fake_pg.py);
- the device FSDP2 takes from the mesh: a "meta" device module whose streams
  and events are no-ops (a meta run is synchronous), so the trace is the
  allocation order the CPU issues, not the cross-stream reuse a GPU's caching
  allocator adds to it;
- FSDP2 refuses parameters on the meta device (_validate_no_meta_params):
  the check is skipped, the meta tensors stand for the GPU ones;
- the unsharded parameters are freed and re-allocated by storage resizes
  (_fsdp_param.py alloc_storage, free_storage), which do not pass the
  dispatcher: memtrace.Tracker traces UntypedStorage.resize_.

The fake process group and the meta device's no-op streams are dist.py's
(shared with DDP and FSDP1).

The scenario's FSDP2 settings map to fully_shard's arguments: each
transformer block and then the root wrapped (transformer_based_wrap, as
Accelerate's fsdp2_prepare_model and torchtitan do) or the root alone
(no_wrap); reshard_after_forward default (None: True for the blocks, False
for the root), true, false or a group size, passed to every module as
Accelerate does when it is set; MixedPrecisionPolicy(param_dtype = the
16-bit precision, reduce_dtype = the scenario's); hybrid
sharding as a 2-D mesh (replicate, shard) with the shard dimension inside a
node.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch

from dist import DTYPES

SUBSTITUTIONS: List[Dict[str, str]] = [
    {"what": "FSDP2: a fake process group of world size N and a device mesh over it; "
             "collectives move no data",
     "source": "torch/testing/_internal/distributed/fake_pg.py"},
    {"what": "FSDP2: no-op streams and events on the meta device (the CPU's allocation order; "
             "dist.meta_device)",
     "source": "torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py (FSDPCommContext)"},
    {"what": "FSDP2: meta parameters accepted (_validate_no_meta_params skipped); storage "
             "resizes of the unsharded parameters traced",
     "source": "torch/distributed/fsdp/_fully_shard/_fsdp_param.py (alloc_storage, free_storage)"},
]

class Unsupported(Exception):
    """An FSDP2 setting this tracer does not run."""


def wanted(spec: Dict[str, Any]) -> bool:
    """Whether spec asks for FSDP2."""
    t = spec["training"]
    return t["strategy"] == "fsdp" and int(t.get("fsdp_version", 1)) == 2


def available() -> bool:
    """Whether this stack has fully_shard (torch >= 2.4; 1.13's
    torch.distributed.fsdp does not even import under Python 3.11, see
    dist.FSDP_113)."""
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except Exception:  # ImportError, or 1.13's ValueError at import
        return False
    return True


def check(spec: Dict[str, Any]) -> None:
    """Raises Unsupported for FSDP2 settings the tracer cannot run."""
    t = spec["training"]
    if not available():
        raise Unsupported(f"fsdp_version = 2 needs torch >= 2.4 (fully_shard); this stack has {torch.__version__}")
    if t.get("fsdp_sharding_strategy", "full_shard") not in ("full_shard", "hybrid_shard"):
        raise Unsupported("fsdp_version = 2 shards fully or hybrid (full_shard, hybrid_shard); "
                          "reshard_after_forward = false is FSDP1's shard_grad_op")
    if t.get("fsdp_auto_wrap_policy", "transformer_based_wrap") == "size_based_wrap":
        raise Unsupported("fsdp_version = 2 with size_based_wrap is not traced (transformer_based_wrap, no_wrap)")


# ---- the device -------------------------------------------------------------------

def init(gpus_per_node: int) -> None:
    """The meta device module FSDP2 asks for streams (dist.meta_device, with
    an integer device index and the stream fields FSDP2's
    record_grad_output_stream reads) and meta parameters accepted; the fake
    default group is dist's."""
    import dist
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    class Stream(dist._Stream):
        stream_id = 0
        device_index = 0
        device_type = 0

    m = dist.meta_device(gpus_per_node)
    default = Stream()
    m.Stream = Stream  # type: ignore[attr-defined]
    m.current_device = lambda: 0  # type: ignore[attr-defined]
    m.current_stream = lambda device=None: default  # type: ignore[attr-defined]
    torch.meta = m  # type: ignore[attr-defined]
    FSDPParamGroup._validate_no_meta_params = lambda self: None  # type: ignore[method-assign]


def mesh(world: int, shard: int) -> Any:
    """1-D over world ranks, or (replicate, shard) for hybrid sharding."""
    from torch.distributed.device_mesh import DeviceMesh

    if shard >= world:
        return DeviceMesh("meta", torch.arange(world), mesh_dim_names=("shard",))
    return DeviceMesh("meta", torch.arange(world).view(world // shard, shard),
                      mesh_dim_names=("replicate", "shard"))


# ---- wrapping ----------------------------------------------------------------------

def reshard_arg(v: Any) -> Any:
    """The scenario's fsdp_reshard_after_forward as fully_shard's argument:
    default -> None, true/false -> bool, N -> int."""
    if v is None or v == "default":
        return None
    if isinstance(v, bool):
        return v
    if v in ("true", "false"):
        return v == "true"
    return int(v)  # fully_shard: 1 means False, the shard group's size True


def wrap(model: torch.nn.Module, spec: Dict[str, Any]) -> torch.nn.Module:
    """fully_shard on the blocks, then on the root, with the scenario's
    mesh, reshard_after_forward and MixedPrecisionPolicy."""
    import dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    t = spec["training"]
    world = int(spec["world"])
    gpn = int(spec.get("gpus_per_node", world))
    init(gpn)
    hybrid = t.get("fsdp_sharding_strategy") == "hybrid_shard"
    m = mesh(world, min(gpn, world) if hybrid else world)
    param = DTYPES.get(t["precision"]) if t["precision"] in ("bf16", "fp16") else None
    reduce = t.get("fsdp_reduce_dtype", "default")
    mp = MixedPrecisionPolicy(param_dtype=param, reduce_dtype=DTYPES.get(reduce))
    kw = {"mesh": m, "mp_policy": mp, "reshard_after_forward": reshard_arg(t.get("fsdp_reshard_after_forward"))}
    if t.get("fsdp_auto_wrap_policy", "transformer_based_wrap") == "transformer_based_wrap":
        blocks = tuple(dist.block_classes(model))
        for mod in list(model.modules()):
            if isinstance(mod, blocks):
                fully_shard(mod, **kw)
    fully_shard(model, **kw)
    return model
