/*
 * plan.c — what a strategy does (see plan.h for the facts and their sources).
 *
 * The only place that reads [training] strategy, fsdp_sharding_strategy and
 * framework after the loader has stored them, and the only table of strategy
 * names.
 */
#include "plan.h"

#include <stdio.h>
#include <string.h>

#include "profile.h"
#include "scenario.h"

/* ---- the strategy table ------------------------------------------------------- */

static const struct {
	const char *name;
	int strategy, sharding;
	int version;            /* fsdp_version (FSDP rows), else 1 */
	int alias;              /* accepted, never printed */
} names[] = {
	{"single", STRAT_SINGLE, SHARD_FULL, 1, 0}, {"dp", STRAT_DP, SHARD_FULL, 1, 0},
	{"ddp", STRAT_DDP, SHARD_FULL, 1, 0}, {"zero1", STRAT_ZERO1, SHARD_FULL, 1, 0},
	{"zero2", STRAT_ZERO2, SHARD_FULL, 1, 0}, {"zero3", STRAT_ZERO3, SHARD_FULL, 1, 0},
	{"fsdp", STRAT_FSDP, SHARD_FULL, 1, 1},
	{"fsdp:full_shard", STRAT_FSDP, SHARD_FULL, 1, 0},
	{"fsdp:shard_grad_op", STRAT_FSDP, SHARD_GRAD_OP, 1, 0},
	{"fsdp:no_shard", STRAT_FSDP, SHARD_NONE, 1, 0},
	{"fsdp:hybrid_shard", STRAT_FSDP, SHARD_HYBRID, 1, 0},
	{"fsdp:hybrid_shard_zero2", STRAT_FSDP, SHARD_HYBRID_ZERO2, 1, 0},
	/* FSDP2 (fully_shard): a 1-D mesh, or HSDP's 2-D (replicate, shard) mesh */
	{"fsdp2", STRAT_FSDP, SHARD_FULL, 2, 0},
	{"fsdp2:full_shard", STRAT_FSDP, SHARD_FULL, 2, 1},
	{"fsdp2:hybrid_shard", STRAT_FSDP, SHARD_HYBRID, 2, 0},
};
#define NNAMES (sizeof names / sizeof names[0])

int plan_parse_strategy(const char *name, int *strategy, int *sharding, int *version)
{
	size_t i;

	for (i = 0; i < NNAMES; i++)
		if (strcmp(name, names[i].name) == 0) {
			*strategy = names[i].strategy;
			*sharding = names[i].sharding;
			*version = names[i].version;
			return 0;
		}
	return -1;
}

const char *plan_strategy_name(int strategy, int sharding, int version)
{
	size_t i;

	for (i = 0; i < NNAMES; i++)
		if (!names[i].alias && names[i].strategy == strategy &&
		    (strategy != STRAT_FSDP || (names[i].sharding == sharding && names[i].version == version)))
			return names[i].name;
	return "?";
}

const char *plan_strategy_nearest(const char *name)
{
	const char *list[NNAMES];
	size_t i;

	for (i = 0; i < NNAMES; i++)
		list[i] = names[i].name;
	return err_nearest(name, list, NNAMES);
}

/* ---- the engine and the mechanism ---------------------------------------------- */

/* zero1-3 are DeepSpeed's ZeRO optimizer: its engine runs them unless the
 * runtime's own (shardcast) does; the rest run the framework asked for. */
static int engine(const struct scn_training *t)
{
	if (t->framework == FW_PYTORCH && t->strategy >= STRAT_ZERO1 && t->strategy <= STRAT_ZERO3)
		return FW_DEEPSPEED;
	return t->framework;
}

const char *plan_engine_note(int framework)
{
	return framework == FW_PYTORCH ? " (DeepSpeed's engine for zero1-3)" : "";
}

