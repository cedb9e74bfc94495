/*
 * test_plan.c — the plan (sim/models/plan.h): one row per (strategy, sharding,
 * framework, precision, offload), each citing the framework source whose
 * behaviour it pins. The cluster is 2 nodes x 8 GPUs (dp 16), AdamW.
 *
 * Widths are bytes per element: params (kept across steps), grads (as
 * backward writes them), master (fp32 copy beside 16-bit params), gathered (a
 * gathered unit), unsharded (a unit's gradient before its reduce-scatter),
 * grad shard (what the step reads). ckpt is the checkpoint's bytes per
 * parameter without gradients: weights as the optimizer keeps them plus 8 B
 * of Adam moments (REFERENCE.md "Checkpoint size": 12-14 B/param).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plan.h"
#include "profile.h"
#include "scenario.h"

enum { PT = FW_PYTORCH, DS = FW_DEEPSPEED, SC = FW_SHARDCAST };
enum { FP32 = PREC_FP32, BF16 = PREC_BF16, FP16 = PREC_FP16 };
enum { NONE = OFFLOAD_NONE, OPT = OFFLOAD_OPTIMIZER, ALL = OFFLOAD_OPTIMIZER_AND_PARAMS };

struct row {
	const char *spec;
	int fw, prec, off;
	/* expected */
	int engine, mech, shard_n, reduce, reshard;
	int params, grads, master, gathered, unsharded, grad_shard;
	double ckpt;
	const char *src;
};

