"""cudasubst — what a CUDA run does where a meta (or CPU) run would differ.

The tracer runs the model on the meta device. Where the kernel a GPU user hits
allocates differently from what the meta/CPU path would do, the CUDA behaviour
is substituted here, each with its source (SUBSTITUTIONS, printed in the
tracer's output):

- dropout: on CUDA at::dropout takes the fused kernel (native_dropout), whose
  mask is a bool tensor saved for backward; the CPU/meta path multiplies by a
  mask of the input's dtype (aten/src/ATen/native/Dropout.cpp,
  is_fused_kernel_acceptable);
- scaled_dot_product_attention: CUDA picks flash attention for fp16/bf16
  inputs without a mask and head_dim <= 256, else the memory-efficient kernel
  (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, priority order flash,
  efficient, math); on meta the math path would materialise the scores;
- AdamW/Adam/SGD: on CUDA the default is the foreach implementation
  (torch/optim/optimizer.py, _default_to_fused_or_foreach), which meta would
  not pick;
- autocast: CUDA autocast is not available for meta tensors, so its rules are
  applied by a TorchFunctionMode: the lower-precision ops (matmul family,
  linear, addmm, baddbmm, sdpa) cast their floating inputs to the autocast
  dtype, the fp32 ops (softmax, log_softmax, layer_norm, losses, exp, log, pow,
  rsqrt, sum without dtype...) cast to fp32, cat/stack promote; a cast of a
  leaf fp32 tensor that requires grad (a weight) is cached until the outermost
  autocast region exits (aten/src/ATen/autocast_mode.cpp, cached_casts and
  clear_cache; torch/amp/autocast_mode.py __exit__), including the regions
  activation checkpointing re-enters for its recompute
  (torch/utils/checkpoint.py, _get_autocast_kwargs);
- GradScaler (fp16): the scale, growth tracker and found_inf are one fp32
  element each; unscale_ and the inf check work in place
  (torch/amp/grad_scaler.py, _amp_foreach_non_finite_check_and_unscale_).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

SUBSTITUTIONS: List[Dict[str, str]] = [
    {"what": "dropout uses the fused kernel: bool mask saved for backward",
     "source": "aten/src/ATen/native/Dropout.cpp (is_fused_kernel_acceptable -> native_dropout)"},
    {"what": "scaled_dot_product_attention: flash (16-bit, no mask) or memory-efficient kernel",
     "source": "aten/src/ATen/native/transformers/cuda/sdp_utils.cpp (select_sdp_backend)"},
    {"what": "optimizers use the foreach implementation",
     "source": "torch/optim/optimizer.py (_default_to_fused_or_foreach)"},
    {"what": "CUDA autocast op lists and the weight-cast cache, emulated on meta",
     "source": "aten/src/ATen/autocast_mode.cpp (cached_casts, clear_cache); torch/amp/autocast_mode.py"},
    {"what": "GradScaler state: three one-element fp32 tensors, unscale in place",
     "source": "torch/amp/grad_scaler.py"},
]


def _names(*objs: Any) -> Set[Any]:
    return {o for o in objs if o is not None}


T = torch.Tensor
LOWER = _names(F.linear, torch.matmul, T.matmul, T.__matmul__, getattr(T, "__rmatmul__", None),
               torch.mm, T.mm, torch.bmm, T.bmm, torch.baddbmm, T.baddbmm, torch.addmm, T.addmm,
               torch.addbmm, torch.einsum, getattr(F, "scaled_dot_product_attention", None),
               F.conv1d, F.conv2d)
FP32 = _names(F.layer_norm, torch.layer_norm, getattr(F, "group_norm", None), F.cross_entropy,
              F.nll_loss, F.mse_loss, F.l1_loss, F.kl_div, F.binary_cross_entropy_with_logits,
              torch.exp, T.exp, torch.log, T.log, torch.pow, T.pow, torch.rsqrt, T.rsqrt,
              torch.reciprocal, T.reciprocal, F.softplus, torch.logsumexp, T.logsumexp,
              torch.log1p, T.log1p, torch.expm1, torch.erfinv, torch.cosh, torch.sinh,
              torch.tan, torch.acos, torch.asin, F.cosine_similarity, torch.cdist, torch.dist)
FP32_OPT_DTYPE = _names(F.softmax, F.log_softmax, torch.softmax, T.softmax, torch.log_softmax,
                        T.log_softmax, torch.sum, T.sum, torch.prod, T.prod, torch.cumsum,
                        T.cumsum, torch.cumprod, getattr(torch.linalg, "vector_norm", None))
PROMOTE = _names(torch.cat, torch.stack, torch.addcmul, torch.addcdiv, torch.atan2,
                 torch.dot, torch.tensordot, torch.cross)


class Amp:
    """The state of emulated CUDA autocast: nesting, enabled flags, cast cache."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.stack: List[bool] = []
        self.cache: Dict[int, torch.Tensor] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.stack) and self.stack[-1]

    def enter(self, enabled: bool) -> None:
        self.stack.append(enabled)

    def exit(self) -> None:
        self.stack.pop()
        if not self.stack:  # the outermost region: autocast clears its cache
            self.cache.clear()

    def cast(self, x: Any, dtype: torch.dtype) -> Any:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dtype == dtype:
            return x
        cacheable = (dtype == self.dtype and x.dtype == torch.float32 and x.requires_grad
                     and x.is_leaf and x._base is None)
        if cacheable:
            hit = self.cache.get(id(x))
            if hit is not None:
                return hit
        y = x.to(dtype)
        if cacheable:
            self.cache[id(x)] = y
        return y