static int mechanism(int strategy, int eng)
{
	switch (strategy) {
	case STRAT_DP: return MECH_DP;
	case STRAT_SINGLE:
	case STRAT_DDP: return eng == FW_DEEPSPEED ? MECH_ZERO12 : MECH_REPL;  /* DeepSpeed stage 0 */
	case STRAT_ZERO1:
	case STRAT_ZERO2: return MECH_ZERO12;
	case STRAT_ZERO3: return eng == FW_SHARDCAST ? MECH_UNITS : MECH_ZERO3;
	default: return MECH_UNITS;
	}
}

static int reduction(const struct plan *p)
{
	switch (p->strategy) {
	case STRAT_SINGLE: return REDUCE_NONE;
	case STRAT_DP: return REDUCE_DP;
	case STRAT_DDP: return REDUCE_DDP;
	case STRAT_ZERO1: return REDUCE_AFTER_ACCUM;
	case STRAT_ZERO2: return REDUCE_BUCKETS;
	default: return p->mech == MECH_ZERO3 ? REDUCE_BUCKETS : REDUCE_UNITS;
	}
}

/* ---- groups ------------------------------------------------------------------------ */

static void groups(struct plan *p, const struct scn_settings *st, int64_t world)
{
	const struct scn_training *t = &st->training;
	int64_t tp = t->tensor_parallel > 0 ? t->tensor_parallel : 1;
	int64_t node = st->cluster.gpus_per_node / tp;  /* data-parallel ranks in a node */

	p->dp = world / tp;
	p->hybrid = p->strategy == STRAT_FSDP &&
		(p->sharding == SHARD_HYBRID || p->sharding == SHARD_HYBRID_ZERO2);
	if (p->zero_stage > 0)
		p->shard_n = p->dp;
	else if (p->strategy != STRAT_FSDP || p->sharding == SHARD_NONE)
		p->shard_n = 1;
	else if (p->hybrid)
		p->shard_n = node < 1 ? 1 : node < p->dp ? node : p->dp;
	else
		p->shard_n = p->dp;
	if (p->shard_n < 1)
		p->shard_n = 1;
	p->replicate_n = p->dp / p->shard_n;
	if (p->mech == MECH_DP)
		p->nccl_comms = world > 1;
	else if (p->strategy != STRAT_SINGLE && p->dp > 1)
		p->nccl_comms = 1 + (p->hybrid && st->cluster.nodes > 1);
	p->nccl_comms += tp > 1;
}

/* ---- FSDP2 ---------------------------------------------------------------------------- */

/* fully_shard's reshard_after_forward (_fully_shard.py,
 * _fsdp_init.py _get_post_forward_mesh_info) and prefetching
 * (_fsdp_param_group.py): None frees the blocks after forward, not the
 * root; True and False apply to every module; an int N keeps a shard over N
 * ranks (1 = False, the shard group's size = True). Backward always
 * prefetches the module before in forward order; there is no rate limiter. */
static void fsdp2(struct plan *p, const struct scn_training *t)
{
	int64_t r = t->fsdp_reshard_after_forward;

	p->layout = LAYOUT_PER_PARAM;
	p->handoff = 1;
	if (r >= 2 && r >= p->shard_n)
		r = -2;
	p->reshard_fwd = r != 0 && r != 1;
	p->reshard_root = r == -2 || r >= 2;
	p->reshard_group = r >= 2 ? r : 0;
	p->limit_all_gathers = 0;
}

/* ---- FSDP's gradient reduction ---------------------------------------------------------- */

/* PyTorch FSDP reduces in MixedPrecision's reduce_dtype (None: param_dtype,
 * the compute dtype) and divides by the data-parallel size in two steps
 * around the collective, to keep low-precision sums in range: before it by f,
 * starting at 1 and doubled while n % f == 0 and n / f > f
 * (default_hooks.DefaultState._get_gradient_predivide_factor: 4 for n = 8,
 * 8 for 64, 16 for 128), after it by n / f; n counts the replicas of hybrid
 * sharding too (fsdp/_init_utils.py _init_process_group_state).
 * FSDP2 reduces in MixedPrecisionPolicy's reduce_dtype (None: the
 * parameters' own dtype, fp32, since PyTorch 2.15, _fsdp_api.py; before, it
 * followed param_dtype); fp32 and bf16 divide inside the collective
 * (ReduceOp.AVG), fp16 splits the division as FSDP1 does
 * (_fsdp_collectives.py _get_gradient_divide_factors). */