static const struct row rows[] = {
	/* torch.optim.AdamW: fp32 params, .grad, exp_avg, exp_avg_sq */
	{"single", PT, FP32, NONE, PT, MECH_REPL, 1, REDUCE_NONE, 0, 4, 4, 0, 0, 0, 0, 12,
	 "torch/optim/adamw.py"},
	/* autocast: fp32 weights and .grad, a bf16 copy per op */
	{"single", PT, BF16, NONE, PT, MECH_REPL, 1, REDUCE_NONE, 0, 4, 4, 0, 0, 0, 0, 12,
	 "torch/amp/autocast_mode.py"},
	/* DeepSpeed stage 0: fp16 module, fp32 master in FP16_Optimizer */
	{"single", DS, FP16, NONE, DS, MECH_ZERO12, 1, REDUCE_NONE, 0, 2, 2, 4, 0, 0, 0, 14,
	 "deepspeed/runtime/fp16/fused_optimizer.py"},
	/* replicate() broadcasts the fp32 module; reduce_add of the replicas' grads */
	{"dp", PT, BF16, NONE, PT, MECH_DP, 1, REDUCE_DP, 0, 4, 4, 0, 0, 0, 0, 12,
	 "torch/nn/parallel/data_parallel.py, replicate.py"},
	{"dp", SC, BF16, NONE, SC, MECH_DP, 1, REDUCE_DP, 0, 2, 2, 4, 0, 0, 0, 14,
	 "sim/models/memory.h S2 (shardcast: 16-bit + fp32 master)"},
	/* DDP's reducer all-reduces the fp32 .grad buckets */
	{"ddp", PT, FP32, NONE, PT, MECH_REPL, 1, REDUCE_DDP, 0, 4, 4, 0, 0, 0, 0, 12,
	 "torch/nn/parallel/distributed.py, reducer.cpp"},
	{"ddp", PT, BF16, NONE, PT, MECH_REPL, 1, REDUCE_DDP, 0, 4, 4, 0, 0, 0, 0, 12,
	 "torch/csrc/distributed/c10d/reducer.cpp (buckets in the grads' dtype)"},
	/* DeepSpeed's engine for ddp: bf16 module, fp32 master (BF16_Optimizer) */
	{"ddp", DS, BF16, NONE, DS, MECH_ZERO12, 1, REDUCE_DDP, 0, 2, 2, 4, 0, 0, 0, 14,
	 "deepspeed/runtime/bf16_optimizer.py"},
	{"ddp", SC, FP32, NONE, SC, MECH_REPL, 1, REDUCE_DDP, 0, 4, 4, 0, 0, 0, 0, 12,
	 "sim/models/memory.h S2, S6 (runtime/strategy.c ddp)"},
	/* ZeRO-1: fp32 master and Adam partitions of 1/dp; reduce after the last micro-step */
	{"zero1", DS, BF16, NONE, DS, MECH_ZERO12, 16, REDUCE_AFTER_ACCUM, 0, 2, 2, 4, 0, 0, 0, 14,
	 "deepspeed/runtime/zero/stage_1_and_2.py (single_partition_of_fp32_groups)"},
	/* framework = pytorch: zero1-3 are DeepSpeed's optimizer, its engine and checkpoint */
	{"zero1", PT, BF16, NONE, DS, MECH_ZERO12, 16, REDUCE_AFTER_ACCUM, 0, 2, 2, 4, 0, 0, 0, 14,
	 "deepspeed/runtime/zero/stage_1_and_2.py"},
	{"zero1", SC, FP32, NONE, SC, MECH_ZERO12, 16, REDUCE_AFTER_ACCUM, 0, 4, 4, 0, 0, 0, 0, 12,
	 "sim/models/memory.h S6 zero1"},
	/* ZeRO-2: reduce_bucket_size buckets reduce-scattered during backward; fp16 loss scaler */
	{"zero2", DS, FP16, NONE, DS, MECH_ZERO12, 16, REDUCE_BUCKETS, 0, 2, 2, 4, 0, 0, 0, 14,
	 "deepspeed/runtime/zero/stage_1_and_2.py (reduce_ipg_grads), fp16/loss_scaler.py"},
	{"zero2", DS, BF16, OPT, DS, MECH_ZERO12, 16, REDUCE_BUCKETS, 0, 2, 2, 4, 0, 0, 0, 14,
	 "deepspeed/runtime/zero/stage_1_and_2.py (cpu_offload: fp32 partitions on the host)"},
	{"zero2", PT, BF16, NONE, DS, MECH_ZERO12, 16, REDUCE_BUCKETS, 0, 2, 2, 4, 0, 0, 0, 14,
	 "deepspeed/runtime/zero/stage_1_and_2.py"},
	/* ZeRO-3: per-module fetch of 16-bit partitions, released after use */
	{"zero3", DS, BF16, NONE, DS, MECH_ZERO3, 16, REDUCE_BUCKETS, 1, 2, 2, 4, 2, 0, 0, 14,
	 "deepspeed/runtime/zero/stage3.py, partitioned_param_coordinator.py"},
	{"zero3", PT, BF16, NONE, DS, MECH_ZERO3, 16, REDUCE_BUCKETS, 1, 2, 2, 4, 2, 0, 0, 14,
	 "deepspeed/runtime/zero/stage3.py"},
	{"zero3", DS, BF16, ALL, DS, MECH_ZERO3, 16, REDUCE_BUCKETS, 1, 2, 2, 4, 2, 0, 0, 14,
	 "deepspeed/runtime/zero/stage3.py (offload_param: partitions on the host)"},
	/* the runtime's zero3 is its unit mechanism, gathered per block */
	{"zero3", SC, BF16, NONE, SC, MECH_UNITS, 16, REDUCE_UNITS, 1, 2, 2, 4, 2, 2, 2, 14,
	 "sim/models/memory.h S6 zero3 (runtime/strategy.c units)"},
	{"zero3", SC, FP32, NONE, SC, MECH_UNITS, 16, REDUCE_UNITS, 1, 4, 4, 0, 4, 4, 4, 12,
	 "sim/models/memory.h S2 (fp32: no master)"},
	/* FSDP: fp32 FlatParameter shards, gathered per unit, resharded after forward */
	{"fsdp:full_shard", PT, FP32, NONE, PT, MECH_UNITS, 16, REDUCE_UNITS, 1, 4, 4, 0, 4, 4, 4, 12,
	 "torch/distributed/fsdp/_runtime_utils.py, _flat_param.py"},
	/* MixedPrecision: bf16 gathers and reductions, fp32 sharded .grad */
	{"fsdp:full_shard", PT, BF16, NONE, PT, MECH_UNITS, 16, REDUCE_UNITS, 1, 4, 2, 0, 2, 2, 4, 12,
	 "torch/distributed/fsdp/_flat_param.py (_use_low_precision_shard, _cast_grad_to_param_dtype)"},
	/* CPUOffload: shards and their .grad on the host */
	{"fsdp:full_shard", PT, BF16, ALL, PT, MECH_UNITS, 16, REDUCE_UNITS, 1, 4, 2, 0, 2, 2, 0, 12,
	 "torch/distributed/fsdp/_runtime_utils.py (_offload_grad), api.py CPUOffload"},
	{"fsdp:shard_grad_op", PT, BF16, NONE, PT, MECH_UNITS, 16, REDUCE_UNITS, 0, 4, 2, 0, 2, 2, 4, 12,
	 "torch/distributed/fsdp/_init_utils.py (SHARD_GRAD_OP: no reshard after forward)"},
	/* NO_SHARD: whole units, gradients all-reduced; MixedPrecision still casts them */
	{"fsdp:no_shard", PT, BF16, NONE, PT, MECH_UNITS, 1, REDUCE_UNITS, 0, 4, 2, 0, 2, 2, 4, 12,
	 "torch/distributed/fsdp/_flat_param.py (NO_SHARD)"},
	{"fsdp:no_shard", PT, FP32, NONE, PT, MECH_UNITS, 1, REDUCE_UNITS, 0, 4, 4, 0, 0, 4, 4, 12,
	 "torch/distributed/fsdp/_flat_param.py (NO_SHARD, no cast)"},
	/* HYBRID_SHARD: shard in a node (8 ranks), all-reduce across the 2 nodes */
	{"fsdp:hybrid_shard", PT, BF16, NONE, PT, MECH_UNITS, 8, REDUCE_UNITS, 1, 4, 2, 0, 2, 2, 4, 12,
	 "torch/distributed/fsdp/_init_utils.py (_init_intra_and_inter_node_groups)"},
	{"fsdp:hybrid_shard_zero2", PT, BF16, NONE, PT, MECH_UNITS, 8, REDUCE_UNITS, 0, 4, 2, 0, 2, 2, 4, 12,
	 "torch/distributed/fsdp/_init_utils.py (_HYBRID_SHARD_ZERO2)"},
	{"fsdp:full_shard", SC, BF16, NONE, SC, MECH_UNITS, 16, REDUCE_UNITS, 1, 2, 2, 4, 2, 2, 2, 14,
	 "sim/models/memory.h S6 fsdp (runtime/strategy.c units)"},
	{"fsdp:hybrid_shard", SC, FP32, ALL, SC, MECH_UNITS, 8, REDUCE_UNITS, 1, 4, 4, 0, 4, 4, 4, 12,
	 "sim/models/memory.h S6 (hybrid: ranks of a node; offload stages the shard)"},
	/* FSDP2: fp32 DTensor shards per parameter; MixedPrecisionPolicy gathers
	 * in param_dtype, autograd's gradients stay in it (the upcast to the
	 * reduce dtype is deferred to the copy-in), fp32 sharded .grad */
	{"fsdp2", PT, BF16, NONE, PT, MECH_UNITS, 16, REDUCE_UNITS, 1, 4, 2, 0, 2, 2, 4, 12,
	 "torch/distributed/fsdp/_fully_shard/_fsdp_param.py (init_dtype_attrs), _fsdp_param_group.py "
	 "(_set_unsharded_grad_dtypes)"},
	{"fsdp2", PT, FP32, NONE, PT, MECH_UNITS, 16, REDUCE_UNITS, 1, 4, 4, 0, 4, 4, 4, 12,
	 "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py (no cast: the shard copied in)"},
	/* HSDP: a (replicate, shard) mesh, the shard dimension inside a node */
	{"fsdp2:hybrid_shard", PT, BF16, NONE, PT, MECH_UNITS, 8, REDUCE_UNITS, 1, 4, 2, 0, 2, 2, 4, 12,
	 "torch/distributed/fsdp/_fully_shard/_fully_shard.py (2-D mesh: HSDPMeshInfo)"},
	{"fsdp2", SC, BF16, NONE, SC, MECH_UNITS, 16, REDUCE_UNITS, 1, 2, 2, 4, 2, 2, 2, 14,
	 "sim/models/memory.h S6 fsdp2 (runtime/stratfsdp2.c)"},
};

