/*
 * plan.h — what a strategy does, decided once from a scenario's settings and
 * read by every model: the memory walk (memstrat.c), the step model (step.c),
 * checkpoint and job costs (ckpt.c), the graph options (predict.c), the
 * sweeps, and the real runtime (runtime/strategy.c). Nothing else looks at
 * [training] strategy, fsdp_sharding_strategy or framework: what those keys
 * mean is written here and in plan.c only.
 *
 * The facts and the framework code they follow (tests/test_plan.c pins one
 * row per case, citing its source):
 *
 *  engine      whose implementation runs the step, and whose profile
 *              (models/frameworks/) applies: framework = shardcast runs the
 *              runtime's own; deepspeed runs DeepSpeed's engine; pytorch runs
 *              PyTorch's (DataParallel, DDP, FSDP), except that zero1-3 are
 *              DeepSpeed's ZeRO optimizer and run DeepSpeed's engine whatever
 *              the framework (PyTorch has no ZeRO stage 2/3 optimizer; its
 *              ZeRO-2/3 are FSDP's shard_grad_op/full_shard).
 *  mech        how model states are laid out and moved (the memory walk's and
 *              the runtime's switch): replicated (single, ddp under PyTorch or
 *              shardcast), nn.DataParallel, DeepSpeed stage 0-2 partitions
 *              (stage_1_and_2.py; single and ddp under DeepSpeed are stage 0),
 *              wrap units gathered around their use (FSDP's FlatParameter
 *              units, torch/distributed/fsdp/; shardcast's zero3), DeepSpeed
 *              ZeRO-3's per-module fetch (stage3.py,
 *              partitioned_param_coordinator.py).
 *  groups      shard_n ranks share (partition) the model states: the
 *              data-parallel degree for zero1-3 and FSDP, 1 for replicated
 *              strategies and no_shard; hybrid_shard(_zero2) shards inside a
 *              node (gpus_per_node / tensor_parallel ranks, at least 1, at
 *              most dp: FSDP's intra-node process group) and all-reduces
 *              across replicate_n = dp / shard_n groups.
 *  gathers     units are all-gathered before use (not no_shard) and freed
 *              after forward (full_shard, hybrid_shard, zero3) or after
 *              backward (shard_grad_op, hybrid_shard_zero2, FSDP's
 *              reshard_after_forward); FSDP's prefetch keys and rate limiter
 *              apply to FSDP only; ZeRO-3 modules prefetch by bucket size.
 *  layout      FSDP1 (and shardcast's zero3) shard a unit's FlatParameter:
 *              its parameters concatenated, padded to a multiple of shard_n
 *              (flat_param.py). FSDP2 (fsdp_version = 2, fully_shard) shards
 *              every parameter on dim 0 as a DTensor Shard(0), each padded to
 *              a multiple of shard_n rows (_fsdp_param.py
 *              _init_sharded_param); its gathers copy the shards into one
 *              flat all-gather buffer (a 16-bit copy first under
 *              MixedPrecisionPolicy) and out into per-parameter unsharded
 *              tensors, its reductions copy the unsharded gradients into a
 *              reduce-scatter input in reduce_dtype (_fsdp_collectives.py
 *              foreach_all_gather, foreach_reduce); in forward a unit's
 *              all-gather buffer lives until the next unit's copy-out, a
 *              reduce-scatter input until the next unit's reduction or the
 *              end of backward (_fsdp_param_group.py AllGatherState,
 *              reduce_scatter_states: FSDP2's stream handoff, no rate
 *              limiter). reshard_after_forward: default frees the blocks,
 *              not the root, after forward; true every unit; false none; N
 *              keeps a shard over N ranks (to_sharded_post_forward). Backward
 *              prefetches the unit before in forward order (implicit
 *              prefetch, _backward_prefetch); forward_prefetch is
 *              set_modules_to_forward_prefetch of the next unit.
 *  reduce      how gradients reach their owners: DDP's buckets, ZeRO-1's
 *              reduce-scatter after the last micro-step, ZeRO-2/3's
 *              reduce_bucket_size buckets during backward, each unit's
 *              reduce-scatter after its backward (FSDP), DataParallel's
 *              reduce_add onto GPU 0.
 *  widths      bytes per element of every tensor class (struct plan_widths):
 *              PyTorch mixed precision is autocast over fp32 weights and
 *              gradients (torch.amp) or FSDP MixedPrecision over an fp32 flat
 *              shard (16-bit gathers, reductions in MixedPrecision's reduce_dtype:
 *              the compute dtype by default, fp32 as Composer's DEFAULT and
 *              torchtitan set it; fp32 sharded .grad);
 *              DeepSpeed and the shardcast runtime hold 16-bit weights and
 *              gradients with fp32 masters (ZeRO's 2 + 2 + K, Rajbhandari et
 *              al. 2020 §3; engine.get_data_types).
 *  optimizer   state bytes per parameter (sgd 0, momentum 4, Adam 8: fp32
 *              exp_avg and exp_avg_sq) and whether the implementation is fused
 *              (DeepSpeed FusedAdam/CPUAdam, shardcast) or torch.optim's
 *              foreach loop.
 *  checkpoint  bytes per parameter the saved training state holds (the
 *              module's weights: fp32, or 16-bit beside fp32 masters; the
 *              optimizer's states unless a weights-only save; the gradients
 *              if asked), and whether the module is sharded (ckpt.c lays it
 *              out over the ranks).
 */