static void fsdp_reduction(struct plan *p, const struct scn_training *t)
{
	int64_t n = p->dp, f = 1;
	int d = t->fsdp_reduce_dtype, fsdp2 = p->layout == LAYOUT_PER_PARAM;

	p->reduce_bytes = d == FDT_FP32 ? 4 : d == FDT_DEFAULT ? (p->mixed && !fsdp2 ? 2 : 4) : 2;
	p->grad_predivide = p->grad_postdivide = 1;
	if (p->engine != FW_PYTORCH || p->mech != MECH_UNITS || n < 2 || (fsdp2 && d != FDT_FP16))
		return;
	while (n % f == 0 && n / f > f)
		f *= 2;
	p->grad_predivide = (double)f;
	p->grad_postdivide = (double)n / (double)f;
}

/* ---- bytes per element --------------------------------------------------------------- */

static void widths(struct plan *p)
{
	struct plan_widths *w = &p->w;
	int act = p->mixed ? 2 : 4, pytorch = p->engine == FW_PYTORCH;

	if (pytorch && (p->mech == MECH_REPL || p->mech == MECH_DP)) {
		w->params = w->grads = 4;       /* autocast keeps fp32 weights and .grad */
		w->cast = p->mixed ? 2 : 0;
	} else {
		w->params = w->grads = act;
		w->master = p->engine == FW_SHARDCAST ? (p->mixed ? 4 : 0) : 4;
	}
	if (p->mech == MECH_UNITS && pytorch) {  /* FSDP: the fp32 flat shard is the master */
		w->params = 4;
		w->master = 0;
		w->gathered = p->sharding == SHARD_NONE && !p->mixed ? 0 : act;
		w->gather_src = p->mixed && p->sharding != SHARD_NONE ? 2 : 0;
		w->unsharded_grad = act;
		w->reduced = p->reduce_bytes;
		w->flat_cast = p->reduce_bytes != act ? p->reduce_bytes : 0;
		w->grad_shard = p->offload ? 0 : 4;  /* the fp32 sharded .grad, on the host with offload */
		w->staging = p->offload ? 4 : 0;
		if (p->layout == LAYOUT_PER_PARAM) {  /* FSDP2: the flat all-gather buffer; its
							 reduce-scatter input is in reduce_dtype */
			w->gather_buf = w->gathered;
			w->flat_cast = 0;
			/* unsynchronized gradients accumulate in the unsharded
			 * parameter's unsharded_grad_dtype: reduce_dtype if set, else
			 * the original (fp32) dtype (_fsdp_param.py), which is
			 * reduce_bytes either way (fsdp_reduction) */
			w->accum_grad = p->no_sync ? p->reduce_bytes : 0;
		}
	} else if (p->mech == MECH_UNITS) {
		w->gathered = p->gathers ? w->params : 0;
		w->unsharded_grad = p->gathers ? w->grads : 0;
		w->grad_shard = w->reduced = w->grads;
		w->staging = p->offload == OFFLOAD_OPTIMIZER_AND_PARAMS ? w->params : 0;
		w->gather_buf = p->layout == LAYOUT_PER_PARAM ? w->gathered : 0;
	} else if (p->mech == MECH_ZERO3) {
		w->gathered = w->params;
		w->staging = p->offload == OFFLOAD_OPTIMIZER_AND_PARAMS ? w->params : 0;
	}
	w->kernel_weights = act;
	w->kernel_grads = p->autocast ? 4 : act;
	w->comm_params = p->mech == MECH_DP && p->autocast ? 4 : act;  /* replicate() broadcasts fp32 */
	w->comm_grads = p->layout == LAYOUT_PER_PARAM ? w->reduced  /* FSDP2 reduce-scatters in reduce_dtype */
		: p->mech == MECH_UNITS && pytorch ? p->reduce_bytes : p->autocast ? 4 : act;
}