static void settings(struct scn_settings *st, const char *spec, int fw, int prec, int off)
{
	struct err e = {0};
	int strategy, sharding, version;

	cr_assert_eq(cfg_defaults(scenario_keys(), st, &e), 0, "%s", e.msg);
	cr_assert_eq(plan_parse_strategy(spec, &strategy, &sharding, &version), 0, "%s", spec);
	st->cluster.nodes = 2;
	st->cluster.gpus_per_node = 8;
	st->training.strategy = strategy;
	st->training.fsdp_sharding = sharding;
	st->training.fsdp_version = version;
	st->training.framework = fw;
	st->training.precision = prec;
	st->training.offload = off;
	st->training.optimizer = OPT_ADAMW;
}

Test(plan, table)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		struct scn_settings st;
		struct plan p;
		char what[160];

		settings(&st, r->spec, r->fw, r->prec, r->off);
		plan_derive(&p, &st, 16, 8.0);
		snprintf(what, sizeof what, "row %zu: %s %s %s offload %d (%s)", i, r->spec,
			 scenario_enum_name("training", "framework", r->fw), scenario_precision_name(r->prec),
			 r->off, r->src);
		cr_expect_eq(p.engine, r->engine, "%s: engine %d", what, p.engine);
		cr_expect_eq(p.mech, r->mech, "%s: mech %d", what, p.mech);
		cr_expect_eq(p.shard_n, r->shard_n, "%s: shard_n %lld", what, (long long)p.shard_n);
		cr_expect_eq(p.shard_n * p.replicate_n, 16, "%s: shard x replicate = dp", what);
		cr_expect_eq(p.reduce, r->reduce, "%s: reduce %d", what, p.reduce);
		cr_expect_eq(p.reshard_fwd, r->reshard, "%s: reshard_fwd %d", what, p.reshard_fwd);
		cr_expect_eq(p.w.params, r->params, "%s: params %d", what, p.w.params);
		cr_expect_eq(p.w.grads, r->grads, "%s: grads %d", what, p.w.grads);
		cr_expect_eq(p.w.master, r->master, "%s: master %d", what, p.w.master);
		cr_expect_eq(p.w.gathered, r->gathered, "%s: gathered %d", what, p.w.gathered);
		cr_expect_eq(p.w.unsharded_grad, r->unsharded, "%s: unsharded grad %d", what, p.w.unsharded_grad);
		cr_expect_eq(p.w.grad_shard, r->grad_shard, "%s: grad shard %d", what, p.w.grad_shard);
		cr_expect_eq(p.ckpt_bytes_per_param, r->ckpt, "%s: checkpoint %.0f B/param", what, p.ckpt_bytes_per_param);
		/* torch.optim's foreach loop under PyTorch; fused kernels elsewhere */
		cr_expect_eq(p.fused_optimizer, r->engine != PT, "%s: fused", what);
		/* autocast is PyTorch's mixed precision of unsharded modules */
		cr_expect_eq(p.autocast, r->engine == PT && r->prec != FP32 && r->mech != MECH_UNITS, "%s: autocast", what);
		cr_expect_eq(p.loss_scale, r->prec == FP16, "%s: loss scale", what);
	}
}