#ifndef SHARDCAST_PLAN_H
#define SHARDCAST_PLAN_H

#include <stdint.h>

#include "err.h"

struct fw_profile;
struct scenario;
struct scn_settings;

/* How model states are laid out and moved. */
enum plan_mech {
	MECH_REPL,    /* every rank holds everything (single, ddp) */
	MECH_DP,      /* nn.DataParallel: one process, GPU 0 holds the states */
	MECH_ZERO12,  /* DeepSpeed flat partitions, stages 0-2 (shardcast: zero1, zero2) */
	MECH_UNITS,   /* wrap units gathered around their use (FSDP; shardcast zero3) */
	MECH_ZERO3    /* DeepSpeed ZeRO-3: per-module fetch and release */
};

/* How gradients are reduced. */
enum plan_reduce {
	REDUCE_NONE,        /* one rank: nothing to reduce */
	REDUCE_DP,          /* DataParallel: reduce_add onto GPU 0 after backward */
	REDUCE_DDP,         /* DDP buckets all-reduced as they fill */
	REDUCE_AFTER_ACCUM, /* ZeRO-1: reduce-scatter after the last micro-step */
	REDUCE_BUCKETS,     /* ZeRO-2/3: reduce_bucket_size buckets during backward */
	REDUCE_UNITS        /* each unit's gradient after its backward */
};

/* How a unit's parameters are sharded. */
enum plan_layout {
	LAYOUT_FLAT,        /* FSDP1's FlatParameter: concatenated, padded to shard_n */
	LAYOUT_PER_PARAM    /* FSDP2: every parameter on dim 0, padded to shard_n rows */
};

/* What the optimizer steps over, tensor by tensor. */
enum plan_opt_groups {
	OPT_PER_TENSOR,     /* every parameter tensor (torch.optim over the module) */
	OPT_FLAT,           /* one flat partition (DeepSpeed's fp32 partition, ZeRO) */
	OPT_PER_UNIT        /* one FlatParameter per FSDP unit */
};

/* Bytes per element of each tensor class; 0 = the plan has no such tensor. */
struct plan_widths {
	int params;         /* working parameters kept across steps (module, flat shard) */
	int grads;          /* parameter gradients as backward writes them */
	int master;         /* fp32 master weights beside 16-bit params (0: params are the master) */
	int cast;           /* autocast's 16-bit copy of a weight during its op */
	int gathered;       /* a gathered unit's or module's parameters */
	int gather_src;     /* the 16-bit copy of a shard made for its all-gather (FSDP MixedPrecision) */
	int gather_buf;     /* FSDP2's flat all-gather buffer (the per-parameter copy-out's source) */
	int unsharded_grad; /* a unit's unsharded gradient before its reduce-scatter */
	int accum_grad;     /* FSDP2 under set_requires_gradient_sync(False) (no_sync): an
			       unsharded gradient kept across micro-steps, in its
			       unsharded_grad_dtype (reduce_dtype, else the parameter's
			       fp32); 0 elsewhere */
	int grad_shard;     /* the sharded gradient kept between backward and the step */
	int reduced;        /* reduce-scatter output, FSDP2's input too (FSDP: reduce_dtype) */
	int flat_cast;      /* a unit's flat gradient cast to the reduce dtype for its reduction
			       (FSDP MixedPrecision, reduce_dtype unlike the gradients'); 0 none */
	int staging;        /* host<->device staging of an offloaded shard */
	int kernel_weights; /* weights read by compute kernels */
	int kernel_grads;   /* weight gradients written by compute kernels */
	int comm_params;    /* parameters on the wire (broadcast, all-gather) */
	int comm_grads;     /* gradients on the wire (all-reduce, reduce-scatter) */
};