/* ---- the optimizer and the checkpoint ---------------------------------------------- */

/* The optimizer's states and implementation. torch/optim/optimizer.py
 * _default_to_fused_or_foreach: foreach when every parameter is a CUDA tensor
 * (PyTorch 2.0+; 1.13's default was the for-loop), fused only when asked;
 * DeepSpeed's engine builds FusedAdam (multi_tensor_apply), the shardcast
 * runtime updates in one fused pass. */
static void optimizer(struct plan *p, const struct scn_training *t, double cc)
{
	p->optimizer = t->optimizer;
	p->opt_tensors = t->optimizer == OPT_SGD ? 0 : t->optimizer == OPT_SGD_MOMENTUM ? 1 : 2;
	p->opt_state_bytes = 4 * p->opt_tensors;  /* fp32 momentum; exp_avg, exp_avg_sq */
	p->fused_optimizer = p->engine != FW_PYTORCH;
	p->opt_impl = t->optimizer_impl != OPTI_DEFAULT ? t->optimizer_impl
		: p->fused_optimizer ? OPTI_FUSED
		: cc > 0 && t->framework_version != FWV_1_13 ? OPTI_FOREACH : OPTI_FOR_LOOP;
	/* FSDP1 steps over a FlatParameter per unit, FSDP2 over each DTensor parameter */
	p->opt_groups = p->zero_stage > 0 ? OPT_FLAT
		: p->strategy == STRAT_FSDP && p->layout == LAYOUT_FLAT ? OPT_PER_UNIT : OPT_PER_TENSOR;
	p->grad_scaler = p->engine == FW_PYTORCH && p->precision == PREC_FP16;
	/* optimizer.zero_grad(set_to_none=True) is torch.optim's default from
	 * 2.0; 1.13 zeroed .grad in place, keeping it allocated (per-tensor
	 * gradients: the replicated and DataParallel layouts) */
	p->zero_grad_keeps = p->engine == FW_PYTORCH && t->framework_version == FWV_1_13 &&
		(p->mech == MECH_REPL || p->mech == MECH_DP);
}

/* The saved training state: PyTorch mixed precision (autocast, FSDP
 * MixedPrecision) keeps fp32 parameters; DeepSpeed and the runtime a 16-bit
 * module plus fp32 masters inside the optimizer (a weights-only save drops
 * the masters with the optimizer's states). One process (single,
 * nn.DataParallel) saves it all with torch.save. */
static void checkpoint(struct plan *p, const struct scn_settings *st)
{
	const struct scn_checkpoint *k = &st->checkpoint;
	int low = p->mixed && p->engine != FW_PYTORCH;

	p->ckpt_weight_bytes = low ? 2 : 4;
	if (k->include_optimizer) {
		p->ckpt_master_bytes = low ? 4 : 0;
		p->ckpt_optim_bytes = p->opt_state_bytes;
		p->ckpt_optim_tensors = p->opt_tensors == 2 ? 3 : p->opt_tensors;  /* Adam: m, v, step */
	}
	p->ckpt_grad_bytes = k->include_grads ? (low ? 2 : 4) : 0;
	p->ckpt_bytes_per_param = p->ckpt_weight_bytes + p->ckpt_master_bytes + p->ckpt_optim_bytes +
		p->ckpt_grad_bytes;
	p->ckpt_state_dict = p->one_process ? CKPT_FULL : k->state_dict;
	p->module_replicated = p->zero_stage == 1 || p->zero_stage == 2;
}

/* ---- the plan ----------------------------------------------------------------------- */