/* FSDP2's facts (plan.h layout): fully_shard's reshard_after_forward
 * (_fully_shard.py: None is True for the blocks and False for the root;
 * _fsdp_init.py _get_post_forward_mesh_info: an int N keeps a shard over N
 * ranks, 1 is False, the shard group's size is True), reduce_dtype
 * (_fsdp_api.py: None reduces in the parameters' fp32 on PyTorch 2.15) on the
 * wire too, the optimizer over every DTensor parameter, implicit backward
 * prefetch and no rate limiter (_fsdp_param_group.py). */
Test(plan, fsdp2)
{
	static const struct { int64_t reshard; int fwd, root; int64_t group; } r[] = {
		{-1, 1, 0, 0}, {-2, 1, 1, 0}, {0, 0, 0, 0}, {1, 0, 0, 0}, {4, 1, 1, 4}, {16, 1, 1, 0},
	};
	struct scn_settings st;
	struct plan p;

	for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
		settings(&st, "fsdp2", PT, BF16, NONE);
		st.training.fsdp_reshard_after_forward = r[i].reshard;
		plan_derive(&p, &st, 16, 8.0);
		cr_expect_eq(p.reshard_fwd, r[i].fwd, "reshard %lld: blocks %d", (long long)r[i].reshard, p.reshard_fwd);
		cr_expect_eq(p.reshard_root, r[i].root, "reshard %lld: root %d", (long long)r[i].reshard, p.reshard_root);
		cr_expect_eq(p.reshard_group, r[i].group, "reshard %lld: group %lld", (long long)r[i].reshard,
			     (long long)p.reshard_group);
	}
	settings(&st, "fsdp2", PT, BF16, NONE);
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.layout, LAYOUT_PER_PARAM);
	cr_expect_eq(p.fsdp_version, 2);
	cr_expect_eq(p.handoff, 1);
	cr_expect_eq(p.w.gather_src, 2, "the param_dtype copy-in");
	cr_expect_eq(p.w.gather_buf, 2, "the flat all-gather buffer in param_dtype");
	cr_expect_eq(p.w.reduced, 4, "reduce_dtype None: fp32 (PyTorch 2.15)");
	cr_expect_eq(p.w.comm_grads, 4, "the reduce-scatter moves fp32");
	cr_expect_eq(p.opt_groups, OPT_PER_TENSOR, "torch.optim over each DTensor");
	cr_expect_eq(p.bwd_prefetch, PREFETCH_BACKWARD_PRE);
	cr_expect_eq(p.limit_all_gathers, 0);
	st.training.fsdp_reduce_dtype = FDT_BF16;
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.w.reduced, 2);
	cr_expect_eq(p.w.comm_grads, 2);
	settings(&st, "fsdp", PT, BF16, NONE);
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.layout, LAYOUT_FLAT, "FSDP1's FlatParameter");
	cr_expect_eq(p.w.gather_buf, 0);
	cr_expect_eq(p.opt_groups, OPT_PER_UNIT);
	cr_expect_eq(p.limit_all_gathers, 1);
}