struct plan {
	/* what was asked, for names and reports */
	int strategy;            /* enum strategy */
	int sharding;            /* enum fsdp_sharding; SHARD_FULL unless fsdp */
	int framework;           /* enum framework, as set */
	char name[24];           /* the strategy table's name: "zero3", "fsdp:hybrid_shard" */

	/* who runs it and how */
	int engine;              /* enum framework: whose implementation and profile */
	int mech;                /* enum plan_mech */
	int zero_stage;          /* 0..3: ZeRO stage (what is partitioned); fsdp 0 */
	int one_process;         /* single, dp: one process (dp drives every GPU) */
	int precision;           /* PREC_* */
	int mixed;               /* fp16/bf16: 16-bit compute, fp32 master weights */
	int loss_scale;          /* fp16: dynamic loss scaling state */
	int autocast;            /* PyTorch autocast over fp32 weights */
	int offload;             /* enum offload */

	/* groups (ranks) */
	int64_t dp;              /* data-parallel degree: world / tensor_parallel */
	int64_t shard_n;         /* ranks sharing (partitioning) the model states */
	int64_t replicate_n;     /* dp / shard_n: replicas of each shard */
	int hybrid;              /* shard inside a node, all-reduce across (hybrid_shard*) */
	int nccl_comms;          /* NCCL communicators a rank holds (dp, hybrid's, TP) */

	/* gathering */
	int units;               /* wrap units (MECH_UNITS) */
	int gathers;             /* parameters are all-gathered before use */
	int reshard_fwd;         /* gathered parameters freed after forward (units) */
	int wrap;                /* enum fsdp_wrap of the units */
	double wrap_min_params;  /* size_based_wrap threshold (parameters) */
	int fwd_prefetch;        /* FSDP forward_prefetch */
	int post_lag;            /* PyTorch FSDP1 with forward_prefetch: a unit's post-backward
				    work (its flat gradient's concatenation and the hook: reshard,
				    reduce) runs after the backward of the unit before it in
				    forward order (autograd runs ready nodes by sequence number, and
				    the prefetch makes the unit's views before that unit's forward:
				    SplitWithSizesBackward is then older than its ops); the root's
				    comes last, after the first block's */
	int bwd_prefetch;        /* enum fsdp_prefetch (FSDP; PREFETCH_NONE otherwise) */
	int limit_all_gathers;   /* FSDP's rate limiter */
	int fsdp_version;        /* 1 FullyShardedDataParallel, 2 fully_shard; 0 not FSDP */
	int layout;              /* enum plan_layout of the units */
	int reshard_root;        /* the root unit is freed after forward too (FSDP2 true, N) */
	int64_t reshard_group;   /* FSDP2 reshard_after_forward = N: a unit keeps a shard over N
				    ranks after forward (0: none) */
	int handoff;             /* FSDP2's stream handoff of the all-gather and reduce-scatter
				    buffers (layout) */

	/* gradients and the step */
	int reduce;              /* enum plan_reduce */
	int ddp_bucket_view;     /* DDP gradients are views into the buckets */
	int no_sync;             /* micro-steps before the last run in no_sync(): no gradient
				    reduction (DDP by default; PyTorch FSDP1 when [training]
				    no_sync = true, each unit then keeping its unsharded
				    flat gradient, _post_backward_hook; FSDP2's counterpart,
				    set_requires_gradient_sync(False), likewise, each
				    parameter keeping its unsharded gradient, accum_grad) */
	int no_sync_keeps_gathered; /* FSDP1 under no_sync: a unit's gathered parameters stay
				    after its backward where forward keeps them too
				    (shard_grad_op, hybrid_shard_zero2:
				    _should_free_in_backward), so the micro-steps after the
				    first gather nothing: the first micro-step is unlike the
				    others too */
	int allgather_after_step;/* ZeRO-1/2: updated partitions all-gathered after the step */
	int optimizer;           /* enum optimizer */
	int opt_state_bytes;     /* fp32 optimizer state bytes per parameter (0, 4, 8) */
	int opt_tensors;         /* state tensors per parameter (0, 1, 2) */
	int fused_optimizer;     /* the engine's own fused update (DeepSpeed, shardcast), else torch.optim */
	int opt_impl;            /* enum opt_impl that runs (not OPTI_DEFAULT): optimizer_impl, or
				    fused (DeepSpeed, shardcast), foreach (PyTorch 2 on CUDA), for_loop */
	int opt_groups;          /* enum plan_opt_groups: what one optimizer tensor is */
	int grad_scaler;         /* torch.amp.GradScaler's unscale pass (PyTorch fp16) */
	int zero_grad_keeps;     /* zero_grad keeps .grad allocated across steps (set_to_none
				    = False, torch.optim before 2.0: framework_version 1.13) */
	int reduce_bytes;        /* FSDP: bytes per gradient element reduced (reduce_dtype;
				    default FSDP1 the gradients' own, FSDP2 the parameters' fp32) */
	double grad_predivide;   /* PyTorch FSDP: the unsharded gradient is divided by this before
				    its reduction and the result by grad_postdivide after it (1 =
				    no pass): DefaultState's split of the data-parallel size
				    (FSDP2: fp16 only; fp32 and bf16 reduce with ReduceOp.AVG) */
	double grad_postdivide;