void plan_derive(struct plan *p, const struct scn_settings *st, int64_t world, double cc)
{
	const struct scn_training *t = &st->training;
	int fsdp = t->strategy == STRAT_FSDP;

	memset(p, 0, sizeof *p);
	p->strategy = t->strategy;
	p->sharding = fsdp ? t->fsdp_sharding : SHARD_FULL;
	p->framework = t->framework;
	p->fsdp_version = fsdp ? (int)t->fsdp_version : 0;
	snprintf(p->name, sizeof p->name, "%s", plan_strategy_name(p->strategy, p->sharding, fsdp ? p->fsdp_version : 1));
	p->engine = engine(t);
	p->mech = mechanism(t->strategy, p->engine);
	p->zero_stage = t->strategy >= STRAT_ZERO1 && t->strategy <= STRAT_ZERO3 ? t->strategy - STRAT_ZERO1 + 1 : 0;
	p->one_process = t->strategy == STRAT_SINGLE || t->strategy == STRAT_DP;
	p->precision = t->precision;
	p->mixed = t->precision == PREC_FP16 || t->precision == PREC_BF16;
	p->loss_scale = t->precision == PREC_FP16;
	p->autocast = p->engine == FW_PYTORCH && p->mixed && (p->mech == MECH_REPL || p->mech == MECH_DP);
	p->offload = t->offload;
	groups(p, st, world);
	p->units = p->mech == MECH_UNITS;
	p->gathers = (p->units && p->sharding != SHARD_NONE) || p->mech == MECH_ZERO3;
	p->reshard_fwd = p->mech == MECH_ZERO3 ||
		(p->units && (p->sharding == SHARD_FULL || p->sharding == SHARD_HYBRID));
	p->wrap = fsdp ? t->fsdp_wrap : WRAP_TRANSFORMER;
	p->wrap_min_params = t->fsdp_min_num_params;
	p->limit_all_gathers = fsdp && t->fsdp_limit_all_gathers;
	if (p->fsdp_version == 2)
		fsdp2(p, t);
	plan_set_prefetch(p, t->fsdp_forward_prefetch, t->fsdp_backward_prefetch);
	p->post_lag = p->fwd_prefetch && p->fsdp_version == 1 && p->engine == FW_PYTORCH;
	p->reduce = reduction(p);
	p->ddp_bucket_view = p->reduce == REDUCE_DDP && t->ddp_gradient_as_bucket_view;
	/* no_sync(): DDP's default (Composer, Accelerate and the HF Trainer wrap
	 * the micro-steps before the last in it); FSDP's only when asked, FSDP1's
	 * no_sync() or FSDP2's set_requires_gradient_sync(False) (Composer
	 * reduces every micro-step under FSDP, ddp_sync_context; Accelerate's and
	 * the HF Trainer's GradientAccumulationPlugin default, sync_each_batch =
	 * False, does not, under FSDP1) */
	p->no_sync = p->reduce == REDUCE_DDP ? t->no_sync != NOSYNC_FALSE
		: p->reduce == REDUCE_UNITS && p->engine == FW_PYTORCH && t->no_sync == NOSYNC_TRUE;
	/* FSDP2's reshard_after_backward is its own setting, which
	 * set_requires_gradient_sync leaves alone (_fully_shard.py) */
	p->no_sync_keeps_gathered = p->no_sync && p->units && p->gathers && !p->reshard_fwd && p->fsdp_version == 1;
	p->allgather_after_step = p->zero_stage == 1 || p->zero_stage == 2;
	optimizer(p, t, cc);
	fsdp_reduction(p, t);
	widths(p);
	checkpoint(p, st);
}

void plan_set_prefetch(struct plan *p, int fwd, int bwd)
{
	int fsdp = p->strategy == STRAT_FSDP;  /* FSDP's keys; ZeRO-3 prefetches by bucket size */

	p->fwd_prefetch = fsdp && fwd;
	/* FSDP2 prefetches the module before in backward whatever is asked */
	p->bwd_prefetch = !fsdp ? PREFETCH_NONE : p->fsdp_version == 2 ? PREFETCH_BACKWARD_PRE : bwd;
}