/* The same zero3 scenario under framework = pytorch and deepspeed is one plan:
 * same engine, profile and checkpoint (they disagreed before plan.c). */
Test(plan, zero_under_pytorch_is_deepspeed)
{
	static const char *const zero[] = {"zero1", "zero2", "zero3"};
	struct scn_settings a, b;
	struct plan pa, pb;

	for (int i = 0; i < 3; i++)
		for (int prec = FP32; prec <= BF16; prec++) {
			settings(&a, zero[i], PT, prec, NONE);
			settings(&b, zero[i], DS, prec, NONE);
			plan_derive(&pa, &a, 16, 8.0);
			plan_derive(&pb, &b, 16, 8.0);
			cr_expect_str_eq(plan_profile_name(&pa), "deepspeed");
			pa.framework = pb.framework;  /* the one field that records what was asked */
			cr_expect(memcmp(&pa, &pb, sizeof pa) == 0, "%s %s: plans differ", zero[i],
				  scenario_precision_name(prec));
		}
}

/* Hybrid sharding's group: the data-parallel ranks of a node, at least 1 and
 * at most dp (FSDP's intra-node group; with tensor parallelism wider than a
 * node no data-parallel rank shares its node, so each shards alone). */
Test(plan, hybrid_group)
{
	static const struct { int64_t gpn, nodes, tp, shard, comms; } c[] = {
		{8, 2, 1, 8, 2},   /* 16 ranks: 8 per node; dp and hybrid communicators */
		{8, 2, 2, 4, 3},   /* TP 2: 4 data-parallel ranks per node; + the TP group */
		{8, 4, 16, 1, 3},  /* TP 16 spans two nodes: dp 2, nothing to shard with */
		{8, 1, 1, 8, 1},   /* one node: the shard group is dp, no inter-node group */
		{4, 1, 1, 4, 1},
	};

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		struct scn_settings st;
		struct plan p;

		settings(&st, "fsdp:hybrid_shard", PT, BF16, NONE);
		st.cluster.gpus_per_node = c[i].gpn;
		st.cluster.nodes = c[i].nodes;
		st.training.tensor_parallel = c[i].tp;
		plan_derive(&p, &st, c[i].gpn * c[i].nodes, 8.0);
		cr_expect_eq(p.shard_n, c[i].shard, "case %zu: shard_n %lld", i, (long long)p.shard_n);
		cr_expect_eq(p.nccl_comms, c[i].comms, "case %zu: communicators %d", i, p.nccl_comms);
	}
}

