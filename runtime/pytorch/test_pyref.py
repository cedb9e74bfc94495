"""Tests of the PyTorch reference tracer (python -m unittest test_pyref, from
runtime/pytorch, in either stack of make pyref-deps)."""
from __future__ import annotations

import json
import os
import unittest

import torch

import cudasubst
import dist
import fsdp2
import hfmodels
import pyref

HERE = os.path.dirname(os.path.abspath(__file__))


def tiny() -> dict:
    # gpt-tiny (models/nn/gpt-tiny.ini) with dropout 0.1, seq 32, AdamW, fp32
    with open(os.path.join(HERE, "testdata", "gpt-tiny.json")) as f:
        spec = json.load(f)
    spec["steps"] = 2
    return spec


class TracerAgainstCpuAllocator(unittest.TestCase):
    """The tracer is trusted only where a real run agrees with it."""

    def test_peak_equals_cpu_allocator(self) -> None:
        spec = tiny()
        r = pyref.run(spec, 2, "cpu")
        cpu = pyref.cpu_allocator_peak(spec, 2)
        # the CPU allocator (torch.profiler memory events) also sees the 0-dim
        # wrapped-number tensors kernels make from Python scalars (8 B doubles,
        # 4 B casts), which never reach the dispatcher and stay on the host on
        # CUDA: that is the whole difference, a few of them at the peak
        self.assertGreaterEqual(cpu, r["peak_bytes"])
        self.assertLessEqual(cpu - r["peak_bytes"], 64)

    def test_end_of_forward_equals_independent_count(self) -> None:
        r = pyref.run(tiny(), 2, "cpu")
        # params + buffers + grads + optimizer states + inputs + unique
        # storages saved for backward + outputs, counted by storage
        self.assertEqual(r["end_of_forward_bytes"], r["independent_end_of_forward_bytes"])


class Substitutions(unittest.TestCase):
    def test_dropout_mask_is_bool(self) -> None:
        # aten/src/ATen/native/Dropout.cpp: CUDA's fused dropout saves a bool mask
        x = torch.empty(4, 8, device="meta", requires_grad=True)
        with cudasubst.CudaSubst(None, "eager"):
            y = torch.nn.functional.dropout(x, 0.1, True)
        self.assertEqual(type(y.grad_fn).__name__, "NativeDropoutBackward0")
        self.assertEqual(y.grad_fn._saved_result1.dtype, torch.bool)

    def test_autocast_caches_weight_casts_until_outermost_exit(self) -> None:
        # aten/src/ATen/autocast_mode.cpp: a leaf fp32 tensor that requires grad
        # is cast once per outermost autocast region
        amp = cudasubst.Amp(torch.bfloat16)
        w = torch.nn.Parameter(torch.empty(8, 8, device="meta"))
        x = torch.empty(2, 8, device="meta")
        with cudasubst.AutocastPatch(amp), cudasubst.CudaSubst(amp, "eager"):
            with torch.autocast("meta", dtype=torch.bfloat16):
                y1 = torch.nn.functional.linear(x, w)
                with torch.autocast("meta", dtype=torch.bfloat16):
                    torch.nn.functional.linear(x, w)
                self.assertEqual(len(amp.cache), 1)  # the inner exit keeps it
            self.assertEqual(len(amp.cache), 0)
        self.assertEqual(y1.dtype, torch.bfloat16)

    @unittest.skipUnless(hasattr(torch.nn.functional, "scaled_dot_product_attention"),
                         "torch 1.13 has no scaled_dot_product_attention")
    def test_sdpa_takes_flash_for_16_bit(self) -> None:
        q = torch.empty(1, 2, 16, 64, device="meta", dtype=torch.bfloat16, requires_grad=True)
        with cudasubst.CudaSubst(None, "sdpa"):
            o = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        self.assertEqual(type(o.grad_fn).__name__, "ScaledDotProductFlashAttentionBackward0")


class Models(unittest.TestCase):
    def test_unsupported_architecture_is_an_error(self) -> None:
        m = dict(tiny()["model"], positions="rotary", norm="layernorm")
        with self.assertRaises(hfmodels.Unsupported):
            hfmodels.kind(m)

    def test_gpt_tiny_parameter_count(self) -> None:
        model, k = hfmodels.build(tiny()["model"], 0.0, "eager", "meta")
        # models/nn/gpt-tiny.ini: param_count = 120576 (tied head)
        self.assertEqual(k, "gpt2")
        self.assertEqual(sum(p.numel() for p in model.parameters()), 120576)

    def test_fsdp2_needs_fully_shard(self) -> None:
        # FSDP2 (torch.distributed.fsdp.fully_shard) came with torch 2.4: the
        # older stack refuses it (pyref exits 2), the current one runs it
        spec = dict(tiny(), world=4)
        spec["training"] = dict(spec["training"], strategy="fsdp", fsdp_version=2)
        if not fsdp2.available():
            with self.assertRaisesRegex(fsdp2.Unsupported, "torch >= 2.4"):
                pyref.check(spec)
            return
        pyref.check(spec)