int plan_from_spec(struct plan *p, const char *spec, int precision)
{
	struct scn_settings st;
	struct err e = {0};
	int strategy, sharding, version;

	if (plan_parse_strategy(spec, &strategy, &sharding, &version) || cfg_defaults(scenario_keys(), &st, &e))
		return -1;
	st.training.strategy = strategy;
	st.training.fsdp_sharding = sharding;
	st.training.fsdp_version = version;
	st.training.framework = FW_SHARDCAST;
	st.training.precision = precision;
	plan_derive(p, &st, 1, 0);
	return 0;
}

/* FSDP2's settings (fully_shard's arguments), located where they were set. */
static int check_fsdp2(const struct scenario *s, struct err *e)
{
	const struct scn_training *t = &s->s.training;

	if (t->strategy != STRAT_FSDP || t->fsdp_version != 2) {
		if (t->fsdp_reshard_after_forward != -1)
			return scenario_error(s, e, "training", "fsdp_reshard_after_forward", "%s", "is FSDP2's (strategy = fsdp, fsdp_version = 2); FSDP1 reshards by fsdp_sharding_strategy");
		return 0;
	}
	if (t->framework == FW_PYTORCH && t->framework_version == FWV_1_13)
		return scenario_error(s, e, "training", "fsdp_version", "%s", "= 2 is fully_shard, which came with PyTorch 2.4; framework_version = 1.13 has FSDP1 only");
	if (t->fsdp_sharding != SHARD_FULL && t->fsdp_sharding != SHARD_HYBRID)
		return scenario_error(s, e, "training", "fsdp_sharding_strategy", "%s", "fsdp_version = 2 shards over a 1-D mesh (full_shard) or a 2-D replicate x shard mesh (hybrid_shard); shard_grad_op's behaviour is fsdp_reshard_after_forward = false");
	if (t->fsdp_wrap == WRAP_SIZE)
		return scenario_error(s, e, "training", "fsdp_auto_wrap_policy", "%s", "fsdp_version = 2 is modelled with transformer_based_wrap (fully_shard on every block, then the root) or no_wrap");
	if (t->offload != OFFLOAD_NONE)
		return scenario_error(s, e, "training", "offload", "%s", "fsdp_version = 2's CPUOffloadPolicy is not modelled; use fsdp_version = 1");
	if (t->fsdp_backward_prefetch != PREFETCH_BACKWARD_PRE)
		return scenario_error(s, e, "training", "fsdp_backward_prefetch", "%s", "is FSDP1's: FSDP2 always prefetches the previous module in backward (backward_pre)");
	return 0;
}

/* fsdp_reshard_after_forward = N must divide the shard group
 * (_get_post_forward_mesh_info). */
static int check_reshard_group(const struct scenario *s, const struct plan *p, struct err *e)
{
	int64_t r = s->s.training.fsdp_reshard_after_forward;
	char d[64];

	if (p->fsdp_version != 2 || r < 2 || (r <= p->shard_n && p->shard_n % r == 0))
		return 0;
	snprintf(d, sizeof d, "%lld must divide the shard group of %lld ranks", (long long)r, (long long)p->shard_n);
	return scenario_error(s, e, "training", "fsdp_reshard_after_forward", "%s (a group size to keep a shard over)", d);
}