def _map(args: Any, f: Any) -> Any:
    if isinstance(args, (list, tuple)):
        return type(args)(_map(a, f) for a in args)
    return f(args)


class CudaSubst(TorchFunctionMode):
    """Dropout, SDPA and autocast as CUDA does them (see the module's header)."""

    def __init__(self, amp: Optional[Amp], attention: str) -> None:
        super().__init__()
        self.amp = amp
        self.attention = attention

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        amp = self.amp
        if amp is not None and amp.enabled:
            if func in LOWER:
                args, kwargs = _map(args, lambda x: amp.cast(x, amp.dtype)), \
                    {k: amp.cast(v, amp.dtype) for k, v in kwargs.items()}
            elif func in FP32 or (func in FP32_OPT_DTYPE and kwargs.get("dtype") is None):
                args = _map(args, lambda x: amp.cast(x, torch.float32)
                            if isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16) else x)
            elif func in PROMOTE:
                ts = [x for x in _leaves(args) if isinstance(x, torch.Tensor) and x.is_floating_point()]
                if ts:
                    wide = torch.float32 if any(t.dtype == torch.float32 for t in ts) else ts[0].dtype
                    args = _map(args, lambda x: amp.cast(x, wide))
        if func is F.dropout:
            return self._dropout(*args, **kwargs)
        if func is getattr(F, "scaled_dot_product_attention", None):
            return self._sdpa(*args, **kwargs)
        return func(*args, **kwargs)

    @staticmethod
    def _dropout(x: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
        if not training or p == 0 or x.numel() == 0:
            return x
        if p >= 1:
            return x * 0
        return torch.ops.aten.native_dropout(x, p, True)[0]

    @staticmethod
    def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None,
              dropout_p: float = 0.0, is_causal: bool = False, scale: Any = None,
              enable_gqa: bool = False, **_: Any) -> torch.Tensor:
        if enable_gqa and k.shape[-3] != q.shape[-3]:
            rep = q.shape[-3] // k.shape[-3]
            k = k.repeat_interleave(rep, dim=-3)
            v = v.repeat_interleave(rep, dim=-3)
        flash = q.dtype in (torch.float16, torch.bfloat16) and attn_mask is None and q.shape[-1] <= 256
        if flash:
            return torch.ops.aten._scaled_dot_product_flash_attention(
                q, k, v, dropout_p, is_causal, False, scale=scale)[0]
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            q, k, v, attn_mask, True, dropout_p, is_causal, scale=scale)[0]


