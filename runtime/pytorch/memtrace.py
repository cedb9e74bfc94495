"""memtrace — the ordered allocation trace of a PyTorch program, from its storages.

Every tensor an ATen op returns is looked at (a TorchDispatchMode sits below
autograd, so forward, backward and optimizer ops all pass through it); a storage
seen for the first time is an allocation of its nbytes, and its death is the
matching free. How a death is seen depends on the stack:

- torch >= 2.1 keeps one Python object per StorageImpl (PyObject preservation
  of UntypedStorage, pytorch/pytorch#97470), so a weakref.finalize on
  tensor.untyped_storage() fires exactly when the StorageImpl is destroyed;
- torch 1.13 has no such object: a storage is keyed by its StorageImpl address
  (TypedStorage._cdata) and is live while any tensor seen with it is alive
  (weakref.finalize on the tensors, which are preserved PyObjects). Tensors
  autograd saves are routed through saved_tensors_hooks so that the saved
  object is a tensor seen here (otherwise SavedVariable keeps a hidden
  shallow copy, torch/csrc/autograd/saved_variable.cpp).

Nothing is allocated for real on the meta device: the trace is what a CUDA run
would request from the caching allocator, before its rounding.
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Callable, Dict, List, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

try:  # torch >= 2.0
    from torch.utils._pytree import tree_leaves as _leaves
except ImportError:  # torch 1.13
    from torch.utils._pytree import tree_flatten

    def _leaves(x: Any) -> List[Any]:
        return tree_flatten(x)[0]


HAS_UNTYPED = hasattr(torch.Tensor, "untyped_storage")


@dataclasses.dataclass
class Event:
    """One allocation (+1) or free (-1) of nbytes, where it happened."""

    sign: int
    sid: int
    nbytes: int
    op: str
    module: str
    phase: str
    step: int
    cat: str


class Trace:
    """The ordered events, live and peak bytes, and the live bytes per
    category at the peak."""

    def __init__(self) -> None:
        self.events: List[Event] = []
        self.live = 0
        self.peak = 0
        self.peak_event = -1
        self.live_cat: Dict[str, int] = {}
        self.peak_cat: Dict[str, int] = {}
        self.phase = "setup"
        self.step = 0
        self.op = ""
        self.module = ""

    def alloc(self, nbytes: int, cat: str) -> int:
        """Records an allocation; returns its storage id (for its free)."""
        self.nsid = getattr(self, "nsid", 0) + 1
        self.live += nbytes
        self.live_cat[cat] = self.live_cat.get(cat, 0) + nbytes
        self.events.append(Event(1, self.nsid, nbytes, self.op, self.module, self.phase, self.step, cat))
        if self.live > self.peak:
            self.peak = self.live
            self.peak_event = len(self.events) - 1
            self.peak_cat = dict(self.live_cat)
        return self.nsid

    def free(self, sid: int, nbytes: int, cat: str) -> None:
        self.live -= nbytes
        self.live_cat[cat] -= nbytes
        self.events.append(Event(-1, sid, nbytes, self.op, self.module, self.phase, self.step, cat))

    def recategorize(self, nbytes: int, old: str, new: str) -> None:
        self.live_cat[old] -= nbytes
        self.live_cat[new] = self.live_cat.get(new, 0) + nbytes


def _local(t: torch.Tensor) -> torch.Tensor:
    """What holds a tensor's memory: a DTensor's local tensor (FSDP2's
    sharded parameters, gradients and optimizer states; the DTensor itself
    is a wrapper of the global shape), else the tensor."""
    return getattr(t, "_local_tensor", t)


class _Storages:
    """Live storages by key, with the category each was allocated as."""

    def __init__(self, trace: Trace, device: Optional[str]) -> None:
        self.trace = trace
        self.device = device  # only its tensors are traced (None: all)
        self.live: Dict[int, List[Any]] = {}  # key -> [nbytes, cat, refs, id]

    def key(self, t: torch.Tensor) -> int:
        t = _local(t)
        if HAS_UNTYPED:
            return t.untyped_storage()._cdata
        return t.storage()._cdata

    def see(self, t: torch.Tensor, cat: str) -> None:
        t = _local(t)
        if self.device is not None and t.device.type != self.device:
            return  # host tensors of a meta run (Adam's step counts)
        k = self.key(t)
        rec = self.live.get(k)
        if rec is None:
            nbytes = t.untyped_storage().nbytes() if HAS_UNTYPED else t.storage().nbytes()
            if nbytes == 0:
                return
            rec = [nbytes, cat, 0, 0]
            self.live[k] = rec
            rec[3] = self.trace.alloc(nbytes, cat)
            if HAS_UNTYPED:
                weakref.finalize(t.untyped_storage(), self._dead, k)
                return
        if not HAS_UNTYPED:
            rec[2] += 1
            weakref.finalize(t, self._tensor_dead, k)

    def _tensor_dead(self, k: int) -> None:
        rec = self.live.get(k)
        if rec is not None:
            rec[2] -= 1
            if rec[2] == 0:
                self._dead(k)

    def _dead(self, k: int) -> None:
        rec = self.live.pop(k, None)
        if rec is not None and rec[0] > 0:
            self.trace.free(rec[3], rec[0], rec[1])

    def resized(self, st: Any, nbytes: int) -> None:
        """Storage st now holds nbytes (UntypedStorage.resize_, which FSDP
        uses to free and re-allocate a flat parameter's storage in place):
        the old size is freed, the new one allocated."""
        if self.device is not None and st.device.type != self.device:
            return
        k = st._cdata
        rec = self.live.get(k)
        if rec is None:
            if nbytes == 0:
                return
            rec = [0, self.trace.phase, 0, 0]
            self.live[k] = rec
            weakref.finalize(st, self._dead, k)
        if rec[0] > 0:
            self.trace.free(rec[3], rec[0], rec[1])
        rec[0], rec[1] = nbytes, self.trace.phase
        if nbytes > 0:
            rec[3] = self.trace.alloc(nbytes, rec[1])

    def retag(self, t: torch.Tensor, cat: str) -> None:
        rec = self.live.get(self.key(t))
        if rec is not None and rec[1] != cat:
            self.trace.recategorize(rec[0], rec[1], cat)
            rec[1] = cat


def _returns_tensor(func: Any) -> bool:
    """Whether ATen op func's schema returns one Tensor."""
    rets = getattr(getattr(func, "_schema", None), "returns", [])
    return len(rets) == 1 and str(rets[0].type) == "Tensor"


class Tracker(TorchDispatchMode):
    """Records every storage the ops under it produce (category = the current
    phase unless set otherwise)."""

    def __init__(self, trace: Trace, device: Optional[str] = None) -> None:
        super().__init__()
        self.trace = trace
        self.storages = _Storages(trace, device)
        self.meta_scalars = 0  # .item() calls answered on meta
        self.shadow: Dict[int, torch.Tensor] = {}  # host data copied into meta storages
        self._hooks: Optional[Any] = None

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default and args[0].device.type == "meta":
            # .item() of a meta tensor has no value: the data-dependent checks
            # of model code (e.g. "no packed sequences") see what real
            # unpacked token batches give: True / 0
            self.meta_scalars += 1
            return True if args[0].dtype == torch.bool else 0
        if func is torch.ops.aten.copy_.default and args[0].device.type != args[1].device.type:
            return self._copy_across(args[0], args[1])
        out = func(*args, **(kwargs or {}))
        if isinstance(out, (bool, int, float)) and _returns_tensor(func):
            # torch 1.13 hands a 0-dim "wrapped number" tensor (a Python
            # scalar an op was called with, e.g. gelu_new's sqrt(2/pi), saved
            # by mul) back to Python as a number (autograd/utils/wrap_outputs.h),
            # which the dispatcher then refuses ("detach returned invalid type
            # float"): the op's result is that scalar as a 0-dim tensor again.
            # It stays on the host on CUDA: not traced.
            ref = args[0]
            return torch.tensor(out, dtype=ref.dtype, device=ref.device)
        self.trace.op = str(func.__name__) if hasattr(func, "__name__") else str(func)
        for x in _leaves(out):
            if isinstance(x, torch.Tensor):
                self.storages.see(x, self.trace.phase)
        return out

    def _copy_across(self, dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        """copy_ between a host tensor and a meta one. The meta tensor keeps
        no data, so the host data copied in is kept aside and given back
        when it is copied out (DDP sends its bucket order from the host
        through a device tensor, reducer.cpp sync_bucket_indices); a meta
        tensor never written from the host cannot be read."""
        if dst.device.type == "meta":
            out = torch.ops.aten.copy_.default(dst, src.to("meta"))
            self.shadow[self.storages.key(dst)] = src.detach().clone()
            return out
        data = self.shadow.get(self.storages.key(src))
        if data is None or data.shape != src.shape:
            raise NotImplementedError("the data of a meta tensor was asked for (copy to the host)")
        return dst.copy_(data)

    def register(self, t: torch.Tensor, cat: str) -> None:
        """A tensor made outside the mode (parameters, inputs)."""
        self.storages.see(t, cat)

    def retag(self, t: torch.Tensor, cat: str) -> None:
        self.storages.retag(t, cat)

    def __enter__(self) -> "Tracker":
        if HAS_UNTYPED:  # storage resizes do not reach the dispatcher
            resize, storages = torch.UntypedStorage.resize_, self.storages

            def resize_(st: Any, nbytes: int) -> Any:
                r = resize(st, nbytes)
                storages.resized(st, st.nbytes())
                return r

            self._resize = resize
            torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign]
        if not HAS_UNTYPED:  # 1.13: saved tensors become tensors seen here
            see = self.storages.see
            phase: Callable[[], str] = lambda: self.trace.phase

            def pack(t: torch.Tensor) -> torch.Tensor:
                # a 0-dim double/long is a wrapped Python number (host
                # memory on CUDA), which 2.x never shows the mode either
                if not (t.dim() == 0 and t.dtype in (torch.float64, torch.int64)):
                    see(t, phase())
                return t

            self._hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
            self._hooks.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        r = super().__exit__(*exc)
        if getattr(self, "_resize", None) is not None:
            torch.UntypedStorage.resize_ = self._resize  # type: ignore[method-assign]
            self._resize = None
        if self._hooks is not None:
            self._hooks.__exit__(*exc)
            self._hooks = None
        return r