/* One table of names: every canonical name parses back to itself and agrees
 * with the scenario keys' values; "fsdp" is full_shard; FSDP2 is "fsdp2"
 * (full_shard) and "fsdp2:hybrid_shard". */
Test(plan, strategy_names)
{
	int strategy, sharding, version;
	char want[64];

	for (int s = STRAT_SINGLE; s <= STRAT_FSDP; s++)
		for (int h = SHARD_FULL; h <= (s == STRAT_FSDP ? SHARD_HYBRID_ZERO2 : SHARD_FULL); h++) {
			const char *name = plan_strategy_name(s, h, 1);
			if (s == STRAT_FSDP)
				snprintf(want, sizeof want, "fsdp:%s", scenario_enum_name("training", "fsdp_sharding_strategy", h));
			else
				snprintf(want, sizeof want, "%s", scenario_strategy_name(s));
			cr_expect_str_eq(name, want);
			cr_assert_eq(plan_parse_strategy(name, &strategy, &sharding, &version), 0, "%s", name);
			cr_expect(strategy == s && sharding == h && version == 1, "%s", name);
		}
	cr_assert_eq(plan_parse_strategy("fsdp", &strategy, &sharding, &version), 0);
	cr_expect(strategy == STRAT_FSDP && sharding == SHARD_FULL && version == 1);
	cr_expect_str_eq(plan_strategy_name(STRAT_FSDP, SHARD_FULL, 2), "fsdp2");
	cr_expect_str_eq(plan_strategy_name(STRAT_FSDP, SHARD_HYBRID, 2), "fsdp2:hybrid_shard");
	cr_expect_str_eq(plan_strategy_name(STRAT_FSDP, SHARD_GRAD_OP, 2), "?", "FSDP2 has no shard_grad_op");
	cr_assert_eq(plan_parse_strategy("fsdp2:hybrid_shard", &strategy, &sharding, &version), 0);
	cr_expect(strategy == STRAT_FSDP && sharding == SHARD_HYBRID && version == 2);
	cr_expect_eq(plan_parse_strategy("zero4", &strategy, &sharding, &version), -1);
	cr_expect_str_eq(plan_strategy_nearest("fsdp:hybrid_shrd"), "fsdp:hybrid_shard");
}

/* What a save holds (ckpt.c lays it out): DeepSpeed's 16-bit module, fp32
 * masters, Adam's m, v and step, and the gradients when asked; a weights-only
 * save keeps the module; one process saves a full state dict (torch.save);
 * ZeRO-1/2 shard the optimizer's states but not the module. */