def _leaves(x: Any) -> List[Any]:
    if isinstance(x, (list, tuple)):
        return [y for a in x for y in _leaves(a)]
    return [x]


class AutocastPatch:
    """Makes torch.autocast('meta', ...) drive the emulated Amp, so that model
    code and checkpointing's recompute enter and leave it as on CUDA."""

    def __init__(self, amp: Optional[Amp], mode: Optional[TorchFunctionMode] = None) -> None:
        self.amp = amp
        self.mode = mode  # re-entered where the autograd engine runs without it
        self.saved: Dict[str, Any] = {}

    def __enter__(self) -> "AutocastPatch":
        ac = torch.amp.autocast_mode.autocast
        amp, mode = self.amp, self.mode
        s = self.saved
        s.update(init=ac.__init__, enter=ac.__enter__, exit=ac.__exit__,
                 enabled=torch.is_autocast_enabled, avail=getattr(torch.amp, "is_autocast_available", None),
                 getdtype=getattr(torch, "get_autocast_dtype", None),
                 gpudtype=getattr(torch, "get_autocast_gpu_dtype", None))

        def init(self_: Any, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: Any = None) -> None:
            # "cuda" too: while the trace runs there is no CUDA device, and
            # torch 1.13's checkpoint re-enters torch.cuda.amp.autocast for its
            # recompute (torch/utils/checkpoint.py, _get_autocast_kwargs)
            if device_type not in ("meta", "cuda"):
                s["init"](self_, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
                return
            self_.device = "meta"
            self_._enabled = bool(enabled) and amp is not None
            self_.fast_dtype = dtype

        def enter(self_: Any) -> Any:
            if getattr(self_, "device", None) != "meta":
                return s["enter"](self_)
            if amp is not None:
                amp.enter(self_._enabled)
            # checkpointing's recompute runs in backward, where the function
            # mode stack is empty: the substitutions apply there too
            self_._pushed = mode is not None and torch._C._len_torch_function_stack() == 0
            if self_._pushed:
                mode.__enter__()
            return self_

        def exit_(self_: Any, *a: Any) -> Any:
            if getattr(self_, "device", None) != "meta":
                return s["exit"](self_, *a)
            if getattr(self_, "_pushed", False):
                mode.__exit__(None, None, None)
            if amp is not None:
                amp.exit()
            return False

        def is_enabled(device_type: Any = None) -> bool:
            # no argument: CUDA's autocast, which the emulation stands for
            if device_type in (None, "meta", "cuda"):
                return amp is not None and amp.enabled
            return s["enabled"](device_type)

        def avail(device_type: str) -> bool:
            return device_type == "meta" or s["avail"](device_type)

        def getdtype(device_type: str = "cuda") -> Any:
            if device_type in ("meta", "cuda"):
                return amp.dtype if amp is not None else torch.float32
            return s["getdtype"](device_type)

        ac.__init__, ac.__enter__, ac.__exit__ = init, enter, exit_  # type: ignore[method-assign]
        torch.is_autocast_enabled = is_enabled  # type: ignore[assignment]
        if s["avail"] is not None:
            torch.amp.is_autocast_available = avail  # type: ignore[assignment]
        if s["getdtype"] is not None:
            torch.get_autocast_dtype = getdtype  # type: ignore[assignment]
        if s["gpudtype"] is not None:
            torch.get_autocast_gpu_dtype = getdtype  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: Any) -> None:
        ac = torch.amp.autocast_mode.autocast
        s = self.saved
        ac.__init__, ac.__enter__, ac.__exit__ = s["init"], s["enter"], s["exit"]  # type: ignore[method-assign]
        torch.is_autocast_enabled = s["enabled"]
        if s["avail"] is not None:
            torch.amp.is_autocast_available = s["avail"]
        if s["getdtype"] is not None:
            torch.get_autocast_dtype = s["getdtype"]
        if s["gpudtype"] is not None:
            torch.get_autocast_gpu_dtype = s["gpudtype"]