class Fsdp1(unittest.TestCase):
    @unittest.skipUnless(dist.TORCH2, "the tracer runs FSDP1 on torch >= 2 only")
    def test_reduce_dtype_is_the_scenarios(self) -> None:
        # MixedPrecision(reduce_dtype): fsdp_reduce_dtype, or by default the
        # compute dtype, as the simulator's plan.c fsdp_reduction reads the
        # same key; this checks the setting reaches FSDP (an fp32 reduce then
        # casts each unit's bf16 gradient before its reduce-scatter, which the
        # grid's fsdp8-full-gpt2-bf16-r32 traces)
        for key, want in (("default", torch.bfloat16), ("fp32", torch.float32), ("fp16", torch.float16)):
            t = dict(tiny()["training"], strategy="fsdp", precision="bf16", fsdp_reduce_dtype=key,
                     fsdp_sharding_strategy="full_shard", fsdp_auto_wrap_policy="transformer_based_wrap",
                     fsdp_min_num_params=0, fsdp_backward_prefetch="backward_pre", fsdp_forward_prefetch=0,
                     fsdp_limit_all_gathers=1)
            model, _ = hfmodels.build(tiny()["model"], 0.0, "eager", "meta")
            dist.init_process_group(4)
            try:
                runner = dist.fsdp(model, t, torch.bfloat16, 4)
                self.assertEqual(runner.mixed_precision.param_dtype, torch.bfloat16, key)
                self.assertEqual(runner.mixed_precision.reduce_dtype, want, key)
            finally:
                dist.destroy()


    @unittest.skipUnless(dist.TORCH2, "the tracer runs FSDP1 on torch >= 2 only")
    def test_no_sync_keeps_unsharded_gradients(self) -> None:
        # the scenario's resolved no_sync (runtime/pyref.c, plan.h): under
        # FSDP1's no_sync() the first micro-step's post-backward hook returns
        # before reducing, so each unit's flat gradient stays unsharded in
        # bf16 (2 B per parameter), where reducing every micro-step leaves
        # only the fp32 shards (4 B per parameter / 4 ranks): at the end of
        # the second micro-step's forward the two differ by 1 B per parameter
        # (gpt-tiny's 120,576, each unit padded to a multiple of 4 elements)
        eof = {}
        for no_sync in (True, False):
            spec = dict(tiny(), world=4, dp=4, gpus_per_node=4, steps=1)
            spec["training"] = dict(spec["training"], strategy="fsdp", precision="bf16", grad_accum=2,
                                    no_sync=no_sync, fsdp_sharding_strategy="full_shard",
                                    fsdp_auto_wrap_policy="transformer_based_wrap", fsdp_min_num_params=0,
                                    fsdp_backward_prefetch="backward_pre", fsdp_forward_prefetch=0,
                                    fsdp_limit_all_gathers=1)
            eof[no_sync] = pyref.run(spec, 1, "meta")["end_of_forward_bytes"]
        self.assertGreaterEqual(eof[True] - eof[False], 120576)
        self.assertLessEqual(eof[True] - eof[False], 120576 + 4 * 3)


class Fsdp2(unittest.TestCase):
    @unittest.skipUnless(fsdp2.available(), "torch < 2.4 has no fully_shard")
    def test_rank0_holds_padded_dim0_chunks(self) -> None:
        # _fsdp_param.py: each parameter is torch.chunk'ed on dim 0 into
        # world pieces, rank 0 holding the first, ceil(rows / world) rows
        # (gpt-tiny: wte 256 x 64 -> 64 rows on 4 ranks, c_attn's 64 x 192 Conv1D
        # weight -> 16 rows, its 192 bias -> 48)
        spec = dict(tiny(), world=4, gpus_per_node=4)
        spec["training"] = dict(spec["training"], strategy="fsdp", fsdp_version=2, precision="bf16")
        model, _ = hfmodels.build(spec["model"], 0.0, "eager", "meta")
        full = {n: tuple(p.shape) for n, p in model.named_parameters()}
        dist.init_process_group(4)
        try:
            fsdp2.wrap(model, spec)
            for n, p in model.named_parameters():
                rows = full[n][0]
                local = p.to_local()
                self.assertEqual(tuple(local.shape), (-(-rows // 4),) + full[n][1:], n)
                self.assertEqual(local.dtype, torch.float32, n)  # bf16 only when gathered
        finally:
            dist.destroy()

    @unittest.skipUnless(fsdp2.available(), "torch < 2.4 has no fully_shard")
    def test_gradient_sync_off_keeps_unsharded_fp32_gradients(self) -> None:
        # FSDP2's no_sync (set_requires_gradient_sync(False) before every
        # micro-step but the last): post_backward reshards and returns, each
        # parameter keeping its unsharded gradient in its unsharded_grad_dtype
        # (the parameter's fp32: reduce_dtype is not set), 4 B per parameter,
        # where reducing every micro-step leaves only the fp32 shards (4 B / 4
        # ranks): at the end of the second micro-step's forward the two differ
        # by 3 B per parameter of gpt-tiny (120,576; rows divide by 4, no padding)
        eof = {}
        for no_sync in (True, False):
            spec = dict(tiny(), world=4, dp=4, gpus_per_node=4, steps=1)
            spec["training"] = dict(spec["training"], strategy="fsdp", fsdp_version=2, precision="bf16",
                                    grad_accum=2, no_sync=no_sync)
            eof[no_sync] = pyref.run(spec, 1, "meta")["end_of_forward_bytes"]
        self.assertEqual(eof[True] - eof[False], 3 * 120576)


if __name__ == "__main__":
    unittest.main()