Test(plan, checkpoint_contents)
{
	struct scn_settings st;
	struct plan p;

	settings(&st, "zero3", DS, BF16, NONE);
	st.checkpoint.include_grads = 1;
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.ckpt_bytes_per_param, 16, "2 + 4 + 8 + 2 (REFERENCE.md: 16 B/param with gradients)");
	cr_expect_eq(p.ckpt_optim_tensors, 3);
	cr_expect_eq(p.module_replicated, 0);
	settings(&st, "zero2", PT, BF16, NONE);
	st.checkpoint.include_optimizer = 0;
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.ckpt_bytes_per_param, 2, "the bf16 module alone");
	cr_expect_eq(p.module_replicated, 1);
	settings(&st, "dp", PT, BF16, NONE);
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.ckpt_state_dict, CKPT_FULL);
	cr_expect_eq(p.ckpt_bytes_per_param, 12);
}

/* The optimizer implementation that runs (torch/optim/optimizer.py
 * _default_to_fused_or_foreach; DeepSpeed's FusedAdam): PyTorch's foreach on a
 * CUDA device, the for-loop on the CPU and under PyTorch 1.13, fused for
 * DeepSpeed's engine (zero under pytorch included) and the runtime. */
Test(plan, optimizer_implementation)
{
	struct scn_settings st;
	struct plan p;

	settings(&st, "ddp", PT, BF16, NONE);
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.opt_impl, OPTI_FOREACH);
	cr_expect_eq(p.opt_groups, OPT_PER_TENSOR);
	plan_derive(&p, &st, 16, 0);
	cr_expect_eq(p.opt_impl, OPTI_FOR_LOOP, "no CUDA device");
	st.training.framework_version = FWV_1_13;
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.opt_impl, OPTI_FOR_LOOP, "PyTorch 1.13");
	settings(&st, "zero1", PT, FP16, NONE);
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.opt_impl, OPTI_FUSED);
	cr_expect_eq(p.opt_groups, OPT_FLAT);
	cr_expect_eq(p.grad_scaler, 0, "DeepSpeed's loss scaler, not torch.amp's");
	settings(&st, "fsdp", PT, FP16, NONE);
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.opt_groups, OPT_PER_UNIT);
	cr_expect_eq(p.grad_scaler, 1);
	st.training.optimizer_impl = OPTI_FUSED;
	plan_derive(&p, &st, 16, 8.0);
	cr_expect_eq(p.opt_impl, OPTI_FUSED, "as asked");
}

/* FSDP's gradient reduction. MixedPrecision(reduce_dtype=None) reduces in
 * param_dtype (torch/distributed/fsdp/api.py MixedPrecision); Composer's
 * mixed_precision DEFAULT and torchtitan's mixed_precision_reduce set fp32,
 * which upcasts a copy of each flat gradient (_runtime_utils.py
 * _post_backward_hook: flat_param.grad.to(reduce_dtype)). The division by the
 * data-parallel size n is split as f before and n / f after the collective, f
 * doubled from 1 while n % f == 0 and n / f > f
 * (default_hooks.DefaultState._get_gradient_predivide_factor), n counting
 * hybrid sharding's replicas (_init_utils.py _init_process_group_state). */