	struct plan_widths w;

	/* checkpoint (ckpt.c) */
	double ckpt_weight_bytes; /* per parameter: the module's weights as saved (fp32, or 16-bit) */
	double ckpt_master_bytes; /* per parameter: fp32 masters saved beside a 16-bit module */
	double ckpt_optim_bytes;  /* per parameter: optimizer states */
	double ckpt_optim_tensors;/* optimizer state tensors per parameter tensor (Adam: m, v, step) */
	double ckpt_grad_bytes;   /* per parameter: gradients, when the save holds them (else 0) */
	double ckpt_bytes_per_param; /* the sum */
	int ckpt_state_dict;      /* CKPT_SHARDED | CKPT_FULL (one process saves a full one) */
	int module_replicated;    /* the module's weights are not sharded (ZeRO-1/2: master and
				     optimizer states are) */
};

/* Whether a micro-step's backward reduces its gradients: the last always,
 * the others unless they run in no_sync() (p->no_sync). Read by the memory
 * walk and the step. */
static inline int plan_micro_syncs(const struct plan *p, int last)
{
	return last || !p->no_sync;
}

/* Checks the training settings of s against its model and cluster (strategy
 * vs GPU count, offload vs strategy, tensor parallel vs heads, framework vs
 * strategy, precision vs device) and fills p. Returns 0 or ERR_INPUT with e
 * naming where the key was set. A sweep calls it for each candidate it
 * builds in memory; scenario_load for the file. */
int plan_build(struct plan *p, const struct scenario *s, struct err *e);

/* Fills p from settings st on world GPUs of compute capability cc (0: not a
 * CUDA device), without checks (the table test, the runtime's strategy
 * specs, each sweep candidate). */
void plan_derive(struct plan *p, const struct scn_settings *st, int64_t world, double cc);

/* Sets FSDP's prefetch keys on p (forward_prefetch, enum fsdp_prefetch); other
 * strategies keep none. */
void plan_set_prefetch(struct plan *p, int fwd, int bwd);

/* A plan of the shardcast engine for a strategy of the table at precision
 * (PREC_*), every other setting at its default, on one GPU (the runtime's
 * tests and tools). Returns 0, or -1 for an unknown name. */
int plan_from_spec(struct plan *p, const char *spec, int precision);

/* The strategy table: "single", "dp", "ddp", "zero1".."zero3", "fsdp" (=
 * fsdp:full_shard), "fsdp:SHARDING" and FSDP2's "fsdp2" and
 * "fsdp2:hybrid_shard". Returns 0 and sets *strategy, *sharding and
 * *version (fsdp_version; 1 for the others), or -1 for an unknown name. */
int plan_parse_strategy(const char *name, int *strategy, int *sharding, int *version);

/* The table's name of (strategy, sharding, fsdp_version) ("fsdp:shard_grad_op"). */
const char *plan_strategy_name(int strategy, int sharding, int version);

/* The table's nearest name to a misspelt one, or NULL. */
const char *plan_strategy_nearest(const char *name);

/* The name of the framework profile the plan runs under (models/frameworks/). */
const char *plan_profile_name(const struct plan *p);

/* That profile for scenario s into pf: the one scenario_load read (s->profile)
 * when its engine is still the plan's, else read from its file (errors name
 * the framework key's line). */
int plan_profile_load(const struct scenario *s, struct fw_profile *pf, struct err *e);

/* What the sweep's report says of a framework's engines ("" when it runs one). */
const char *plan_engine_note(int framework);

#endif