/* The settings of s that do not go together, located where they were set. */
static int check(const struct scenario *s, struct err *e)
{
	const struct scn_training *t = &s->s.training;
	const struct model *m = &s->model;
	char d[CFG_STR_MAX + 128];

	if (t->strategy == STRAT_SINGLE && s->world != 1) {
		snprintf(d, sizeof d, "%lld", (long long)s->world);
		return scenario_error(s, e, "training", "strategy", "single needs exactly one GPU (nodes x gpus_per_node = %s)", d);
	}
	if (t->strategy == STRAT_DP && s->s.cluster.nodes != 1)
		return scenario_error(s, e, "training", "strategy", "%s", "dp (nn.DataParallel) is one process on one node; use ddp across nodes");
	if (s->world % t->tensor_parallel) {
		snprintf(d, sizeof d, "%lld GPUs", (long long)s->world);
		return scenario_error(s, e, "training", "tensor_parallel", "must divide the %s of the cluster", d);
	}
	if (m->heads % t->tensor_parallel || m->kv_heads % t->tensor_parallel || m->ffn % t->tensor_parallel) {
		snprintf(d, sizeof d, "heads %lld, kv_heads %lld and ffn %lld", (long long)m->heads,
			 (long long)m->kv_heads, (long long)m->ffn);
		return scenario_error(s, e, "training", "tensor_parallel", "must divide the model's %s", d);
	}
	if (t->tensor_parallel > 1 && (t->strategy == STRAT_DP || t->strategy == STRAT_SINGLE))
		return scenario_error(s, e, "training", "tensor_parallel", "%s", "needs a distributed strategy (ddp, zero*, fsdp)");
	if (t->offload != OFFLOAD_NONE && t->strategy < STRAT_ZERO1)
		return scenario_error(s, e, "training", "offload", "%s", "CPU offload needs strategy zero1, zero2, zero3 or fsdp");
	if (t->offload == OFFLOAD_OPTIMIZER_AND_PARAMS && (t->strategy == STRAT_ZERO1 || t->strategy == STRAT_ZERO2))
		return scenario_error(s, e, "training", "offload", "%s", "parameter offload needs zero3 or fsdp (ZeRO-Offload of stages 1-2 moves only the optimizer)");
	if (t->offload == OFFLOAD_OPTIMIZER && t->strategy == STRAT_FSDP)
		return scenario_error(s, e, "training", "offload", "%s", "FSDP's CPUOffload moves parameters, gradients and optimizer together; use optimizer_and_params");
	if (t->framework == FW_DEEPSPEED && (t->strategy == STRAT_DP || t->strategy == STRAT_FSDP))
		return scenario_error(s, e, "training", "framework", "%s", "deepspeed runs single, ddp (stage 0) and zero1-3; dp and fsdp are PyTorch's (framework = pytorch or shardcast)");
	if (check_fsdp2(s, e))
		return e->code;
	if (t->fsdp_reduce_dtype != FDT_DEFAULT && (t->strategy != STRAT_FSDP || t->framework != FW_PYTORCH))
		return scenario_error(s, e, "training", "fsdp_reduce_dtype", "%s", "is PyTorch FSDP's MixedPrecision (strategy = fsdp, framework = pytorch); the others reduce in their gradients' dtype");
	if (t->no_sync != NOSYNC_DEFAULT && !(t->framework == FW_PYTORCH && (t->strategy == STRAT_DDP ||
	    t->strategy == STRAT_FSDP)))
		return scenario_error(s, e, "training", "no_sync", "%s", "is the no_sync() of PyTorch's DDP and FSDP1, or FSDP2's set_requires_gradient_sync(False) (strategy = ddp or fsdp; framework = pytorch); DeepSpeed reduces at its own accumulation boundary");
	if (s->gpu.peak[t->precision] <= 0) {
		snprintf(d, sizeof d, "%s has no %s support (peak_%s = 0 in its catalog entry)", s->gpu.name,
			 scenario_precision_name(t->precision), scenario_precision_name(t->precision));
		return scenario_error(s, e, "training", "precision", "%s", d);
	}
	return 0;
}

int plan_build(struct plan *p, const struct scenario *s, struct err *e)
{
	int rc = check(s, e);

	if (!rc)
		plan_derive(p, &s->s, s->world, s->gpu.compute_capability);
	return rc ? rc : check_reshard_group(s, p, e);
}

const char *plan_profile_name(const struct plan *p)
{
	return scenario_enum_name("training", "framework", p->engine);
}

int plan_profile_load(const struct scenario *s, struct fw_profile *pf, struct err *e)
{
	const char *name = plan_profile_name(&s->plan);
	int k;

	if (strcmp(s->profile.name, name) == 0) {  /* read with the scenario (scenario_load) */
		if (pf != &s->profile)
			*pf = s->profile;
		return 0;
	}
	k = cfg_index(scenario_keys(), "training", "framework");
	return profile_load(name, pf, s->file, k >= 0 ? s->line[k] : 0, e);
}