Test(plan, fsdp_reduce_dtype_and_divide_factors)
{
	static const struct { int prec, rd; int64_t gpn, nodes; int hybrid; int bytes, cast; double pre, post; } c[] = {
		{BF16, FDT_DEFAULT, 8, 1, 0, 2, 0, 4, 2},   /* n = 8: 4 x 2 */
		{BF16, FDT_FP32, 8, 1, 0, 4, 4, 4, 2},      /* Composer DEFAULT: fp32 copy */
		{FP32, FDT_DEFAULT, 8, 1, 0, 4, 0, 4, 2},   /* no MixedPrecision: fp32 */
		{FP32, FDT_BF16, 8, 1, 0, 2, 2, 4, 2},      /* reduce_dtype only: a bf16 copy */
		{BF16, FDT_FP32, 8, 8, 0, 4, 4, 8, 8},      /* n = 64: 8 x 8 */
		{BF16, FDT_DEFAULT, 8, 16, 1, 2, 0, 16, 8}, /* hybrid, n = 128: 16 x 8 */
		{BF16, FDT_DEFAULT, 2, 1, 0, 2, 0, 2, 1},   /* n = 2: 2 x 1 (no postdivide) */
	};

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		struct scn_settings st;
		struct plan p;

		settings(&st, c[i].hybrid ? "fsdp:hybrid_shard" : "fsdp", PT, c[i].prec, NONE);
		st.cluster.gpus_per_node = c[i].gpn;
		st.cluster.nodes = c[i].nodes;
		st.training.fsdp_reduce_dtype = c[i].rd;
		plan_derive(&p, &st, c[i].gpn * c[i].nodes, 8.0);
		cr_expect_eq(p.reduce_bytes, c[i].bytes, "case %zu: reduce bytes %d", i, p.reduce_bytes);
		cr_expect_eq(p.w.reduced, c[i].bytes, "case %zu: reduce-scatter output", i);
		cr_expect_eq(p.w.comm_grads, c[i].bytes, "case %zu: on the wire", i);
		cr_expect_eq(p.w.flat_cast, c[i].cast, "case %zu: cast copy %d", i, p.w.flat_cast);
		cr_expect_eq(p.grad_predivide, c[i].pre, "case %zu: predivide %g", i, p.grad_predivide);
		cr_expect_eq(p.grad_postdivide, c[i].post, "case %zu: postdivide %g", i, p.grad_postdivide);
	}
	{
		/* the shardcast runtime's units reduce in their gradients' dtype, undivided here */
		struct scn_settings st;
		struct plan p;

		settings(&st, "fsdp", SC, BF16, NONE);
		plan_derive(&p, &st, 16, 8.0);
		cr_expect_eq(p.grad_predivide, 1);
		cr_expect_eq(p.w.flat_cast, 0);
		cr_expect_eq(p.w.comm_grads, 2);
	}
}

/* The framework profile is read once, with the scenario: plan_profile_load
 * hands back scenario_load's copy while the plan's engine is the one it was
 * read for (a predict_run read the file each time: 4 % of bench_simulate's
 * in-process simulate), and reads the file of another engine. The copy is
 * marked (an alignment no file has) to show which one came back. */
Test(plan, profile_read_once_with_the_scenario)
{
	static const char text[] = "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n"
				   "[training]\nstrategy = ddp\nframework = pytorch\n";
	char path[64];
	struct scenario s;
	struct fw_profile got, file;
	struct err e = {0};
	FILE *f;

	memset(&got, 0, sizeof got);  /* the bytes compare */
	memset(&file, 0, sizeof file);
	snprintf(path, sizeof path, "/tmp/shardcast-plan-%d.ini", (int)getpid());
	f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(scenario_load(&s, path, NULL, 0, &e), 0, "%s", e.msg);
	remove(path);
	cr_assert_eq(profile_load("pytorch", &file, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_str_eq(s.profile.name, "pytorch");
	cr_expect(memcmp(&s.profile, &file, sizeof file) == 0, "the scenario's copy is the file's");
	s.profile.alignment = 12345;
	cr_assert_eq(plan_profile_load(&s, &got, &e), 0, "%s", e.msg);
	cr_expect_eq(got.alignment, 12345, "the scenario's copy, not the file read again");
	s.plan.engine = FW_DEEPSPEED;
	cr_assert_eq(plan_profile_load(&s, &got, &e), 0, "%s", e.msg);
	cr_assert_eq(profile_load("deepspeed", &file, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_str_eq(got.name, "deepspeed");
	cr_expect(memcmp(&got, &file, sizeof file) == 0, "another engine's profile is read from its file");
	scenario_free(&s);
}
