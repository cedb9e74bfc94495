/*
 * step.c — building one optimizer step's task graph per strategy and running it
 * (see step.h for what is modelled and why).
 *
 * Sources of the framework behaviour followed here:
 *  - PyTorch DDP (torch/nn/parallel/distributed.py, reducer.cpp): buckets in
 *    reverse parameter order, the first capped at 1 MiB
 *    (_DEFAULT_FIRST_BUCKET_BYTES), the others at bucket_cap_mb; a bucket's
 *    all-reduce is launched when its last gradient is ready; no_sync skips it.
 *  - PyTorch FSDP (torch/distributed/fsdp/_runtime_utils.py): the root keeps its
 *    parameters gathered after forward; _limit_all_gathers blocks the host when
 *    two free events are queued; BACKWARD_PRE prefetches in the pre-backward
 *    hook, BACKWARD_POST in the post-backward hook before the reduce-scatter;
 *    hybrid sharding reduce-scatters in the shard group, then all-reduces the
 *    shard in the replicate group; MixedPrecision gathers and reduces in the
 *    16-bit dtype.
 *  - PyTorch FSDP2 (torch/distributed/fsdp/_fully_shard/, plan.h layout): a
 *    unit's all-gather is preceded by its copy-in on the all-gather streams
 *    (the shards cast to param_dtype, then copied into the flat buffer:
 *    _get_param_all_gather_inputs, all_gather_copy_in) and followed by its
 *    copy-out on the compute stream when the unit's hook waits for it
 *    (foreach_all_gather_copy_out, split_with_sizes_copy); a reduction
 *    copies the unsharded gradients into the reduce-scatter input on the
 *    compute stream (chunk_cat, upcasting to reduce_dtype) and casts the
 *    output into the fp32 sharded gradients after it; each pass is
 *    memory-bound: the bytes it reads and writes over the achievable
 *    bandwidth. The root's pre-backward hook prefetches the last block; the
 *    root is resharded after forward when reshard_after_forward says so; N
 *    keeps slices that the backward all-gather gathers over N ranks. No rate
 *    limiter.
 *  - DeepSpeed ZeRO (runtime/zero/stage_1_and_2.py, stage3.py,
 *    partitioned_param_coordinator.py): reduce_bucket_size buckets, overlap_comm,
 *    allgather_bucket_size after the step, stage-3 per-module fetch with
 *    prefetch up to stage3_prefetch_bucket_size, parameters below
 *    stage3_param_persistence_threshold kept whole.
 *  - nn.DataParallel (torch/nn/parallel/data_parallel.py, comm.py): replicate by
 *    NCCL broadcast every forward, gather of the outputs, reduce_add of the
 *    gradients, threads under one interpreter lock issuing the replicas' ops.
 *  - Megatron-LM tensor parallelism (Shoeybi et al. 2019, §3): one all-reduce
 *    after each row-parallel product in forward, one on the input gradient of
 *    each column-parallel block in backward; vocabulary-parallel embedding.
 * Optimizer memory traffic per parameter: torch.optim's default foreach AdamW
 * makes 8 passes (20 fp32 words: mul_, lerp_, mul_, addcmul_, sqrt, div_, add_,
 * addcdiv_); a fused Adam (DeepSpeed FusedAdam, CPUAdam, shardcast) reads p, g,
 * m, v and writes p, m, v (7 words).
 * Optimizer launches: a foreach pass over T tensors of E elements in all runs
 * max(ceil(T / max_tensors[depth]), ceil(E / (320 x 65536))) kernels, depth
 * being the number of tensor lists it reads or writes (aten/src/ATen/native/
 * cuda/MultiTensorApply.cuh: depth_to_max_tensors {110, 64, 48, 36, 30},
 * depth_to_max_blocks 320, kChunkSize 65536), each pass one Python call; the
 * for-loop implementation (_single_tensor_adam) issues every pass per tensor
 * from Python; the fused one a single depth-4 pass (p, g, m, v). fp16's
 * GradScaler.unscale_ adds a depth-1 pass over the gradients
 * (_amp_foreach_non_finite_check_and_unscale_) and the host waits for it
 * (found_inf.item() in GradScaler._maybe_opt_step); clip_grad_norm_ adds
 * _foreach_norm (reads the gradients) and _foreach_mul_ (rewrites them), with
 * an all-reduce of the norm under FSDP and ZeRO.
 * AccumulateGrad (torch/csrc/autograd/functions/accumulate_grad.h): a
 * parameter whose .grad is None steals the new gradient; one whose .grad
 * exists adds it in place (a read of both, a write: one kernel). Where
 * zero_grad zeroes the gradients instead of setting them to None
 * (set_to_none=False, PyTorch's default before 2.0, whose release notes make
 * set_to_none=True the default), every micro-step adds, and zero_grad issues
 * one fill per parameter tensor from Python: framework_version 1.13,
 * unsharded strategies (FSDP and ZeRO accumulate into their flat buffers).
 * Not modelled: the add of micro-steps after the first under 2.x (the
 * sweep extends a step by T(2) - T(1), which needs the first micro-step to
 * cost what the later ones do).
 */
#include "step.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eager.h"
#include "life.h"
#include "period.h"
#include "wrap.h"
#include "units.h"
#include "vec.h"

enum tag {
	T_DISPATCH, T_WAIT, T_FWD, T_BWD, T_RECOMP, T_OPT, T_AG, T_RS, T_AR, T_TP, T_BCAST,
	T_GATHER, T_REDUCE, T_H2D, T_D2H, T_HOSTOPT, T_ISSUE_COLL, T_HOOKS, T_COPY, T_FLAT, T_SHARD_CAST,
	T_GRAD_ADD, T_COUNT
};

struct step_unit {
	double params;     /* elements per TP rank */
	int first, last;   /* first and last op of the unit in forward order */
	int gathered;      /* gathered (an all-gather issued) and not resharded since */
	int ag;            /* the all-gather task of the current gather, -1 */
	int root;          /* FSDP's root unit */
	int copied;        /* FSDP2: the current gather's copy-out is issued */
	int post;          /* FSDP2: holds post-forward slices (reshard_after_forward = N) */
};

/* A collective whose bytes scale with the micro-batch (tensor-parallel
 * all-reduces of activations, DataParallel's gather of outputs): bytes =
 * x x micro_batch x mult, so step_resimulate can cost it at another batch. */
struct step_dyn {
	int coll;          /* index into the des's colls */
	int op;            /* enum coll_op */
	int grp;           /* DYN_DP (b->gdp) or DYN_TP (b->gtp) */
	double x, mult;    /* bytes per sample, multiplier */
};

enum { DYN_DP, DYN_TP };

/* One task of a stream whose least time varies with the micro-batch
 * (step_bound): its time is a constant, an op's forward or backward kernel
 * time, or that of a collective whose bytes scale with the micro-batch. */
enum { BT_CONST, BT_FWD, BT_BWD, BT_DYN };
struct step_bterm {
	double v;                  /* s: BT_CONST's time */
	int idx;                   /* the op (BT_FWD, BT_BWD) or the index into dyn (BT_DYN) */
	unsigned char stream, kind;/* its stream; BT_* */
};

#define LIMITER_CAP 64

struct bld {
	struct step_sim *ss;
	struct des *d;
	const struct scenario *s;
	const struct graph *g;
	const struct compute_eff *ce;
	const struct plan *p;      /* what the strategy does (s->plan) */
	int tp, dp, gpn, nodes, accum, algo, recompute;
	int flat;                  /* PyTorch FSDP's flat parameters (FlatParamHandle) */
	double B;                  /* micro-batch, samples */
	int prec;                  /* enum precision of the products */
	double peak, peak_vec;     /* FLOP/s: products at the precision, other ops (CUDA cores) */
	double straggle;           /* >= 1: the slowest of the job's GPUs against a median one */
	double mem_bw;             /* bytes/s achievable */
	double wbytes, gbytes;     /* bytes per weight read / gradient written by kernels */
	double pcomm, gcomm;       /* bytes per element of gathered parameters / reduced gradients */
	int cast_weights;          /* autocast casts fp32 weights to 16 bits each forward */
	double opt_bytes;          /* optimizer memory traffic per parameter on the GPU */
	int opt_impl;              /* enum opt_impl (resolved) */
	double opt_tensors;        /* parameter tensors the optimizer steps on this rank */
	double host_opt_bytes;     /* the same on the host (offload) */
	double disp_f, disp_b, disp_c;  /* s host time per forward op, backward op, collective */
	double disp_op;            /* s host time per Python-called aten op (optimizer) */
	double disp_uf, disp_ub;   /* s host time per FSDP unit, forward and backward */
	int offload;
	/* streams */
	int cpu, gpu, pg, tps, rep, h2d, d2h, host, gpu1, cpu1;
	/* groups */
	struct coll_group gdp, gtp, gshard, grep;
	struct coll_group gpost;   /* FSDP2 reshard_after_forward = N: the post-forward group */
	int per_param;             /* FSDP2's units (plan.h layout) */
	int shard_n;               /* ranks one unit's parameters are sharded over */
	/* the next kernel waits for these */
	int pend[16], npend;
	/* gather units (fsdp, zero3) */
	struct step_unit *u;
	int nu, has_units;
	int wrapped;               /* wrap units (FSDP, shardcast zero3), gathered and reduced per unit */
	int modules;               /* DeepSpeed ZeRO-3's per-module fetch */
	int lim[LIMITER_CAP], lhead, ltail;  /* FSDP free-event queue */
	/* gradient bucket (zero2, zero3) */
	double bucket;             /* elements accumulated */
	int sync;                  /* this backward reduces its gradients (not a no_sync micro-step) */
	int lag;                   /* the unit whose post-backward waits for the next unit's backward
				      (plan.h post_lag), -1 none */
	/* periodic blocks (step.h) */
	const unsigned char *skip; /* (nops) ops left out, NULL none */
	struct cut *cut;           /* the boundaries compared around the blocks left out, NULL none */
	int oom;
};

/* What the builder holds at a block boundary, relative to it: task indices
 * as offsets from the number of tasks issued, units by their op's offset in
 * the periods before and after the boundary. Two boundaries whose snapshots
 * are equal issue the same tasks from there on while the blocks repeat. */
#define SNAP_UNITS 64
struct snap {
	double bucket;
	int npend, nlim, nu, over;
	long long pend[16];
	long long lim[LIMITER_CAP];
	long long last[DES_MAX_STREAMS];
	long long u[SNAP_UNITS][3];  /* op offset, gathered, its all-gather */
};

/* The blocks left out of a shorter step, lo .. hi - 1, and the boundaries
 * compared: forward the entries of blocks lo - 2p, lo - p and of the cut (hi,
 * standing for lo); backward the entries of the cut (lo - 1, coming from hi),
 * lo - 1 - p and lo - 1 - 2p. */
struct cut {
	int lo, hi, p;
	int fop[3], bop[3];        /* the first op of each forward boundary's block, the last
				      op of each backward one's */
	int n[2];                  /* snapshots taken in this pass, forward and backward */
	int zop[2];                /* the op starting the repeating blocks in each pass */
	int zone;                  /* tasks issued before the repeating blocks in this pass */
	struct snap sn[3];
	int ok[2];                 /* every pass compared equal so far (forward, backward) */
};

/* The shorter steps of a step whose blocks repeat (step.h). */
struct step_blocks {
	struct step_sim sub;       /* the shorter step (every block of it simulated, its graph) */
	int made;                  /* sub created */
	struct period per;         /* the blocks that repeat */
	int lo, hi;                /* sub leaves out blocks lo .. hi - 1 */
	int64_t left;              /* periods it leaves out */
	int planned;               /* per, lo, hi and left hold for the last settings */
	unsigned char *src;        /* (sub's tasks) cut_timing's */
	int capsrc;
};

/* ---- issuing tasks ------------------------------------------------------------ */

/* Whether op i is in the blocks a shorter step leaves out (step.h). */
static inline int skipped(const struct bld *b, int i)
{
	return b->skip && b->skip[i];
}


static void dep(struct bld *b, int from, int to)
{
	if (from >= 0 && to >= 0 && des_dep(b->d, from, to))
		b->oom = 1;
}

static void pend(struct bld *b, int t)
{
	if (t < 0)
		return;
	if (b->npend == (int)(sizeof b->pend / sizeof b->pend[0])) {
		b->oom = 1;
		return;
	}
	b->pend[b->npend++] = t;
}

/* A host task of dur seconds on stream cpu. */
static int host_work(struct bld *b, int cpu, double dur, int label, int tag)
{
	int t = des_work(b->d, cpu, dur, label, tag);

	if (t < 0)
		b->oom = 1;
	return t;
}

/* A kernel of dur seconds on GPU stream gpu, issued by host stream cpu after disp
 * seconds; it waits for the pending tasks. */
static int kernel_on(struct bld *b, int cpu, int gpu, double dur, double disp, int label, int tag)
{
	int c = host_work(b, cpu, disp, label, T_DISPATCH);
	int k = des_work(b->d, gpu, dur, label, tag);
	int i;

	if (k < 0) {
		b->oom = 1;
		return -1;
	}
	dep(b, c, k);
	for (i = 0; i < b->npend; i++)
		dep(b, b->pend[i], k);
	b->npend = 0;
	return k;
}

static int kernel(struct bld *b, double dur, double disp, int label, int tag)
{
	return kernel_on(b, b->cpu, b->gpu, dur, disp, label, tag);
}

/* The host waits until task t is done (an event.synchronize()). */
static void host_wait(struct bld *b, int t)
{
	int w;

	if (t < 0)
		return;
	w = host_work(b, b->cpu, 0, -1, T_WAIT);
	dep(b, t, w);
}

/* A collective of op on bytes over group g on NCCL stream st, issued by the
 * host, started after task after. */
static int collective(struct bld *b, int st, int op, const struct coll_group *g, double bytes,
		      int after, int label, int tag)
{
	struct coll_cost c;
	int h = host_work(b, b->cpu, b->disp_c, tag, T_ISSUE_COLL), t;

	coll_cost(op, b->algo, bytes, g, &c);
	t = des_coll(b->d, st, &c, label, tag);
	if (t < 0) {
		b->oom = 1;
		return -1;
	}
	dep(b, h, t);
	dep(b, after, t);
	return t;
}

static const struct coll_group *dyn_group(const struct bld *b, int grp)
{
	return grp == DYN_TP ? &b->gtp : &b->gdp;
}

/* A collective of x x micro_batch x mult bytes, recorded for step_resimulate. */
static int collective_scaled(struct bld *b, int st, int op, int grp, double x, double mult, int after,
			     int label, int tag)
{
	struct step_sim *ss = b->ss;
	int t = collective(b, st, op, dyn_group(b, grp), x * b->B * mult, after, label, tag);

	if (t < 0)
		return -1;
	if (vec_grow((void **)&ss->dyn, &ss->capdyn, ss->ndyn + 1, sizeof *ss->dyn)) {
		b->oom = 1;
		return -1;
	}
	ss->dyn[ss->ndyn++] = (struct step_dyn){b->d->tasks[t].coll, op, grp, x, mult};
	return t;
}

/* A copy of bytes between host and device on copy engine st after task after. */
static int copy(struct bld *b, int st, double bytes, int after, int label, int tag)
{
	const struct link *l = &b->ce->host_link;
	int t = des_work(b->d, st, bytes / (l->bandwidth * l->efficiency) + l->latency, label, tag);

	if (t < 0)
		b->oom = 1;
	dep(b, after, t);
	return t;
}

static int last_on(const struct bld *b, int st)
{
	return st >= 0 ? b->d->streams[st].last : -1;
}

/* ---- kernel times -------------------------------------------------------------- */

/* What every op's kernel times share (op_time). */
struct op_consts {
	double a;              /* attention heads per TP rank */
	double hd;             /* head size (elements) */
	double gap;            /* s: the launch gap before each kernel */
	double bw;             /* bytes/s: the memory bandwidth a kernel reaches */
};

/* What op_time reads of the build besides the graph, its kernel tables (ex),
 * the micro-batch and the device's efficiencies (b->ce): a field op_time
 * comes to read must be here, or step_kernel_least's memo answers for
 * another build (op_in_of). Of a sweep's candidates on one graph, those of
 * one precision, autocast and cluster size meet the same set (wbytes and
 * gbytes follow the precision and autocast today: plan.c): bench/sweep.ini's
 * tables ask for 14,701 micro-batches' kernels in 1,195 calls under 64 sets.
 * Doubles first, no padding. */
struct op_in {
	struct op_consts k;
	double peak, peak_vec, mem_bw, wbytes, gbytes, straggle;
	int prec, cast_weights;
};

/* The most micro-batches step_kernel_least's memo holds (a graph of
 * bench/sweep-1m.ini's tables meets up to 768 of them under 12 sets). */
#define STEP_KMEMO_MAX 4096

/* One micro-batch of one struct op_in in step_kernel_least's memo. */
struct kmemo {
	int in;                /* index into ss->kin */
	double B;
};

static struct op_consts op_consts(const struct bld *b)
{
	const struct model *m = &b->s->model;

	return (struct op_consts){(double)(m->heads / b->tp), (double)m->head_dim, b->ce->kernel_gap,
			     b->mem_bw * b->ce->memory_efficiency};
}

/* The forward and backward kernel times of op i (into ss->tf, ss->tb). */
static inline void op_time(struct bld *b, const struct op_consts *k, int i)
{
	const struct graph *g = b->g;
	const struct gop *o = &g->ops[i];
	const double a = k->a, hd = k->hd, gap = k->gap, bw = k->bw;
	const struct eager_extra *ex;
	double act = 0, mm = 0, nn = 0, kk = 0, w = o->params, peak = b->peak_vec, f, bk;
	int j;

	for (j = 0; j < o->nin; j++)
		act += graph_tensor_bytes(g, o->in[j]);
	if (o->out >= 0)
		act += graph_tensor_bytes(g, o->out);
	act *= b->B;
	if (o->kind == OP_MATMUL) {
		mm = o->m * b->B;
		nn = o->n;
		kk = o->k;
		w = o->k * o->n;  /* a tied head reads the embedding's weight */
		peak = b->peak;
	} else if ((o->kind == OP_ATTN_SCORE || o->kind == OP_ATTN_CTX) && o->out >= 0) {
		/* batched products over (batch, heads): scores (Sq x d)(d x Sk),
		 * context (Sq x Sk)(Sk x d); shapes from the FLOPs and output size */
		double out = g->t[o->out].elems;
		if (o->kind == OP_ATTN_SCORE) {
			mm = nn = sqrt(out / a);
			kk = hd;
		} else {
			mm = out / (a * hd);
			nn = hd;
			kk = o->flops_fwd / (2 * out);
		}
		w = 0;
		peak = b->peak;
	} else if (o->kind == OP_EMBED) {
		w = 0;  /* a lookup reads the rows it returns (counted in act) */
	} else if (o->kind == OP_ATTN) {
		/* a fused kernel: compute-bound at its own efficiency (compute.h) */
		f = compute_attention(b->ce, o->attn, 0, b->peak, o->flops_fwd * b->B, o->n, hd);
		bk = compute_attention(b->ce, o->attn, 1, b->peak, o->flops_bwd * b->B, o->n, hd);
		ex = &b->ss->ex[i];  /* the varlen interface's copies (eager.h) */
		f += ex->bytes_fwd * b->B / bw + ex->kernels_fwd * gap;
		bk += ex->bytes_bwd * b->B / bw + ex->kernels_bwd * gap;
		b->ss->tf[i] = f > 0 ? (f + gap) * b->straggle : 0;
		b->ss->tb[i] = bk > 0 ? (bk + gap) * b->straggle : 0;
		return;
	}
	f = compute_roofline(b->ce, b->prec, peak, b->mem_bw, o->flops_fwd * b->B, mm, nn, kk,
			     act + w * b->wbytes);
	bk = compute_roofline(b->ce, b->prec, peak, b->mem_bw, o->flops_bwd * b->B, mm, nn, kk,
			      2 * act + w * b->wbytes + o->params * b->gbytes);
	ex = &b->ss->ex[i];  /* formulas written as tensor expressions */
	f += ex->bytes_fwd * b->B / bw + ex->kernels_fwd * gap;
	bk += ex->bytes_bwd * b->B / bw + ex->kernels_bwd * gap;
	if (b->cast_weights && o->kind == OP_MATMUL && o->params > 0) {
		/* autocast: fp32 weight -> 16-bit copy in forward (4 + 2 bytes), its
		 * gradient 16-bit -> fp32 in backward (2 + 4 bytes), separate kernels */
		f += o->params * 6 / bw + gap;
		bk += o->params * 6 / bw + gap;
	}
	b->ss->tf[i] = f > 0 ? (f + gap) * b->straggle : 0;
	b->ss->tb[i] = bk > 0 ? (bk + gap) * b->straggle : 0;
}

static void op_times(struct bld *b)
{
	const struct op_consts k = op_consts(b);
	int i, j;

	for (i = 0; i < b->g->nops; i++) {
		if (skipped(b, i)) {  /* never issued */
			b->ss->tf[i] = b->ss->tb[i] = 0;
			continue;
		}
		if ((j = b->ss->rep[i]) != i && !skipped(b, j)) {  /* the same as op j (op_classes) */
			b->ss->tf[i] = b->ss->tf[j];
			b->ss->tb[i] = b->ss->tb[j];
			continue;
		}
		op_time(b, &k, i);
	}
}

/* Whether eager extras x and y are the same bits where op_times reads them. */
static int same_extra(const struct eager_extra *x, const struct eager_extra *y)
{
	return memcmp(&x->kernels_fwd, &y->kernels_fwd, sizeof x->kernels_fwd) == 0 &&
		memcmp(&x->kernels_bwd, &y->kernels_bwd, sizeof x->kernels_bwd) == 0 &&
		memcmp(&x->bytes_fwd, &y->bytes_fwd, sizeof x->bytes_fwd) == 0 &&
		memcmp(&x->bytes_bwd, &y->bytes_bwd, sizeof x->bytes_bwd) == 0;
}

/* Which ops of the graph being built get the same kernel times (ss->rep):
 * op i those of op g->same[i] (graph.h: the same kind, shapes, FLOPs and
 * tensor sizes, all that op_times reads of the graph) when their eager
 * extras (ss->ex, this build's) are the same too and neither is left out;
 * op_times computes the first and copies it (the same function of the same
 * doubles: the same bits). With ss->each_op every op stands alone. */
static void op_classes(struct bld *b)
{
	struct step_sim *ss = b->ss;
	int i, j;

	for (i = 0; i < b->g->nops; i++) {
		j = b->g->same[i];
		ss->rep[i] = !ss->each_op && j != i && !skipped(b, i) && !skipped(b, j) &&
			same_extra(&ss->ex[i], &ss->ex[j]) ? j : i;
	}
}

/* ---- tensor parallelism ------------------------------------------------------- */

/* Marks, for each row-parallel product r, the first column-parallel product of
 * its sublayer: after that one's backward the input gradient is all-reduced. */
static void tp_marks(struct bld *b)
{
	const struct graph *g = b->g;
	int i, r, prev = -1;

	for (i = 0; i < g->nops; i++)
		b->ss->tpb[i] = b->ss->tpx[i] = 0;
	if (b->tp <= 1)
		return;
	for (r = 0; r < g->nops; r++) {
		const struct gop *o = &g->ops[r];
		double x;
		if (o->kind == OP_EMBED && o->out >= 0 && o->params > 0) {
			prev = r;
			continue;
		}
		if (!o->tp_allreduce)
			continue;
		x = o->out >= 0 ? graph_tensor_bytes(g, o->out) : 0;
		for (i = prev + 1; i < r; i++)
			if (g->ops[i].kind == OP_MATMUL && g->ops[i].layer == o->layer) {
				b->ss->tpx[i] = x;
				b->ss->tpb[i] = x * b->B;
				break;
			}
		prev = r;
	}
	/* the vocabulary-parallel head's input gradient */
	for (i = g->nops - 1; i >= 0; i--)
		if (g->ops[i].kind == OP_MATMUL && g->ops[i].layer < 0 && strcmp(g->ops[i].base, "lm_head") == 0 &&
		    g->ops[i].nin > 0) {
			b->ss->tpx[i] = graph_tensor_bytes(g, g->ops[i].in[0]);
			b->ss->tpb[i] = b->ss->tpx[i] * b->B;
			break;
		}
}

/* tp_marks at another micro-batch of the graph it marked: the bytes per
 * sample (tpx) are the graph's, the bytes scale with b->B (tpb = tpx x B, as
 * tp_marks computes them; zero where tpx is). */
static void tp_scale(struct bld *b)
{
	int i;

	for (i = 0; i < b->g->nops; i++)
		b->ss->tpb[i] = b->ss->tpx[i] * b->B;
}

static int tp_forward_allreduce(const struct bld *b, const struct gop *o)
{
	return b->tp > 1 && (o->tp_allreduce || (o->kind == OP_EMBED && o->params > 0));
}

/* The all-reduce of x bytes per sample of activations or their gradients. */
static void tp_allreduce(struct bld *b, double x, int after, int label)
{
	int t = collective_scaled(b, b->tps, COLL_ALLREDUCE, DYN_TP, x, 1, after, label, T_TP);
	pend(b, t);
}

/* ---- gather units (FSDP units, ZeRO-3 modules) --------------------------------- */

static int grow_units(struct step_sim *ss, int n)
{
	struct step_unit *nu;

	if (n <= ss->capunits)
		return 0;
	nu = realloc(ss->units, (size_t)n * sizeof *nu);
	if (!nu)
		return -1;
	ss->units = nu;
	ss->capunits = n;
	return 0;
}

/* FSDP units from the wrap policy, as wrap.h defines them for every model
 * (the memory walk's units too): the root, then every block
 * (transformer_based_wrap), none (no_wrap), or what size_based_wrap wraps,
 * nested (a stack around its Linear layers); each unit's parameters are those
 * it owns. The hooks find them by op (unit_lists), prefetch by wrap.h's
 * order (ss->unx). */
static int fsdp_units(struct bld *b)
{
	const struct graph *g = b->g;
	struct wrap_units wu;
	int u;

	if (wrap_units_build(&wu, g, b->p->wrap, b->p->wrap_min_params))
		return -1;
	if (grow_units(b->ss, wu.n) || vec_grow((void **)&b->ss->unx, &b->ss->capunx, 2 * wu.n, sizeof *b->ss->unx)) {
		wrap_units_free(&wu);
		return -1;
	}
	b->u = b->ss->units;
	for (u = 0; u < wu.n; u++) {
		memset(&b->u[u], 0, sizeof b->u[u]);
		b->u[u].first = wu.u[u].first;
		b->u[u].last = wu.u[u].last;
		b->u[u].root = wu.u[u].root;
		b->u[u].params = (double)wu.u[u].elems;
		b->u[u].ag = -1;
	}
	memcpy(b->ss->unx, wu.next, 2 * (size_t)wu.n * sizeof *wu.next);
	b->nu = wu.n;
	wrap_units_free(&wu);
	return 0;
}

/* Units a before b in a list of those starting (or ending) at one op: the
 * outer first (the longer range; of two alike, the later made: wrap.c makes
 * the inner first). */
static int outer_first(const void *x, const void *y, void *ctx)
{
	const struct step_unit *u = ctx;
	int a = *(const int *)x, b = *(const int *)y, la = u[a].last - u[a].first, lb = u[b].last - u[b].first;

	return la != lb ? (la < lb) - (la > lb) : (a < b) - (a > b);
}

/* ss->us / ss->ue: the units starting and ending at each op, outer first
 * (none without units). Returns 0 or -1 (out of memory). */
static int unit_lists(struct bld *b)
{
	struct step_sim *ss = b->ss;
	int n = b->g->nops, i, u, pass, *off, *list;

	if (vec_grow((void **)&ss->uso, &ss->capuso, n + 1, sizeof *ss->uso) ||
	    vec_grow((void **)&ss->ueo, &ss->capueo, n + 1, sizeof *ss->ueo) ||
	    vec_grow((void **)&ss->us, &ss->capus, b->nu + 1, sizeof *ss->us) ||
	    vec_grow((void **)&ss->ue, &ss->capue, b->nu + 1, sizeof *ss->ue))
		return -1;
	for (pass = 0; pass < 2; pass++) {
		off = pass ? ss->ueo : ss->uso;
		list = pass ? ss->ue : ss->us;
		memset(off, 0, (size_t)(n + 1) * sizeof *off);
		for (u = 0; u < b->nu; u++)
			off[(pass ? b->u[u].last : b->u[u].first) + 1]++;
		for (i = 0; i < n; i++)
			off[i + 1] += off[i];
		for (u = 0; u < b->nu; u++)
			list[off[pass ? b->u[u].last : b->u[u].first]++] = u;
		for (i = n; i > 0; i--)  /* the counting sort moved each start on: back */
			off[i] = off[i - 1];
		off[0] = 0;
		for (i = 0; i < n; i++)
			if (off[i + 1] - off[i] > 1)
				qsort_r(list + off[i], (size_t)(off[i + 1] - off[i]), sizeof *list, outer_first, b->u);
	}
	return 0;
}

/* ZeRO-3 modules: every op holding more than the persistence threshold. */
static int zero3_units(struct bld *b)
{
	const struct graph *g = b->g;
	double thr = b->s->s.training.zero_param_persistence_threshold;
	int i, n = 0;

	if (grow_units(b->ss, g->nops))
		return -1;
	b->u = b->ss->units;
	for (i = 0; i < g->nops; i++) {
		b->ss->unit_of[i] = -1;
		if (g->ops[i].params <= thr)
			continue;
		memset(&b->u[n], 0, sizeof b->u[n]);
		b->u[n].params = g->ops[i].params;
		b->u[n].first = b->u[n].last = i;
		b->u[n].ag = -1;
		b->ss->unit_of[i] = n++;
	}
	b->nu = n;
	return 0;
}

/* FSDP's rate limiter: with two free events queued, the host waits for the oldest. */
static void limiter_wait(struct bld *b)
{
	if (!b->p->limit_all_gathers)
		return;
	if (b->ltail - b->lhead >= 2)
		host_wait(b, b->lim[b->lhead++ % LIMITER_CAP]);
}

static void limiter_push(struct bld *b, int free_event)
{
	if (!b->p->limit_all_gathers)
		return;
	if (b->ltail - b->lhead == LIMITER_CAP)
		b->lhead++;  /* older events precede newer ones on the compute stream */
	b->lim[b->ltail++ % LIMITER_CAP] = free_event;
}

static const struct coll_group *shard_group(const struct bld *b)
{
	return b->p->hybrid ? &b->gshard : &b->gdp;
}

/* A memory-bound pass of bytes read plus written, at the slowest GPU's pace. */
static double pass_time(const struct bld *b, double bytes)
{
	return (bytes / (b->mem_bw * b->ce->memory_efficiency) + b->ce->kernel_gap) * b->straggle;
}

/* FSDP MixedPrecision's 16-bit copy of a unit's fp32 shard before its
 * all-gather (flat_param.py _use_low_precision_shard: a read of the shard, a
 * write of the copy), on FSDP's pre-unshard stream, which the all-gather
 * follows: a task before it on the NCCL stream. */
static void shard_cast(struct bld *b, double n)
{
	if (des_work(b->d, b->pg, pass_time(b, n * (4 + b->p->w.gather_src)), -1, T_SHARD_CAST) < 0)
		b->oom = 1;
}

/* FSDP2's copy-in before a unit's all-gather, on the all-gather stream: the
 * shards (or post-forward slices) cast to param_dtype, then copied into the
 * flat buffer; without a cast, copied into it. */
static void copy_in(struct bld *b, int u)
{
	const struct plan_widths *w = &b->p->w;
	struct step_unit *un = &b->u[u];
	double n = un->params / (un->post ? b->gpost.n : b->shard_n);
	double src = un->post ? w->gathered : w->params;
	double bytes = w->gather_src ? n * (src + 2.0 * w->gather_src + w->gather_buf) : n * (src + w->gather_buf);

	if (des_work(b->d, b->pg, pass_time(b, bytes), u, T_COPY) < 0)
		b->oom = 1;
}

static void gather(struct bld *b, int u)
{
	struct step_unit *un = &b->u[u];
	int h2d = -1;

	if (un->gathered)
		return;
	if (!b->p->gathers) {
		un->gathered = 1;  /* nothing is sharded */
		return;
	}
	limiter_wait(b);
	if (b->offload == OFFLOAD_OPTIMIZER_AND_PARAMS)
		h2d = copy(b, b->h2d, un->params / b->shard_n * b->pcomm, -1, u, T_H2D);
	if (b->per_param)
		copy_in(b, u);
	else if (b->flat && b->p->w.gather_src)
		shard_cast(b, un->params / b->shard_n);
	un->ag = collective(b, b->pg, COLL_ALLGATHER, un->post ? &b->gpost : shard_group(b), un->params * b->pcomm,
			    h2d, u, T_AG);
	un->gathered = 1;
	un->copied = 0;
	un->post = 0;
}

/* The unit's hook waits for its all-gather; FSDP2 then copies the flat
 * buffer out into the parameters, on the compute stream. */
static void wait_gather(struct bld *b, int u)
{
	struct step_unit *un = &b->u[u];

	pend(b, un->ag);
	if (!b->per_param || un->copied || !b->p->gathers)
		return;
	kernel(b, pass_time(b, un->params * (b->p->w.gather_buf + b->p->w.gathered)), 0, u, T_COPY);
	un->copied = 1;
}

/* The unit after u in forward (dir = +1) or backward (dir = -1) order, -1
 * none: FSDP's units in wrap.h's order (an outer unit before those inside
 * it), past those a shorter step leaves out; ZeRO-3's modules by op. */
static int next_unit(const struct bld *b, int u, int dir)
{
	int i = dir > 0 ? b->u[u].last + 1 : b->u[u].first - 1;

	if (b->wrapped) {
		int v = b->ss->unx[2 * u + (dir > 0)];
		while (v >= 0 && skipped(b, dir > 0 ? b->u[v].first : b->u[v].last))
			v = b->ss->unx[2 * v + (dir > 0)];
		return v;
	}
	for (; i >= 0 && i < b->g->nops; i += dir) {
		int v = b->ss->unit_of[i];
		if (v >= 0 && v != u && !skipped(b, i))
			return v;
	}
	return -1;
}

/* Prefetch after unit u in direction dir: FSDP one unit; ZeRO-3 modules up to
 * stage3_prefetch_bucket_size elements. */
static void prefetch(struct bld *b, int u, int dir)
{
	double budget = b->s->s.training.zero_prefetch_bucket_size;
	int v = next_unit(b, u, dir);

	if (b->wrapped) {
		if (v >= 0)
			gather(b, v);
		return;
	}
	while (v >= 0 && budget >= b->u[v].params) {
		budget -= b->u[v].params;
		gather(b, v);
		v = next_unit(b, v, dir);
	}
}

static int reshard_after_forward(const struct bld *b, int u)
{
	if (b->modules)
		return 1;
	return b->u[u].root ? b->p->reshard_root : b->p->reshard_fwd;
}

static void pre_forward(struct bld *b, int u)
{
	if (b->wrapped)
		host_work(b, b->cpu, b->disp_uf, u, T_HOOKS);
	gather(b, u);
	wait_gather(b, u);
	if (b->modules || b->p->fwd_prefetch)
		prefetch(b, u, +1);
}

static void post_forward(struct bld *b, int u, int last_kernel)
{
	if (!b->p->gathers)
		return;
	if (!reshard_after_forward(b, u))
		return;
	b->u[u].gathered = 0;
	b->u[u].post = b->per_param && b->p->reshard_group > 1;
	limiter_push(b, last_kernel);
}

static void pre_backward(struct bld *b, int u)
{
	gather(b, u);
	wait_gather(b, u);
	if (b->modules || b->p->bwd_prefetch == PREFETCH_BACKWARD_PRE)
		prefetch(b, u, -1);
}

/* FSDP2's reduce-scatter copy-in, on the compute stream after the unit's
 * backward: the unsharded gradients read, the input written in reduce_dtype.
 * Returns the pass. */
static int rs_copy_in(struct bld *b, double n, int after, int label)
{
	const struct plan_widths *w = &b->p->w;

	pend(b, after);
	return kernel(b, pass_time(b, n * (w->unsharded_grad + w->reduced)), 0, label, T_COPY);
}

/* FSDP2's cast of the reduced shard into the fp32 sharded gradients, on the
 * stream of the reduction (a view when the dtypes agree). */
static void rs_cast(struct bld *b, double n, int st)
{
	const struct plan_widths *w = &b->p->w;

	if (w->reduced == w->grad_shard)
		return;
	if (des_work(b->d, st, pass_time(b, n / b->shard_n * (w->reduced + w->grad_shard)), -1, T_COPY) < 0)
		b->oom = 1;
}

/* Gradient reduction of n elements after task after: FSDP's, ZeRO's. */
static void reduce_grads(struct bld *b, double n, int after, int label)
{
	int t, d2h_after;

	if (n <= 0)
		return;
	if (b->per_param)
		after = rs_copy_in(b, n, after, label);
	if (b->wrapped && !b->p->gathers) {
		t = collective(b, b->pg, COLL_ALLREDUCE, &b->gdp, n * b->gcomm, after, label, T_AR);
		d2h_after = t;
	} else {
		t = collective(b, b->pg, COLL_REDUCE_SCATTER, shard_group(b), n * b->gcomm, after, label, T_RS);
		d2h_after = t;
		if (b->p->hybrid && b->grep.n > 1)
			d2h_after = collective(b, b->rep, COLL_ALLREDUCE, &b->grep, n / b->shard_n * b->gcomm,
					       t, label, T_AR);
		if (b->per_param)
			rs_cast(b, n, b->p->hybrid && b->grep.n > 1 ? b->rep : b->pg);
	}
	if (b->offload != OFFLOAD_NONE)
		copy(b, b->d2h, n / b->shard_n * b->gcomm, d2h_after, label, T_D2H);
}

/* One unit's flat-gradient passes (step.h), issued on the compute stream. */
int step_flat_grad(const struct plan *p, double n, double *bytes)
{
	double g = p->w.unsharded_grad, r = p->reduce_bytes, sh = n / (double)p->shard_n;
	int k = 1;

	*bytes = 2 * n * g;
	if (p->w.flat_cast) {
		*bytes += n * (g + p->w.flat_cast);
		k++;
	}
	if (p->grad_predivide > 1) {
		*bytes += 2 * n * r;
		k++;
	}
	if (p->grad_postdivide > 1) {
		*bytes += 2 * sh * r;
		k++;
	}
	if (r != p->w.grad_shard && p->w.grad_shard) {
		*bytes += sh * (r + p->w.grad_shard);
		k++;
	}
	return k;
}

static int flat_grad(struct bld *b, int u)
{
	double bytes;
	int k = step_flat_grad(b->p, b->u[u].params, &bytes);

	return kernel(b, (bytes / (b->mem_bw * b->ce->memory_efficiency) + k * b->ce->kernel_gap) * b->straggle,
		      k * b->disp_op, -1, T_FLAT);
}

/* A unit's post-backward hook: it frees the gathered parameters (but those a
 * no_sync micro-step keeps, plan.h no_sync_keeps_gathered), prefetches under
 * backward_post, and reduces the unit's gradient unless in no_sync
 * (_post_backward_hook returns before _reduce_grad: the unsharded gradient
 * stays for the next micro-step to add into). */
static void post_backward(struct bld *b, int u, int last_kernel)
{
	if (b->wrapped) {
		host_work(b, b->cpu, b->disp_ub, u, T_HOOKS);
		if (b->p->gathers && (b->sync || !b->p->no_sync_keeps_gathered)) {
			b->u[u].gathered = 0;
			limiter_push(b, last_kernel);
		}
		if (b->p->bwd_prefetch == PREFETCH_BACKWARD_POST)
			prefetch(b, u, -1);
		if (!b->sync) {  /* autograd's concatenation into the flat gradient, kept (step.h) */
			if (b->flat && b->u[u].params > 0)
				kernel(b, pass_time(b, 2 * b->u[u].params * b->p->w.unsharded_grad), b->disp_op, -1, T_FLAT);
			return;
		}
		if (b->flat && b->u[u].params > 0)
			last_kernel = flat_grad(b, u);
		reduce_grads(b, b->u[u].params, last_kernel, u);
		return;
	}
	b->u[u].gathered = 0;  /* ZeRO-3 releases the module */
}

/* ---- gradient buckets ----------------------------------------------------------- */

/* DDP's buckets: reverse parameter order, the first capped at 1 MiB, then at
 * bucket_cap_mb; a bucket closes with the tensor that reaches the cap. */
static void ddp_buckets(struct bld *b)
{
	const struct graph *g = b->g;
	double cap = 1 << 20, fill = 0;
	int i, last = -1;

	for (i = 0; i < g->nops; i++)
		b->ss->bkt[i] = 0;
	for (i = g->nops - 1; i >= 0; i--) {
		if (g->ops[i].params <= 0)
			continue;
		fill += g->ops[i].params * b->gcomm;
		last = i;
		if (fill >= cap) {
			b->ss->bkt[i] = fill;
			fill = 0;
			cap = b->s->s.training.ddp_bucket_mb * (1 << 20);
		}
	}
	if (fill > 0 && last >= 0)
		b->ss->bkt[last] = fill;
}

/* A gradient of op i became ready at kernel k. */
static void grad_ready(struct bld *b, int i, int k, int sync)
{
	double p = b->g->ops[i].params;

	if (p <= 0)
		return;
	if (b->p->reduce == REDUCE_DDP && sync && b->ss->bkt[i] > 0)
		collective(b, b->pg, COLL_ALLREDUCE, &b->gdp, b->ss->bkt[i], k, i, T_AR);
	if (b->p->reduce == REDUCE_BUCKETS) {
		b->bucket += p;
		if (b->bucket >= b->s->s.training.zero_reduce_bucket_size) {
			reduce_grads(b, b->bucket, k, i);
			b->bucket = 0;
		}
	}
}

/* ---- periodic blocks: the builder's side (step.h) ---------------------------------- */

/* Task t as a snapshot holds it: issued since the pass reached the repeating
 * blocks, as an offset from base (the tasks issued at this boundary); issued
 * before (a unit's forward all-gather in backward, the previous micro-step),
 * as "old": such a task is done before the blocks it would delay; none,
 * INT_MIN. */
static long long rel(const struct bld *b, int t, int base)
{
	if (t < 0)
		return INT_MIN;
	return t >= b->cut->zone ? (long long)t - base : 1LL << 40;
}

/* Records the units starting in blocks first .. first + p - 1 into sn, their
 * ops as offsets from the window's first op plus tag. */
static void snap_units(const struct bld *b, struct snap *sn, int first, int p, int base, int tag)
{
	const struct graph *g = b->g;
	int i, k, u, lo, hi;

	if (!b->has_units || first < 0 || first + p > g->nblocks)
		return;
	lo = g->block_first[first];
	hi = life_block_last(g, first + p - 1);
	for (i = lo; i <= hi; i++)
		for (k = b->ss->uso[i]; k < b->ss->uso[i + 1]; k++) {
			u = b->ss->us[k];
			if (b->u[u].root)
				continue;
			if (sn->nu == SNAP_UNITS) {
				sn->over = 1;
				return;
			}
			sn->u[sn->nu][0] = i - lo + tag;
			sn->u[sn->nu][1] = b->u[u].gathered;
			sn->u[sn->nu++][2] = rel(b, b->u[u].ag, base);
		}
}

/* The builder's state at a boundary whose next period starts at block ahead
 * and whose last period started at block behind. */
static void snapshot(const struct bld *b, struct snap *sn, int ahead, int behind)
{
	const struct des *d = b->d;
	int base = d->ntasks, i;

	memset(sn, 0, sizeof *sn);
	sn->bucket = b->bucket;
	sn->npend = b->npend;
	for (i = 0; i < b->npend; i++)
		sn->pend[i] = rel(b, b->pend[i], base);
	/* the rate limiter waits for its oldest event once two are queued: where
	 * the queue holds two or more, the last two are what a repeating block
	 * pushed and pops (one grown by a pass that never waits, shard_grad_op's
	 * backward, is not read again before the blocks are done) */
	sn->nlim = b->ltail - b->lhead < 2 ? b->ltail - b->lhead : 2;
	for (i = 0; i < sn->nlim; i++)
		sn->lim[i] = rel(b, b->lim[(b->ltail - sn->nlim + i) % LIMITER_CAP], base);
	for (i = 0; i < d->nstreams; i++)
		sn->last[i] = rel(b, d->streams[i].last, base);
	snap_units(b, sn, ahead, b->cut->p, base, 0);
	snap_units(b, sn, behind, b->cut->p, base, 1 << 24);
}

/* At op i of a forward (dir = 0) or backward (1) pass: a boundary snapshot
 * when i starts one; after the third, whether the three were equal. */
static void cut_check(struct bld *b, int i, int dir)
{
	struct cut *c = b->cut;
	const int *at = dir ? c->bop : c->fop;
	int k = c->n[dir], ahead, behind;

	if (i == c->zop[dir])
		c->zone = b->d->ntasks;
	if (k >= 3 || i != at[k])
		return;
	if (dir == 0) {  /* forward: entering block lo - 2p, lo - p, then the cut */
		ahead = k < 2 ? c->lo - (2 - k) * c->p : c->hi;
		behind = (k < 2 ? ahead : c->lo) - c->p;
	} else {         /* backward: the cut (block lo - 1 next), then p and 2p further down */
		ahead = c->lo - (k + 1) * c->p;
		behind = k == 0 ? c->hi : ahead + c->p;
	}
	snapshot(b, &c->sn[k], ahead, behind);
	if (b->ss->cut_n < 16) {
		b->ss->cut_bnd[b->ss->cut_n][k] = b->d->ntasks;
		b->ss->cut_zone[b->ss->cut_n] = c->zone;
		if (k == (dir ? 0 : 2))  /* forward: the cut follows the periods; backward: precedes them */
			b->ss->cut_post[b->ss->cut_n] = b->d->ntasks;
	}
	c->n[dir] = ++k;
	if (k == 3 && (memcmp(&c->sn[0], &c->sn[1], sizeof c->sn[0]) ||
		       memcmp(&c->sn[1], &c->sn[2], sizeof c->sn[0]) || c->sn[0].over))
		c->ok[dir] = 0;
}

/* The end of a pass: every boundary of it must have been seen. */
static void cut_pass_end(struct bld *b, int dir)
{
	if (!b->cut)
		return;
	if (b->cut->n[dir] != 3 || b->ss->cut_n == 16)
		b->cut->ok[dir] = 0;
	else
		b->ss->cut_n++;
	b->cut->n[dir] = 0;
}

/* ---- passes ---------------------------------------------------------------------- */

/* Host time to issue op i's forward: a module's Python call, or one aten op
 * for a copy made inside another op, plus the aten ops its Python issues
 * beyond the module's (eager.h). */
static double disp_fwd(const struct bld *b, int i)
{
	return (b->ss->internal[i] ? b->disp_op : b->disp_f) + b->ss->ex[i].calls_fwd * b->disp_op;
}

static double disp_bwd(const struct bld *b, int i)
{
	return (b->ss->internal[i] ? b->disp_op : b->disp_b) + b->ss->ex[i].calls_bwd * b->disp_op;
}

/* Issues op i's forward kernel (tag T_FWD or T_RECOMP): the host first waits
 * for the GPU where the op needs a value from it (eager.h sync_fwd). */
static int fwd_kernel(struct bld *b, int i, int tag)
{
	if (b->ss->ex[i].sync_fwd)
		host_wait(b, last_on(b, b->gpu));
	return kernel(b, b->ss->tf[i], disp_fwd(b, i), i, tag);
}

static void forward(struct bld *b)
{
	const struct graph *g = b->g;
	int i, j, k = -1;

	for (i = 0; i < g->nops; i++) {
		const struct gop *o = &g->ops[i];
		if (b->cut)
			cut_check(b, i, 0);
		if (skipped(b, i))
			continue;
		for (j = b->ss->uso[i]; j < b->ss->uso[i + 1]; j++)
			pre_forward(b, b->ss->us[j]);  /* outer first */
		if (b->ss->tf[i] > 0)
			k = fwd_kernel(b, i, T_FWD);
		if (tp_forward_allreduce(b, o))
			tp_allreduce(b, o->out >= 0 ? graph_tensor_bytes(g, o->out) : 0, k, i);
		for (j = b->ss->ueo[i + 1] - 1; j >= b->ss->ueo[i]; j--)
			post_forward(b, b->ss->ue[j], k);  /* inner first */
	}
	cut_pass_end(b, 0);
}

/* Whether the recomputation before a graph unit's backward (recompute) runs
 * op i of the unit again: every op (full) or the attention core (selective). */
static int recomputes(const struct bld *b, int i)
{
	return b->recompute == RECOMPUTE_FULL || (b->recompute == RECOMPUTE_SELECTIVE && b->g->ops[i].attn_core);
}

/* Recomputation before graph unit gu's backward: the forward of its ops that
 * recomputes() names. */
static void recompute(struct bld *b, int gu)
{
	int i, f = b->ss->gfirst[gu], l = b->ss->glast[gu];

	if (gu == 0 || f < 0 || b->recompute == RECOMPUTE_NONE)
		return;
	for (i = f; i <= l; i++) {
		/* ZeRO-3's hooks fetch and release a module in the recomputed forward
		 * too (FSDP's unit is already gathered by its pre-backward hook and
		 * FSDP does not reshard in a backward-time forward) */
		int u = b->modules ? b->ss->unit_of[i] : -1, k = -1;
		if (!recomputes(b, i))
			continue;
		if (u >= 0)
			pre_forward(b, u);
		if (b->ss->tf[i] > 0)
			k = fwd_kernel(b, i, T_RECOMP);
		if (u >= 0)
			post_forward(b, u, k);
		if (b->recompute == RECOMPUTE_FULL && tp_forward_allreduce(b, &b->g->ops[i]))
			tp_allreduce(b, graph_tensor_bytes(b->g, b->g->ops[i].out), last_on(b, b->gpu), i);
	}
}

/* Whether zero_grad leaves zeroed gradients, so that AccumulateGrad adds in
 * place on every micro-step (header). */
static int grad_add(const struct bld *b)
{
	return b->p->zero_grad_keeps;
}

/* Unit u's backward is done at kernel k: its post-backward now, or under
 * forward prefetch (plan.h post_lag) after the next unit's backward, when the
 * one waiting goes. */
static void unit_done(struct bld *b, int u, int k)
{
	if (!b->p->post_lag) {
		post_backward(b, u, k);
		return;
	}
	if (b->lag >= 0)
		post_backward(b, b->lag, k);
	b->lag = u;
}

static void backward(struct bld *b, int sync)
{
	const struct graph *g = b->g;
	double bw = b->mem_bw * b->ce->memory_efficiency;
	int i, j, k = -1, add = grad_add(b);

	b->sync = sync;
	b->lag = -1;
	for (i = g->nops - 1; i >= 0; i--) {
		const struct gop *o = &g->ops[i];
		if (b->cut)
			cut_check(b, i, 1);
		if (skipped(b, i))
			continue;
		/* FSDP2's root has a pre-backward hook (it prefetches the last
		 * block, and gathers the root if it was resharded); outer first */
		for (j = b->ss->ueo[i]; j < b->ss->ueo[i + 1]; j++)
			if (!b->u[b->ss->ue[j]].root || b->per_param)
				pre_backward(b, b->ss->ue[j]);
		if (o->unit > 0 && b->ss->glast[o->unit] == i)
			recompute(b, o->unit);
		if (b->ss->tb[i] > 0)
			k = kernel(b, b->ss->tb[i], disp_bwd(b, i), i, T_BWD);
		if (add && o->params > 0)  /* .grad += the new gradient */
			k = kernel(b, (o->params * 3 * b->gbytes / bw + b->ce->kernel_gap) * b->straggle,
				   b->disp_op, i, T_GRAD_ADD);
		grad_ready(b, i, k, sync);
		if (b->ss->tpb[i] > 0)
			tp_allreduce(b, b->ss->tpx[i], k, i);
		for (j = b->ss->uso[i + 1] - 1; j >= b->ss->uso[i]; j--)
			if (!b->u[b->ss->us[j]].root)
				unit_done(b, b->ss->us[j], k);  /* inner first */
	}
	cut_pass_end(b, 1);
	if (b->lag >= 0)
		post_backward(b, b->lag, k);
	b->lag = -1;
	if (b->wrapped)
		post_backward(b, 0, k);
	if (b->p->reduce == REDUCE_BUCKETS && b->bucket > 0) {
		reduce_grads(b, b->bucket, k, -1);
		b->bucket = 0;
	}
}

/* ---- the optimizer ---------------------------------------------------------------- */

/* Parameters (per TP rank) whose optimizer states this rank holds. */
static double shard_params(const struct bld *b)
{
	return b->g->params_rank / (double)b->p->shard_n;
}

static void zero_allgather(struct bld *b, int after)
{
	double left = b->g->params_rank, cap = b->s->s.training.zero_allgather_bucket_size;

	while (left > 0) {
		double n = fmin(left, cap);
		after = collective(b, b->pg, COLL_ALLGATHER, &b->gdp, n * b->pcomm, after, -1, T_AG);
		left -= n;
	}
}

/* The foreach passes of torch.optim's step: the depth (tensor lists) of each. */
static int opt_passes(int optimizer, int impl, int depth[8])
{
	static const int sgd[] = {2}, mom[] = {1, 2, 2};
	static const int adam[] = {2, 1, 3, 2, 1, 1, 3}, adamw[] = {1, 2, 1, 3, 2, 1, 1, 3};
	static const int *const tab[] = {sgd, mom, adam, adamw};
	static const int n[] = {1, 3, 7, 8};
	int i;

	if (impl == OPTI_FUSED) {  /* one pass over p, g (, buffers) */
		depth[0] = optimizer == OPT_SGD ? 2 : optimizer == OPT_SGD_MOMENTUM ? 3 : 4;
		return 1;
	}
	for (i = 0; i < n[optimizer]; i++)
		depth[i] = tab[optimizer][i];
	return n[optimizer];
}

/* Kernels of one multi_tensor_apply pass of depth d over T tensors, E elements. */
static double mta_launches(int d, double T, double E)
{
	static const double max_tensors[] = {110, 64, 48, 36, 30};
	double by_t = ceil(T / max_tensors[d - 1]), by_e = ceil(E / (320.0 * 65536));

	return fmax(1, fmax(by_t, by_e));
}

/* A memory-bound pass over p elements of bytes each, as torch.optim issues it:
 * one Python call and its launches (foreach, fused), or one call per tensor
 * (for_loop). Returns the kernel task. */
static int opt_pass(struct bld *b, int impl, double p, double bytes, int depth, int label)
{
	double bw = b->mem_bw * b->ce->memory_efficiency, gap = b->ce->kernel_gap, T = b->opt_tensors;
	double k = impl == OPTI_FOR_LOOP ? T : mta_launches(depth, T, p);
	double host = impl == OPTI_FOR_LOOP ? T * b->disp_op : b->disp_op + (k - 1) * b->ce->dispatch_native;

	return kernel(b, (p * bytes / bw + k * gap) * b->straggle, host, label, T_OPT);
}

/* GradScaler.unscale_ (fp16 under torch.amp): a pass over the gradients, then
 * the host reads found_inf before stepping. */
static void grad_scaler(struct bld *b, double p)
{
	int t;

	if (!b->p->grad_scaler)
		return;
	t = opt_pass(b, OPTI_FOREACH, p, 2 * b->gbytes, 1, -1);
	host_wait(b, t);
}

/* clip_grad_norm_: the gradients' norm (a read), an all-reduce of it across
 * the shards (FSDP, ZeRO), the scaling (a read and a write). */
static void grad_clip(struct bld *b, double p)
{
	int t;

	if (!b->s->s.training.grad_clipping)
		return;
	t = opt_pass(b, OPTI_FOREACH, p, b->gbytes, 1, -1);
	if (b->shard_n > 1)
		pend(b, collective(b, b->pg, COLL_ALLREDUCE, &b->gdp, 4, t, -1, T_AR));
	opt_pass(b, OPTI_FOREACH, p, 2 * b->gbytes, 1, -1);
}

static void optimizer(struct bld *b)
{
	double p = shard_params(b);
	int t = -1, i, n, depth[8];

	pend(b, last_on(b, b->pg));
	pend(b, last_on(b, b->rep));
	pend(b, last_on(b, b->d2h));
	if (b->offload == OFFLOAD_NONE) {
		grad_clip(b, p);
		grad_scaler(b, p);
		n = opt_passes(b->s->s.training.optimizer, b->opt_impl, depth);
		for (i = 0; i < n; i++)
			t = opt_pass(b, b->opt_impl, p, b->opt_bytes / n, depth[i], -1);
	} else {
		/* the node's DRAM is shared by the optimizers of its GPUs */
		double bw = b->ce->host_memory_bandwidth * b->ce->host_memory_efficiency / b->gpn;
		int w = host_work(b, b->cpu, b->disp_f, -1, T_DISPATCH);
		t = des_work(b->d, b->host, p * b->host_opt_bytes / bw, -1, T_HOSTOPT);
		if (t < 0) {
			b->oom = 1;
			return;
		}
		dep(b, w, t);
		for (i = 0; i < b->npend; i++)
			dep(b, b->pend[i], t);
		b->npend = 0;
		if (b->offload == OFFLOAD_OPTIMIZER)  /* updated 16-bit parameters back */
			t = copy(b, b->h2d, p * b->pcomm, t, -1, T_H2D);
		host_wait(b, t);
	}
	if (b->p->allgather_after_step)
		zero_allgather(b, t);
	if (grad_add(b))  /* zero_grad(set_to_none=False): a fill per tensor */
		opt_pass(b, OPTI_FOR_LOOP, p, b->gbytes, 1, -1);
}

/* ZeRO-1: the accumulated gradients are reduce-scattered after the last backward. */
static void zero1_reduce(struct bld *b)
{
	double left = b->g->params_rank, cap = b->s->s.training.zero_reduce_bucket_size;
	int after = last_on(b, b->gpu);

	while (left > 0) {
		double n = fmin(left, cap);
		reduce_grads(b, n, after, -1);
		left -= n;
	}
}

/* ---- nn.DataParallel ---------------------------------------------------------------- */

/* Bytes per sample of the forward outputs a replica returns (the logits the
 * model keeps). */
static double dp_output_bytes(const struct bld *b)
{
	const struct graph *g = b->g;
	double bytes = 0;
	int i;

	for (i = 0; i < g->nt; i++)
		if (g->t[i].held)
			bytes += graph_tensor_bytes(g, i);
	return bytes;
}

/* Whether a micro-step is DataParallel's (dp_microstep: its forward and
 * backward on GPU 0 and 1) rather than forward and backward (build). */
static int dp_micro(const struct bld *b)
{
	return b->p->mech == MECH_DP;
}

/* Op i's kernel of dur (tag) in a DataParallel backward, on GPU 0 (*k0) and
 * on the replica (*k1), each dispatched by its device's autograd thread (cpu,
 * cpu1) and run after task t (the outputs' gather). */
static void dp_replicas(struct bld *b, double dur, double disp, int i, int tag, int t, int *k0, int *k1)
{
	int c = host_work(b, b->cpu, disp, i, T_DISPATCH);

	*k0 = des_work(b->d, b->gpu, dur, i, tag);
	dep(b, c, *k0);
	dep(b, t, *k0);
	c = host_work(b, b->cpu1, disp, i, T_DISPATCH);
	*k1 = des_work(b->d, b->gpu1, dur, i, tag);
	dep(b, c, *k1);
	dep(b, t, *k1);
}

/* The recomputation before graph unit gu's backward under DataParallel: each
 * replica's autograd thread (cpu on GPU 0, cpu1 on the replica) runs the
 * region's forward again on its device, as torch.utils.checkpoint does inside
 * a replica's module (recomputes() names the ops, as for every strategy).
 * Each kernel waits for the outputs' gather t, as the backward's do. */
static void dp_recompute(struct bld *b, int gu, int t)
{
	int i, k0, k1, f = b->ss->gfirst[gu], l = b->ss->glast[gu];

	if (gu == 0 || f < 0 || b->recompute == RECOMPUTE_NONE)
		return;
	for (i = f; i <= l; i++)
		if (recomputes(b, i) && b->ss->tf[i] > 0)
			dp_replicas(b, b->ss->tf[i], b->disp_f, i, T_RECOMP, t, &k0, &k1);
}

/* One micro-step of DataParallel: GPU 0 (rank 0) and a replica (rank 1) run
 * the same kernels; the host issues both replicas' forward ops under one
 * interpreter lock; autograd runs one thread per device. */
static void dp_microstep(struct bld *b)
{
	const struct graph *g = b->g;
	int n = (int)b->s->world, i, c, k0 = -1, k1 = -1, t;
	double params = g->params_rank;

	t = collective(b, b->pg, COLL_BROADCAST, &b->gdp, params * b->pcomm, last_on(b, b->gpu), -1, T_BCAST);
	des_also_on(b->d, t, b->d->nstreams - 1);
	pend(b, t);
	k1 = t;
	for (i = 0; i < g->nops; i++) {
		if (b->cut)
			cut_check(b, i, 0);
		if (b->ss->tf[i] <= 0 || skipped(b, i))
			continue;
		c = host_work(b, b->cpu, b->disp_f * n, i, T_DISPATCH);
		k0 = des_work(b->d, b->gpu, b->ss->tf[i], i, T_FWD);
		dep(b, c, k0);
		dep(b, t, k0);
		k1 = des_work(b->d, b->gpu1, b->ss->tf[i], i, T_FWD);
		dep(b, c, k1);
		dep(b, t, k1);
		b->npend = 0;
	}
	t = collective_scaled(b, b->pg, COLL_GATHER, DYN_DP, dp_output_bytes(b), n, k0, -1, T_GATHER);
	des_also_on(b->d, t, b->d->nstreams - 1);
	dep(b, k1, t);
	cut_pass_end(b, 0);
	for (i = g->nops - 1; i >= 0; i--) {
		const struct gop *o = &g->ops[i];
		if (b->cut)
			cut_check(b, i, 1);
		if (skipped(b, i))
			continue;
		if (o->unit > 0 && b->ss->glast[o->unit] == i)
			dp_recompute(b, o->unit, t);
		if (b->ss->tb[i] > 0)
			dp_replicas(b, b->ss->tb[i], b->disp_b, i, T_BWD, t, &k0, &k1);
	}
	cut_pass_end(b, 1);
	t = collective(b, b->pg, COLL_REDUCE, &b->gdp, params * b->gcomm, k0, -1, T_REDUCE);
	des_also_on(b->d, t, b->d->nstreams - 1);
	dep(b, k1, t);
}

/* ---- setting up ------------------------------------------------------------------ */

/* old resized to n elements of sz bytes, or old itself (and *fail set) when
 * realloc fails: the caller keeps a valid array either way. */
static void *resized(void *old, int n, size_t sz, int *fail)
{
	void *np = realloc(old, (size_t)n * sz);

	*fail |= !np;
	return np ? np : old;
}

static int grow_ops(struct step_sim *ss, int nops, int ng)
{
	int fail = 0;

	if (nops > ss->capops) {
		ss->tf = resized(ss->tf, nops, sizeof *ss->tf, &fail);
		ss->tb = resized(ss->tb, nops, sizeof *ss->tb, &fail);
		ss->tpb = resized(ss->tpb, nops, sizeof *ss->tpb, &fail);
		ss->tpx = resized(ss->tpx, nops, sizeof *ss->tpx, &fail);
		ss->pos = resized(ss->pos, nops, sizeof *ss->pos, &fail);
		ss->bkt = resized(ss->bkt, nops, sizeof *ss->bkt, &fail);
		ss->kw = resized(ss->kw, nops, sizeof *ss->kw, &fail);
		ss->kop = resized(ss->kop, nops, sizeof *ss->kop, &fail);
		ss->kwr = resized(ss->kwr, nops, sizeof *ss->kwr, &fail);
		ss->unit_of = resized(ss->unit_of, nops, sizeof *ss->unit_of, &fail);
		ss->ex = resized(ss->ex, nops, sizeof *ss->ex, &fail);
		ss->internal = resized(ss->internal, nops, sizeof *ss->internal, &fail);
		ss->rep = resized(ss->rep, nops, sizeof *ss->rep, &fail);
		if (fail)
			return -1;
		ss->capops = nops;
	}
	if (ng > ss->capg) {
		ss->gfirst = resized(ss->gfirst, ng, sizeof *ss->gfirst, &fail);
		ss->glast = resized(ss->glast, ng, sizeof *ss->glast, &fail);
		if (fail)
			return -1;
		ss->capg = ng;
	}
	return 0;
}

/* First and last op of every graph unit (0 = outside blocks, b+1 = block b). */
static void graph_units(struct bld *b)
{
	const struct graph *g = b->g;
	int i;

	for (i = 0; i <= g->nblocks; i++)
		b->ss->gfirst[i] = b->ss->glast[i] = -1;
	for (i = 0; i < g->nops; i++) {
		int u = g->ops[i].unit;
		if (u < 0 || u > g->nblocks)
			continue;
		if (b->ss->gfirst[u] < 0)
			b->ss->gfirst[u] = i;
		b->ss->glast[u] = i;
	}
}

/* Process groups: ranks are node-major, tensor-parallel ranks adjacent inside a
 * node (Megatron's order). */
static void groups(struct bld *b)
{
	const struct scenario *s = b->s;
	int gpn = b->gpn, tp = b->tp, nics = (int)s->s.cluster.nics_per_node;
	int r = tp <= gpn ? gpn / tp : 1;          /* data-parallel ranks per node */
	int share = tp < gpn ? tp : gpn;           /* data-parallel groups crossing a node */
	int tpr = tp < gpn ? tp : gpn;             /* tensor-parallel ranks per node */

	coll_group_make(&b->gdp, b->dp, b->dp / r, &s->intra, &s->inter, nics, share);
	coll_group_make(&b->gtp, tp, tp / tpr, &s->intra, &s->inter, nics, gpn / tpr);
	coll_group_make(&b->gshard, r < b->dp ? r : b->dp, 1, &s->intra, &s->inter, nics, share);
	coll_group_make(&b->grep, b->dp / b->gshard.n, b->dp / b->gshard.n, &s->intra, &s->inter, nics, gpn);
	b->shard_n = (int)b->p->shard_n;
	if (b->p->reshard_group > 1)  /* consecutive ranks of the shard group: a node's first */
		coll_group_make(&b->gpost, (int)b->p->reshard_group,
				b->p->reshard_group <= r ? 1 : (int)(b->p->reshard_group / r), &s->intra, &s->inter, nics, share);
}

/* Bytes per parameter an optimizer step moves: fp32 words (see the header
 * comment), plus the 16-bit working copy a fused step writes where the model
 * holds 16-bit weights (DeepSpeed, the shardcast runtime). */
static double gpu_opt_bytes(int optimizer, int fused, int working16)
{
	static const double foreach[] = {3, 8, 18, 20};  /* sgd, sgd_momentum, adam, adamw */
	static const double fusedw[] = {3, 5, 7, 7};

	return 4 * (fused ? fusedw[optimizer] : foreach[optimizer]) + (fused && working16 ? 2 : 0);
}

static int setup(struct bld *b, struct step_sim *ss, const struct scenario *s,
		 const struct graph *g, int64_t micro_batch)
{
	const struct scn_training *t = &s->s.training;
	const struct plan *p = &s->plan;
	int native = p->engine == FW_SHARDCAST;

	memset(b, 0, sizeof *b);
	b->ss = ss;
	b->d = &ss->d;
	b->s = s;
	b->p = p;
	b->g = g;
	b->ce = &s->eff;
	b->tp = (int)t->tensor_parallel;
	b->dp = (int)s->dp;
	b->gpn = (int)s->s.cluster.gpus_per_node;
	b->nodes = (int)s->s.cluster.nodes;
	b->accum = (int)t->grad_accum;
	b->algo = s->s.cluster.coll_algo;
	b->recompute = t->recompute;
	b->offload = p->offload;
	b->B = (double)micro_batch;
	b->prec = p->precision;
	b->straggle = compute_straggle(&s->eff, (double)s->world);
	b->peak = s->gpu.peak[p->precision];
	b->peak_vec = s->gpu.peak[PREC_FP32];
	b->mem_bw = s->gpu.memory_bandwidth;
	/* PyTorch autocast keeps fp32 weights and gradients (and DDP reduces those);
	 * FSDP's MixedPrecision and DeepSpeed hold 16-bit ones (plan.h) */
	b->cast_weights = p->autocast;
	b->wbytes = p->w.kernel_weights;
	b->gbytes = p->w.kernel_grads;
	b->pcomm = p->w.comm_params;
	b->gcomm = p->w.comm_grads;
	b->opt_impl = p->opt_impl;
	/* the 16-bit working copy a fused step writes back: DeepSpeed, the runtime */
	b->opt_bytes = gpu_opt_bytes(p->optimizer, p->opt_impl == OPTI_FUSED, p->fused_optimizer && p->mixed);
	/* the host optimizer of offload: DeepSpeed's CPUAdam is fused, FSDP's CPU
	 * offload runs torch.optim on CPU tensors */
	b->host_opt_bytes = gpu_opt_bytes(p->optimizer, p->fused_optimizer, p->fused_optimizer && p->mixed);
	b->disp_f = native ? s->eff.dispatch_native : s->eff.dispatch_eager;
	b->disp_b = native ? s->eff.dispatch_native : s->eff.dispatch_autograd;
	b->disp_c = s->eff.dispatch_collective;
	b->disp_op = native ? s->eff.dispatch_native : s->eff.dispatch_op;
	/* PyTorch FSDP's per-unit hooks and buffer handling (the shardcast runtime's
	 * units cost their collectives' issue only) */
	b->disp_uf = native ? 0 : s->eff.dispatch_unit_fwd;
	b->disp_ub = native ? 0 : s->eff.dispatch_unit_bwd;
	b->wrapped = p->units;
	b->per_param = p->units && p->layout == LAYOUT_PER_PARAM;
	b->flat = p->units && p->engine == FW_PYTORCH && !b->per_param;
	b->modules = p->mech == MECH_ZERO3;
	/* what the optimizer steps (plan.h opt_groups): FSDP's FlatParameters (one
	 * per unit, counted once the units exist), a flat partition, every tensor */
	b->opt_tensors = p->opt_groups == OPT_FLAT ? 1 : graph_param_tensors(g);
	b->has_units = b->wrapped || b->modules;
	b->rep = b->tps = b->h2d = b->d2h = b->host = b->gpu1 = b->cpu1 = -1;
	b->skip = ss->skip;
	if (grow_ops(ss, g->nops, g->nblocks + 1))
		return -1;
	groups(b);
	return 0;
}

/* The model calls flash-attn's varlen kernel on unpadded tokens: its
 * flash_unpad with the flash-attn package's kernels (not SDPA's). */
static int varlen(const struct bld *b)
{
	int a = b->s->s.training.attention;

	return b->s->model.flash_unpad && b->g->o.flavor == GRAPH_EAGER && (a == ATTN_FLASH || a == ATTN_FLASH3);
}

/* What eager PyTorch adds to each op (eager.h) and which ops share their
 * kernel times (op_classes): what op_times reads besides the graph. */
static void kernel_tables(struct bld *b)
{
	int m, a;

	for (m = 0; m < b->g->nops; m++) {
		if ((a = graph_alike_op(b->g, m)) >= 0) {  /* an op of a copied block: its template's */
			b->ss->ex[m] = b->ss->ex[a];
			b->ss->internal[m] = b->ss->internal[a];
			continue;
		}
		eager_extra(b->g, &b->s->model, m, &b->ss->ex[m]);
		if (varlen(b))
			eager_varlen(b->g, m, &b->ss->ex[m]);
		b->ss->internal[m] = (unsigned char)eager_internal(b->g, m);
	}
	op_classes(b);
}

/* The DES's slow (des.h): how much longer a compute kernel runs while a
 * collective runs beside it. */
static double compute_slow(const struct bld *b)
{
	return 1 + b->ce->overlap_slowdown;
}

static int streams(struct bld *b)
{
	struct des *d = b->d;

	b->cpu = des_stream(d, 0, DES_CPU, "host thread");
	b->gpu = des_stream(d, 0, DES_COMPUTE, "compute stream");
	b->pg = des_stream(d, 0, DES_COMM, b->p->mech == MECH_DP ? "nccl (GPU 0)" : "nccl data-parallel");
	if (b->tp > 1)
		b->tps = des_stream(d, 0, DES_COMM, "nccl tensor-parallel");
	if (b->p->hybrid)
		b->rep = des_stream(d, 0, DES_COMM, "nccl replicate (hybrid)");
	if (b->offload != OFFLOAD_NONE) {
		b->h2d = des_stream(d, 0, DES_COPY, "copy host->device");
		b->d2h = des_stream(d, 0, DES_COPY, "copy device->host");
		b->host = des_stream(d, 0, DES_HOST, "host CPU optimizer");
	}
	if (b->p->mech == MECH_DP) {
		b->gpu1 = des_stream(d, 1, DES_COMPUTE, "compute stream (replicas)");
		b->cpu1 = des_stream(d, 1, DES_CPU, "autograd thread (replicas)");
		des_stream(d, 1, DES_COMM, "nccl (replicas)");  /* shows dp's collectives */
	}
	return b->cpu < 0 || b->gpu < 0 || b->pg < 0 ? -1 : 0;
}

static int cut_marks(struct step_sim *sub);

/* The boundaries a shorter step compares (step.h), from its ss's cut. */
static void cut_prepare(struct bld *b, struct cut *c)
{
	const struct step_sim *ss = b->ss;
	const struct graph *g = b->g;
	int k;

	memset(c, 0, sizeof *c);
	c->lo = ss->cut_lo;
	c->hi = ss->cut_hi;
	c->p = ss->cut_p;
	for (k = 0; k < 2; k++) {
		c->fop[k] = g->block_first[c->lo - (2 - k) * c->p];
		c->bop[k + 1] = life_block_last(g, c->lo - 1 - (k + 1) * c->p);
	}
	c->fop[2] = g->block_first[c->hi];
	c->bop[0] = life_block_last(g, c->lo - 1);
	c->zop[0] = g->block_first[ss->cut_e0];
	c->zop[1] = life_block_last(g, ss->cut_e1 - 1);
	c->ok[0] = c->ok[1] = 1;
	b->cut = c;
}

static int build(struct bld *b)
{
	struct cut cut;
	int m, last;

	b->ss->cut_n = 0;
	if (b->ss->skip && b->ss->cut_p > 0)
		cut_prepare(b, &cut);
	des_reset(b->d);
	b->d->slow = compute_slow(b);
	b->ss->ndyn = 0;
	if (streams(b))
		return -1;
	kernel_tables(b);
	b->ss->kg = NULL;  /* this build's tables, not step_kernel_least's */
	op_times(b);
	tp_marks(b);
	graph_units(b);
	if (b->p->reduce == REDUCE_DDP)
		ddp_buckets(b);
	if (!b->has_units)
		b->nu = 0;
	if ((b->wrapped && fsdp_units(b)) || (b->modules && zero3_units(b)) || unit_lists(b))
		return -1;
	if (b->p->opt_groups == OPT_PER_UNIT)
		b->opt_tensors = b->nu;
	if (!b->has_units)
		for (m = 0; m < b->g->nops; m++)
			b->ss->unit_of[m] = -1;
	for (m = 0; m < b->accum; m++) {
		last = m == b->accum - 1;
		if (dp_micro(b)) {
			dp_microstep(b);
			continue;
		}
		forward(b);
		backward(b, plan_micro_syncs(b->p, last));
	}
	if (b->p->reduce == REDUCE_AFTER_ACCUM)
		zero1_reduce(b);
	optimizer(b);
	b->ss->chk = b->cut && cut.ok[0] && cut.ok[1];
	if (b->ss->chk && cut_marks(b->ss))
		b->oom = 1;
	b->cut = NULL;
	return b->oom ? -1 : 0;
}

/* ---- results ---------------------------------------------------------------------- */

static double recompute_flops(const struct graph *g, int mode)
{
	double f = 0;
	int i;

	for (i = 0; mode != RECOMPUTE_NONE && i < g->nops; i++) {
		const struct gop *o = &g->ops[i];
		if (o->unit <= 0)
			continue;
		if (o->kind == OP_ATTN_SCORE || (mode == RECOMPUTE_FULL && o->kind == OP_MATMUL))
			f += o->flops_fwd;
		else if (o->kind == OP_ATTN)
			f += o->flops_model;
	}
	return f * g->o.tp;
}

void step_throughput(const struct graph *g, struct step_result *r)
{
	r->samples_per_s = r->time > 0 ? (double)r->global_batch / r->time : 0;
	r->tokens_per_s = r->samples_per_s * g->tokens;
}

/* Throughput and utilisation of step r (time and global batch set). */
static void rates(const struct step_sim *ss, const struct scenario *s, const struct graph *g,
		  struct step_result *r)
{
	double per_sample = ss->flops_ps, peak_all;

	step_throughput(g, r);
	peak_all = s->gpu.peak[s->plan.precision] * (double)s->world;
	r->mfu = per_sample * r->samples_per_s / peak_all;
	r->hfu = (per_sample + ss->flops_rc) * r->samples_per_s / peak_all;
	r->flops_per_gpu = per_sample * r->samples_per_s / (double)s->world;
}

static void results(const struct bld *b, struct step_result *r)
{
	const struct step_sim *ss = b->ss;
	const struct des *d = b->d;
	const struct scenario *s = b->s;
	int i;

	memset(r, 0, sizeof *r);
	r->valid = 1;
	r->time = d->tot.makespan;
	r->compute = d->tot.busy[DES_COMPUTE];
	r->comm = d->tot.comm;
	r->exposed_comm = d->tot.exposed;
	r->copy = d->tot.busy[DES_COPY];
	r->host_optimizer = d->tot.busy[DES_HOST];
	for (i = 0; i < ss->nsums; i++) {  /* the TP and optimizer tasks, in task order */
		const struct des_task *t = &d->tasks[ss->sums[i]];
		if (t->tag == T_TP)
			r->comm_tp += t->end - t->start;
		else
			r->optimizer += t->end - t->start;
	}
	r->micro_batch = (int64_t)b->B;
	r->grad_accum = b->accum;
	r->global_batch = (int64_t)b->B * b->accum * b->dp;
	rates(ss, s, b->g, r);
	r->events = d->tot.events;
	r->simulated_accum = b->accum;
	r->period_settled = 1;
	r->timed = 1;
}

/* ---- entry points ------------------------------------------------------------------ */

int step_sim_create(struct step_sim *ss)
{
	memset(ss, 0, sizeof *ss);
	return des_create(&ss->d);
}

void step_sim_delete(struct step_sim *ss)
{
	des_delete(&ss->d);
	free(ss->tf);
	free(ss->tb);
	free(ss->tpb);
	free(ss->tpx);
	free(ss->pos);
	free(ss->ex);
	free(ss->internal);
	free(ss->rep);
	free(ss->drep);
	free(ss->dynt);
	free(ss->bterm);
	free(ss->bsort);
	free(ss->pstart);
	free(ss->dyn);
	free(ss->kern);
	free(ss->sums);
	free(ss->bkt);
	free(ss->kw);
	free(ss->kop);
	free(ss->kwr);
	free(ss->kin);
	free(ss->km);
	free(ss->kmt);
	free(ss->unit_of);
	free(ss->gfirst);
	free(ss->glast);
	free(ss->units);
	free(ss->uso);
	free(ss->us);
	free(ss->ueo);
	free(ss->ue);
	free(ss->unx);
	free(ss->skip);
	if (ss->blk) {
		if (ss->blk->made)
			step_sim_delete(&ss->blk->sub);
		free(ss->blk->src);
		free(ss->blk);
	}
	memset(ss, 0, sizeof *ss);
}

/* ---- simulating again at another micro-batch ------------------------------------- */

/* Which per-op quantities are positive: the only way the micro-batch enters the
 * graph's structure (a kernel is issued when its time is, a TP all-reduce after
 * an op's backward when its bytes are). */
static unsigned char op_pattern(const struct step_sim *ss, int i)
{
	return (unsigned char)((ss->tf[i] > 0) | (ss->tb[i] > 0) << 1 | (ss->tpb[i] > 0) << 2);
}

/* Whether collectives x and y of step_resimulate cost the same at every
 * micro-batch: the same op and group, the same bytes per sample and multiplier
 * (their bits). */
static int same_dyn(const struct step_dyn *x, const struct step_dyn *y)
{
	return x->op == y->op && x->grp == y->grp && memcmp(&x->x, &y->x, sizeof x->x) == 0 &&
		memcmp(&x->mult, &y->mult, sizeof x->mult) == 0;
}

/* Groups the collectives whose bytes scale with the micro-batch into classes
 * of the same cost (ss->drep): a tensor-parallel all-reduce per sublayer, the
 * same in every block; each is costed once per micro-batch. Up to DYN_CLASSES
 * classes (a collective of another one stands alone). Returns 0 or -1. */
#define DYN_CLASSES 16
static int dyn_classes(struct step_sim *ss)
{
	int first[DYN_CLASSES], n = 0, i, j;

	if (vec_grow((void **)&ss->drep, &ss->capdrep, ss->ndyn, sizeof *ss->drep) ||
	    vec_grow((void **)&ss->dynt, &ss->capdynt, ss->ndyn, sizeof *ss->dynt))
		return -1;
	for (i = 0; i < ss->ndyn; i++) {
		for (j = 0; j < n && !same_dyn(&ss->dyn[first[j]], &ss->dyn[i]); j++)
			;
		ss->drep[i] = j < n ? first[j] : i;
		if (j == n && n < DYN_CLASSES)
			first[n++] = i;
	}
	return 0;
}

/* Starts the bound's terms of the task graph in ss (step_bound; struct
 * step_sim): the streams that vary are the compute streams (kernels) and
 * those of the collectives in dyn. Returns 0 or -1 (out of memory). */
static int bound_start(struct step_sim *ss)
{
	const struct des *d = &ss->d;
	int i, n = d->nstreams < STEP_BOUND_STREAMS ? d->nstreams : STEP_BOUND_STREAMS;

	if (vec_grow((void **)&ss->bterm, &ss->capbterm, d->ntasks, sizeof *ss->bterm) ||
	    vec_grow((void **)&ss->bsort, &ss->capbsort, d->ntasks, sizeof *ss->bsort))
		return -1;
	for (i = 0; i < DES_MAX_STREAMS; i++) {
		ss->bconst[i] = 0;
		ss->bvar[i] = i < n && d->streams[i].cls == DES_COMPUTE;
		ss->bfirst[i + 1] = 0;
	}
	for (i = 0; i < ss->ndyn; i++)
		if (d->tasks[d->colls[ss->dyn[i].coll].task].stream < n)
			ss->bvar[d->tasks[d->colls[ss->dyn[i].coll].task].stream] = 1;
	ss->nbterm = 0;
	ss->bok = 1;
	return 0;
}

/* Task i of the graph in ss into the bound's terms: a kernel (kern: re-timed
 * from op_times), collective y of dyn (dyn) or a constant, its time as
 * des_stream_bounds takes it, summed now on a constant stream. A kernel or a
 * collective of dyn on a constant stream clears ss->bok. */
static void bound_task(struct step_sim *ss, int i, int kern, int dyn, int y)
{
	const struct des *d = &ss->d;
	const struct des_task *t = &d->tasks[i];
	double v = 0;
	int s = t->stream;

	if (s >= STEP_BOUND_STREAMS || s >= d->nstreams)
		return;
	if (!kern && !dyn)  /* as des_stream_bounds */
		v = t->coll >= 0 ? coll_time(&d->colls[t->coll].c) : des_work_least(d, s, t->dur);
	if (!ss->bvar[s]) {
		ss->bok &= !kern && !dyn;
		ss->bconst[s] += v;
		return;
	}
	ss->bterm[ss->nbterm++] = (struct step_bterm){v, kern ? t->label : y, (unsigned char)s,
		(unsigned char)(kern ? (t->tag == T_BWD ? BT_BWD : BT_FWD) : dyn ? BT_DYN : BT_CONST)};
	ss->bfirst[s + 1]++;
}

/* The bound's terms of the task graph in ss (bound_start, bound_task), then
 * grouped by stream, each in task order (a stable counting sort): each
 * stream's sum is then one run. Returns 0 or -1 (out of memory). */
static int bound_prepare(struct step_sim *ss)
{
	const struct des *d = &ss->d;
	int at[DES_MAX_STREAMS], i, k = 0, y = 0, kern, dyn;

	if (bound_start(ss))
		return -1;
	for (i = 0; i < d->ntasks; i++) {  /* kern and dyn are in task order */
		kern = k < ss->nkern && ss->kern[k] == i;
		dyn = y < ss->ndyn && d->tasks[i].coll == ss->dyn[y].coll;
		bound_task(ss, i, kern, dyn, y);
		k += kern;
		y += dyn;
	}

	ss->bfirst[0] = 0;  /* bfirst[s + 1] counted stream s's terms */
	for (i = 0; i < DES_MAX_STREAMS; i++) {
		ss->bfirst[i + 1] += ss->bfirst[i];
		at[i] = ss->bfirst[i];
	}
	for (i = 0; i < ss->nbterm; i++)
		ss->bsort[at[ss->bterm[i].stream]++] = ss->bterm[i];
	ss->bready = 1;
	return 0;
}

/* Remembers what the step in ss was simulated for (same_settings). */
static void remember_settings(struct step_sim *ss, const struct scenario *s, const struct graph *g)
{
	ss->built = 1;
	ss->bg = g;
	memcpy(&ss->btrain, &s->s.training, sizeof ss->btrain);
	memcpy(&ss->bcluster, &s->s.cluster, sizeof ss->bcluster);
	ss->bdp = s->dp;
	ss->bworld = s->world;
}

/* Remembers what the graph in ss was built for, and what its runs read: the
 * kernels (re-timed), the TP and optimizer tasks (summed), the model's FLOPs.
 * Returns 0 or -1 (out of memory). */
static int remember(struct step_sim *ss, const struct scenario *s, const struct graph *g, int recompute)
{
	const struct des *d = &ss->d;
	int i, tag;

	ss->nkern = ss->nsums = 0;
	for (i = 0; i < d->ntasks; i++) {
		tag = d->tasks[i].tag;
		if (d->tasks[i].coll < 0 && (tag == T_FWD || tag == T_RECOMP || tag == T_BWD)) {
			if (vec_grow((void **)&ss->kern, &ss->capkern, ss->nkern + 1, sizeof *ss->kern))
				return -1;
			ss->kern[ss->nkern++] = i;
		} else if (tag == T_TP || tag == T_OPT) {
			if (vec_grow((void **)&ss->sums, &ss->capsums, ss->nsums + 1, sizeof *ss->sums))
				return -1;
			ss->sums[ss->nsums++] = i;
		}
	}
	if (dyn_classes(ss))
		return -1;
	ss->bready = 0;  /* step_bound makes its terms when it first needs them */
	ss->flops_ps = graph_model_flops_per_sample(g, &s->model);
	ss->flops_rc = recompute_flops(g, recompute);
	for (i = 0; i < g->nops; i++)
		ss->pos[i] = op_pattern(ss, i);
	remember_settings(ss, s, g);
	ss->blocks = 0;
	return 0;
}

/* Whether s's settings are those the graph in ss was built for, the
 * micro-batch aside. */
static int same_settings(const struct step_sim *ss, const struct scenario *s, const struct graph *g)
{
	const size_t mb = offsetof(struct scn_training, micro_batch), end = mb + sizeof s->s.training.micro_batch;
	const char *a = (const char *)&ss->btrain, *t = (const char *)&s->s.training;

	return ss->built && ss->bg == g && ss->bdp == s->dp && ss->bworld == s->world &&
		memcmp(a, t, mb) == 0 && memcmp(a + end, t + end, sizeof ss->btrain - end) == 0 &&
		memcmp(&ss->bcluster, &s->s.cluster, sizeof ss->bcluster) == 0;
}

/* Puts the times and costs of micro-batch b->B into the graph in ss: every
 * kernel's time (tagged with its op, from op_times) and the collectives whose
 * bytes scale with the batch. The rest (dispatch, parameter collectives,
 * copies, the optimizer) does not depend on it. */
static void retime(struct bld *b)
{
	struct step_sim *ss = b->ss;
	struct des *d = b->d;
	int i;

	for (i = 0; i < ss->nkern; i++) {
		struct des_task *t = &d->tasks[ss->kern[i]];
		double dur = t->tag == T_BWD ? ss->tb[t->label] : ss->tf[t->label];
		t->dur = dur > 0 ? dur : 0;  /* as des_work stores it */
	}
	for (i = 0; i < ss->ndyn; i++) {
		const struct step_dyn *y = &ss->dyn[i];
		struct des_coll *k = &d->colls[y->coll];
		if (ss->drep[i] != i)  /* the same cost as its class's first (dyn_classes) */
			k->c = d->colls[ss->dyn[ss->drep[i]].coll].c;
		else
			coll_cost(y->op, b->algo, y->x * b->B * y->mult, dyn_group(b, y->grp), &k->c);
		k->left = k->rate = 0;  /* as des_coll leaves them */
	}
}

static int run(struct bld *b, struct step_result *r, struct err *e)
{
	if (des_run(b->d))
		return err_set(e, ERR_SYSTEM, NULL, 0, "step simulation failed (out of memory or a cycle in the task graph)");
	results(b, r);
	return 0;
}

/* ---- periodic blocks: three shorter steps (step.h) ------------------------------- */

/* Plans the shorter step of s over g into k, or returns -1 when its blocks do
 * not repeat long enough: nine periods (three warming the forward up, two
 * simulated, one or more left out, three or more warming the backward up after
 * the cut). */
static int blocks_plan(struct step_sim *ss, const struct scenario *s, const struct graph *g, int64_t mb,
		       struct step_blocks *k)
{
	struct bld b;
	int n, p, ddp;

	if (setup(&b, ss, s, g, mb))
		return -1;
	ddp = b.p->reduce == REDUCE_DDP;
	if (ddp)  /* the bucket boundaries must repeat too */
		ddp_buckets(&b);
	if (period_find(g, ddp ? ss->bkt : NULL, STEP_BLOCK_MAXP, &k->per))
		return -1;
	p = k->per.p;
	n = k->per.e1 - k->per.e0;
	if (n / p < 9)
		return -1;
	k->lo = k->per.e0 + 5 * p;
	k->hi = k->per.e1 - 3 * p - n % p;
	k->left = (k->hi - k->lo) / p;
	return 0;
}

/* Leaves blocks lo .. hi - 1 of g out of sub, its boundaries compared with
 * period p; another range drops its task graph. Returns 0 or -1 (memory). */
static int sub_cut(struct step_sim *sub, const struct graph *g, const struct period *per, int lo, int hi,
		   int p)
{
	int i, f = g->block_first[lo], l = life_block_last(g, hi - 1);

	if (vec_grow((void **)&sub->skip, &sub->capskip, g->nops, 1))
		return -1;
	for (i = 0; i < g->nops; i++)
		sub->skip[i] = i >= f && i <= l;
	if (sub->cut_lo != lo || sub->cut_hi != hi || sub->cut_p != p || sub->cut_e0 != per->e0 ||
	    sub->cut_e1 != per->e1)
		sub->built = 0;
	sub->cut_lo = lo;
	sub->cut_hi = hi;
	sub->cut_p = p;
	sub->cut_e0 = per->e0;
	sub->cut_e1 = per->e1;
	return 0;
}

/* Marks, in each pass, the first task of the first period before (forward)
 * or after (backward) the cut on each device stream, and its counterpart in
 * the second, so that the run records the exposure of one period between
 * them (period_sums picks a pair that keeps the period). */
static int cut_marks(struct step_sim *sub)
{
	const struct des *d = &sub->d;
	int j, i, k, n, st, seen;

	for (j = 0; j < sub->cut_n; j++) {
		n = sub->cut_bnd[j][1] - sub->cut_bnd[j][0];
		for (k = 0; k < 8; k++)
			sub->cut_mk[j][k][0] = -1;
		for (i = sub->cut_bnd[j][0], seen = 0; i < sub->cut_bnd[j][1] && seen < 8; i++) {
			st = d->tasks[i].stream;
			if (d->streams[st].cls == DES_CPU)
				continue;
			for (k = 0; k < seen && d->tasks[sub->cut_mk[j][k][0]].stream != st; k++)
				;
			if (k < seen)
				continue;
			sub->cut_mk[j][seen][0] = i;
			sub->cut_mk[j][seen][1] = des_mark(&sub->d, i);
			sub->cut_mk[j][seen][2] = des_mark(&sub->d, i + n);
			if (sub->cut_mk[j][seen][1] < 0 || sub->cut_mk[j][seen][2] < 0)
				return -1;
			seen++;
		}
	}
	return 0;
}

/* How the shorter step ran its two periods: P[j] the period of pass j (the
 * largest shift of a task from the first period to its counterpart in the
 * second), and which tasks ran ahead of it. */
struct cut_run {
	double P[16], tol[16];
	int drift;                 /* some task ran ahead */
};

/* Whether, in pass j of the shorter step, a task issued after the cut waited
 * on a device stream for one issued before the repeating blocks. The snapshots
 * take such an old task for done before the blocks it would delay (rel); one
 * still running when the stream's first task after the cut is ready (a large
 * bucket's all-reduce backed up on a slow network) ends at a time the blocks
 * left out do not move, so the full step would not grow by their periods. */
static int old_tasks_wait(const struct step_sim *sub, int j, double eps)
{
	const struct des *d = &sub->d;
	const struct des_task *t = d->tasks;
	double old_end[DES_MAX_STREAMS];
	int seen[DES_MAX_STREAMS] = {0}, i, st;

	for (st = 0; st < d->nstreams; st++)
		old_end[st] = -1;
	for (i = 0; i < sub->cut_zone[j] && i < d->ntasks; i++)
		if (t[i].end > old_end[t[i].stream])
			old_end[t[i].stream] = t[i].end;
	for (i = sub->cut_post[j]; i < d->ntasks; i++) {
		st = t[i].stream;
		if (seen[st] || d->streams[st].cls == DES_CPU)
			continue;
		seen[st] = 1;
		if (old_end[st] >= 0 && t[i].start <= old_end[st] + eps)
			return 1;
	}
	return 0;
}

/* Whether the shorter step in sub ran its two periods before (forward) or
 * after (backward) the cut alike: in each pass every task of the second starts
 * and ends one period after its counterpart in the first (the largest shift,
 * that of the slowest stream), or less on the host thread, launching further
 * ahead of the GPUs each period: allowed when nothing that keeps the period
 * ever waits for it, directly or through others, from that pass on (with more
 * periods it would be further ahead still and waited for no more). A device
 * stream running ahead (an NCCL stream all-gathering ahead of the compute)
 * fails: where its collectives land against the compute, the exposed
 * communication, would move from period to period. */
static int cut_timing(const struct step_sim *sub, struct cut_run *cr, unsigned char *src)
{
	const struct des *d = &sub->d;
	const struct des_task *t = d->tasks;
	double T = 0, ss, se, eps;
	int j, i, n, b0, end, e, v, first = d->ntasks, ok = 1;

	memset(cr, 0, sizeof *cr);
	for (i = 0; i < d->ntasks; i++)
		T = t[i].end > T ? t[i].end : T;
	eps = 64 * DBL_EPSILON * T;
	memset(src, 0, (size_t)d->ntasks);
	for (j = 0; j < sub->cut_n && ok; j++) {
		b0 = sub->cut_bnd[j][0];
		n = sub->cut_bnd[j][1] - b0;
		if (n <= 0 || sub->cut_bnd[j][2] - sub->cut_bnd[j][1] != n)
			return 0;
		for (i = b0; i < b0 + n; i++) {
			ss = t[i + n].start - t[i].start;
			se = t[i + n].end - t[i].end;
			cr->P[j] = fmax(cr->P[j], fmax(ss, se));
		}
		cr->tol[j] = STEP_PERIOD_TOL * cr->P[j] + eps;
		if (!(cr->P[j] > cr->tol[j]))
			return 0;
		if (old_tasks_wait(sub, j, eps))
			return 0;
		end = j + 1 < sub->cut_n ? sub->cut_bnd[j + 1][0] : d->ntasks;
		for (i = b0; i < b0 + n; i++) {
			ss = t[i + n].start - t[i].start;
			se = t[i + n].end - t[i].end;
			if (fabs(ss - cr->P[j]) <= cr->tol[j] && fabs(se - cr->P[j]) <= cr->tol[j])
				continue;
			if (ss > cr->P[j] - cr->tol[j] || se > cr->P[j] - cr->tol[j] ||
			    d->streams[t[i].stream].cls != DES_CPU)
				return 0;  /* neither keeping the period nor a host ahead of it */
			/* ahead: the pass's tasks on its stream are sources of drift */
			for (v = b0; v < end; v++)
				src[v] |= t[v].stream == t[i].stream;
			cr->drift = 1;
			first = b0 < first ? b0 : first;
		}
	}
	/* 2: bound by a source, directly or through tasks so bound */
	for (i = first; cr->drift && i < d->ntasks && ok; i++) {
		if (!src[i])
			continue;
		for (e = t[i].edge; e >= 0; e = d->edges[e].next) {
			v = d->edges[e].to;
			if (t[v].start - t[i].end <= eps && !(src[v] & 1))
				src[v] |= 2;
		}
		ok = !(src[i] == 2);
	}
	return ok;
}

/* What one period of every pass adds to step r (the tasks of each pass's
 * second period, summed as results() sums them; the exposure between a pair
 * of marks whose task kept the period) into inc. Returns -1 when no marked
 * pair kept it. */
static int period_sums(const struct step_sim *sub, const struct cut_run *cr, struct step_result *inc)
{
	const struct des *d = &sub->d;
	double dt;
	int j, i, k, n, m;

	memset(inc, 0, sizeof *inc);
	for (j = 0; j < sub->cut_n; j++) {
		for (i = sub->cut_bnd[j][1]; i < sub->cut_bnd[j][2]; i++) {
			const struct des_task *t = &d->tasks[i];
			if (!(d->first[i].flag & DES_ON_RANK))
				continue;
			dt = t->end - t->start;
			switch (d->first[i].cls) {
			case DES_COMPUTE: inc->compute += dt; break;
			case DES_COPY: inc->copy += dt; break;
			case DES_HOST: inc->host_optimizer += dt; break;
			default: break;
			}
			if (t->coll >= 0)
				inc->comm += dt;
			if (t->tag == T_TP)
				inc->comm_tp += dt;
			else if (t->tag == T_OPT)
				inc->optimizer += dt;
		}
		n = sub->cut_bnd[j][1] - sub->cut_bnd[j][0];
		for (k = 0; k < 8 && (i = sub->cut_mk[j][k][0]) >= 0; k++)
			if (fabs(d->tasks[i + n].start - d->tasks[i].start - cr->P[j]) <= cr->tol[j])
				break;
		if (k == 8 || i < 0)
			return -1;
		m = sub->cut_mk[j][k][1];
		inc->exposed_comm += d->mark_exposed[sub->cut_mk[j][k][2]] - d->mark_exposed[m];
	}
	return 0;
}

/* Step r grown by n periods that each add inc and P of time; the rates
 * follow (sub's FLOPs). */
static void blocks_extend(const struct step_sim *sub, const struct scenario *s, const struct graph *g,
			  const struct step_result *inc, const struct cut_run *cr, int64_t n, struct step_result *r)
{
	double k = (double)n, P = 0;
	int j;

	for (j = 0; j < sub->cut_n; j++)  /* each pass's period shifts what follows it */
		P += cr->P[j];
	r->time += k * P;
	r->compute += k * inc->compute;
	r->comm += k * inc->comm;
	r->exposed_comm += k * inc->exposed_comm;
	r->comm_tp += k * inc->comm_tp;
	r->optimizer += k * inc->optimizer;
	r->copy += k * inc->copy;
	r->host_optimizer += k * inc->host_optimizer;
	rates(sub, s, g, r);  /* events: those the shorter step processed */
}

/* The step of s over g from its shorter step (step.h); resim: it may keep its
 * task graph. Returns 0 (r filled), -1 when the blocks are not periodic
 * enough (nothing filled), or an error code (e filled). */
static int blocks_step(struct step_sim *ss, const struct scenario *s, const struct graph *g, int64_t mb,
		       int resim, struct step_result *r, struct err *e)
{
	struct step_blocks *k = ss->blk;
	struct step_result inc;
	struct cut_run cr;
	long b0;
	int rc;

	if (!k && !(k = ss->blk = calloc(1, sizeof *k)))
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	if (!k->made) {
		if (step_sim_create(&k->sub))
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
		k->sub.full = 1;
		k->made = 1;
	}
	k->sub.each_op = ss->each_op;
	if (!resim)
		k->planned = !blocks_plan(ss, s, g, mb, k);
	if (!k->planned)
		return -1;
	if (sub_cut(&k->sub, g, &k->per, k->lo, k->hi, k->per.p))
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	if (!resim)
		k->sub.built = 0;
	b0 = k->sub.builds;
	rc = step_resimulate(&k->sub, s, g, mb, r, e);
	ss->builds += k->sub.builds - b0;
	if (rc)
		return rc;
	if (!k->sub.chk) {  /* the builder's state: the same at every micro-batch */
		k->planned = 0;
		return -1;
	}
	if (vec_grow((void **)&k->src, &k->capsrc, k->sub.d.ntasks, 1))
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	if (!cut_timing(&k->sub, &cr, k->src) || period_sums(&k->sub, &cr, &inc))
		return -1;
	blocks_extend(&k->sub, s, g, &inc, &cr, k->left, r);
	ss->blocks = 1;
	return 0;
}

/* Every block simulated: the task graph built in ss. */
static int simulate_full(struct step_sim *ss, const struct scenario *s, const struct graph *g,
			 int64_t micro_batch, struct step_result *r, struct err *e)
{
	struct bld b;

	ss->g = g;
	ss->whole = 0;
	if (setup(&b, ss, s, g, micro_batch) || build(&b) || remember(ss, s, g, b.recompute))
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory building the step's task graph");
	ss->whole = 1;
	ss->builds++;
	return run(&b, r, e);
}

int step_simulate(struct step_sim *ss, const struct scenario *s, const struct graph *g,
		  int64_t micro_batch, struct step_result *r, struct err *e)
{
	int rc;

	if (micro_batch < 1)
		return err_set(e, ERR_INPUT, s->file, 0, "step simulation needs a micro-batch of at least 1");
	ss->g = g;
	ss->built = ss->whole = ss->blocks = 0;
	if (!ss->full) {
		rc = blocks_step(ss, s, g, micro_batch, 0, r, e);
		remember_settings(ss, s, g);
		if (rc >= 0)
			return rc;
	}
	return simulate_full(ss, s, g, micro_batch, r, e);
}

/* The task graph of every block of s over g at micro_batch in ss->d, re-timed
 * when the one there was built for the same settings (the same tasks and
 * dependencies), else built; b set up for it. With timed 0 a graph kept is
 * not re-timed (its kernel times stay the last run's; step_bound reads
 * op_times's). Returns 0 or an error code. */
static int whole_graph(struct step_sim *ss, const struct scenario *s, const struct graph *g,
		       int64_t micro_batch, struct bld *b, int timed, struct err *e)
{
	int i;

	if (ss->whole && same_settings(ss, s, g)) {
		if (setup(b, ss, s, g, micro_batch))
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory building the step's task graph");
		op_times(b);
		tp_scale(b);  /* tp_marks's, the graph being the one marked */
		for (i = 0; i < g->nops && op_pattern(ss, i) == ss->pos[i]; i++)
			;
		if (i == g->nops) {
			ss->g = g;
			if (timed)
				retime(b);
			return 0;
		}
	}
	ss->g = g;
	ss->built = ss->whole = ss->blocks = 0;
	if (setup(b, ss, s, g, micro_batch) || build(b) || remember(ss, s, g, b->recompute))
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory building the step's task graph");
	ss->whole = 1;
	ss->builds++;
	return 0;
}

int step_resimulate(struct step_sim *ss, const struct scenario *s, const struct graph *g,
		    int64_t micro_batch, struct step_result *r, struct err *e)
{
	struct bld b;
	int rc;

	if (micro_batch < 1 || !same_settings(ss, s, g))
		return step_simulate(ss, s, g, micro_batch, r, e);
	ss->blocks = 0;
	if (!ss->full && ss->blk && ss->blk->planned) {  /* as step_simulate decides */
		rc = blocks_step(ss, s, g, micro_batch, 1, r, e);
		if (rc >= 0)
			return rc;
	}
	if (!ss->whole)
		return simulate_full(ss, s, g, micro_batch, r, e);
	rc = whole_graph(ss, s, g, micro_batch, &b, 1, e);
	return rc ? rc : run(&b, r, e);
}

/* des_stream_bounds of the task graph in ss re-timed at b->B, from its terms
 * (bound_task): the same sums in the same order, without re-timing it. */
static void bound_sums(const struct bld *b, struct step_bound *out)
{
	struct step_sim *ss = b->ss;
	const struct des *d = b->d;
	double x, sum, kern;
	int i, n = d->nstreams < STEP_BOUND_STREAMS ? d->nstreams : STEP_BOUND_STREAMS;
	struct coll_cost c;

	for (i = 0; i < ss->ndyn; i++) {  /* as retime costs them */
		const struct step_dyn *y = &ss->dyn[i];
		if (ss->drep[i] != i) {
			ss->dynt[i] = ss->dynt[ss->drep[i]];
			continue;
		}
		coll_cost(y->op, b->algo, y->x * b->B * y->mult, dyn_group(b, y->grp), &c);
		ss->dynt[i] = coll_time(&c);
	}
	for (i = 0; i < n; i++) {
		const struct step_bterm *t = ss->bsort + ss->bfirst[i], *end = ss->bsort + ss->bfirst[i + 1];
		const double *tv[3] = {NULL, ss->tf, ss->tb};  /* a kernel's time by kind: BT_FWD, BT_BWD */
		const double factor = des_work_factor(d, i);  /* des_work_least's, once per stream */
		if (!ss->bvar[i]) {  /* no kernel there (bound_task) */
			out->stream[i] = ss->bconst[i];
			out->kern[i] = 0;
			continue;
		}
		_Static_assert(BT_FWD == 1 && BT_BWD == 2, "term kinds index tv");
		for (sum = kern = 0; t < end; t++) {
			if (t->kind == BT_CONST) {
				sum += t->v;
			} else if (t->kind == BT_DYN) {
				sum += ss->dynt[t->idx];
			} else {
				x = tv[t->kind][t->idx];
				x = (x > 0 ? x : 0) * factor;  /* the duration as retime stores it */
				sum += x;
				kern += x;
			}
		}
		out->stream[i] = sum;
		out->kern[i] = kern;
	}
	out->nstream = n;
}

int step_bound(struct step_sim *ss, const struct scenario *s, const struct graph *g, int64_t micro_batch,
	       int path, struct step_bound *out, struct err *e)
{
	struct bld b;
	int rc;

	if (micro_batch < 1)
		return err_set(e, ERR_INPUT, s->file, 0, "step simulation needs a micro-batch of at least 1");
	if (!ss->full)
		return err_set(e, ERR_SYSTEM, NULL, 0, "step_bound needs a simulation of every block (ss->full)");
	rc = whole_graph(ss, s, g, micro_batch, &b, 0, e);
	if (rc)
		return rc;
	if (!ss->bready && bound_prepare(ss))
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory bounding the step's task graph");
	if (ss->bok) {
		bound_sums(&b, out);
	} else {  /* a kernel off the compute streams: the task graph re-timed, summed */
		retime(&b);
		des_stream_bounds(&ss->d, out->stream, STEP_BOUND_STREAMS, &out->nstream);
		memset(out->kern, 0, sizeof out->kern);  /* kernels not told apart */
	}
	out->path = 0;
	if (path) {
		if (ss->bok)
			retime(&b);
		if (vec_grow((void **)&ss->pstart, &ss->cappstart, ss->d.ntasks, sizeof *ss->pstart))
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory bounding the step's task graph");
		out->path = des_path_bound(&ss->d, ss->pstart);
	}
	out->grad_accum = b.accum;
	return 0;
}

static struct op_in op_in_of(const struct bld *b, const struct op_consts *k)
{
	struct op_in x;

	memset(&x, 0, sizeof x);
	x.k = *k;
	x.peak = b->peak;
	x.peak_vec = b->peak_vec;
	x.mem_bw = b->mem_bw;
	x.wbytes = b->wbytes;
	x.gbytes = b->gbytes;
	x.straggle = b->straggle;
	x.prec = b->prec;
	x.cast_weights = b->cast_weights;
	return x;
}

/* The forward and backward times of each class's first op (ss->kop) at
 * b->B under set in (an index into ss->kin), as op_time gives them: from
 * the memo, or timed and remembered. NULL when out of memory. */
static const double *kernel_times(struct bld *b, const struct op_consts *k, int in)
{
	struct step_sim *ss = b->ss;
	double *t;
	int i, m;

	for (m = 0; m < ss->nkm; m++)
		if (ss->km[m].in == in && ss->km[m].B == b->B)
			return ss->kmt + (size_t)m * 2 * (size_t)ss->nkop;
	if (ss->nkm == STEP_KMEMO_MAX)  /* full: emptied (its sets kept) */
		ss->nkm = 0;
	if (vec_grow((void **)&ss->km, &ss->capkm, ss->nkm + 1, sizeof *ss->km) ||
	    vec_grow((void **)&ss->kmt, &ss->capkmt, (ss->nkm + 1) * 2 * ss->nkop, sizeof *ss->kmt))
		return NULL;
	t = ss->kmt + (size_t)ss->nkm * 2 * (size_t)ss->nkop;
	for (i = 0; i < ss->nkop; i++) {
		op_time(b, k, ss->kop[i]);  /* as op_times would (skip is NULL: nothing left out) */
		t[2 * i] = ss->tf[ss->kop[i]];
		t[2 * i + 1] = ss->tb[ss->kop[i]];
	}
	ss->km[ss->nkm++] = (struct kmemo){in, b->B};
	return t;
}

int step_kernel_least(struct step_sim *ss, const struct scenario *s, const struct graph *g,
		      const int64_t *mbs, int n, double *least, struct err *e)
{
	struct bld b;
	struct op_consts k;
	struct op_in in;
	const double *t;
	double f, sum;
	int i, j, o, u, x;

	ss->built = ss->whole = ss->blocks = 0;  /* its kernel tables are overwritten */
	if (setup(&b, ss, s, g, 1))
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory bounding the step");
	b.skip = NULL;  /* every op's kernels, whatever a shorter step left out */
	if (ss->kg != g || ss->kvarlen != varlen(&b)) {  /* the same graph's tables otherwise */
		kernel_tables(&b);
		for (i = 0; i < g->nops; i++)
			ss->kw[i] = 0;
		for (i = 0; i < g->nops; i++)  /* op_times copies the first of a class to the others */
			ss->kw[ss->rep[i]] += 1;
		for (ss->nkop = 0, i = 0; i < g->nops; i++)
			if (ss->kw[i] > 0)
				ss->kop[ss->nkop++] = i;
		ss->kg = g;
		ss->kvarlen = varlen(&b);
		ss->nkin = ss->nkm = 0;  /* the memo's times are of the tables replaced */
	}
	if (memcmp(&ss->kce, b.ce, sizeof ss->kce)) {  /* and of the efficiencies */
		ss->kce = *b.ce;
		ss->nkin = ss->nkm = 0;
	}
	for (i = 0; i < g->nops; i++)  /* the recomputed forwards, by class (recompute) */
		ss->kwr[i] = 0;
	if (b.recompute != RECOMPUTE_NONE) {  /* every strategy's, DataParallel's replicas too */
		graph_units(&b);
		for (u = 1; u <= g->nblocks; u++)
			for (i = ss->gfirst[u]; i >= 0 && i <= ss->glast[u]; i++)
				if (recomputes(&b, i))
					ss->kwr[ss->rep[i]] += 1;
	}
	f = des_least_factor(compute_slow(&b), DES_COMPUTE);  /* des_work_least's, the compute stream */
	k = op_consts(&b);
	in = op_in_of(&b, &k);
	for (x = 0; x < ss->nkin && memcmp(&ss->kin[x], &in, sizeof in); x++)
		;
	if (x == ss->nkin) {
		if (vec_grow((void **)&ss->kin, &ss->capkin, ss->nkin + 1, sizeof *ss->kin))
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory bounding the step");
		ss->kin[ss->nkin++] = in;
	}
	for (j = 0; j < n; j++) {
		if (mbs[j] < 1)
			return err_set(e, ERR_INPUT, s->file, 0, "step simulation needs a micro-batch of at least 1");
		b.B = (double)mbs[j];
		if (!(t = kernel_times(&b, &k, x)))
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory bounding the step");
		for (sum = 0, i = 0; i < ss->nkop; i++) {  /* the first op of each class, in op order */
			o = ss->kop[i];
			sum += ss->kw[o] * (t[2 * i] * f + t[2 * i + 1] * f) + ss->kwr[o] * t[2 * i] * f;
		}
		least[j] = sum;
	}
	return 0;
}

double step_bound_at(const struct step_bound *one, const struct step_bound *two, int64_t ga)
{
	double lb = 0, x;
	int i;

	if (ga == one->grad_accum)
		lb = one->path;
	if (two && ga == two->grad_accum && two->path > lb)
		lb = two->path;
	for (i = 0; i < one->nstream; i++) {
		x = one->stream[i];
		if (ga > 1 && two && i < two->nstream)
			x = two->stream[i] + (double)(ga - 2) * (two->stream[i] - one->stream[i]);
		lb = x > lb ? x : lb;
	}
	return lb;
}

double step_bound_least(const struct step_bound *one, int64_t ga)
{
	double lb = 0, x;
	int i;

	if (ga <= 1)
		return step_bound_at(one, NULL, 1);
	lb = ga == one->grad_accum ? one->path : 0;
	for (i = 0; i < one->nstream; i++) {
		x = (double)ga * one->kern[i];
		lb = x > lb ? x : lb;
	}
	return lb;
}

/* ---- steps of many micro-steps (step.h) ------------------------------------------ */

void step_extend(const struct step_result *a, const struct step_result *b, int64_t ga,
		 struct step_result *out)
{
	double n = (double)(ga - b->grad_accum), sps;
	int64_t dp = b->global_batch / (b->micro_batch * b->grad_accum);
	struct step_result r = *b;

	r.time += n * (b->time - a->time);
	r.compute += n * (b->compute - a->compute);
	r.comm += n * (b->comm - a->comm);
	r.exposed_comm += n * (b->exposed_comm - a->exposed_comm);
	r.comm_tp += n * (b->comm_tp - a->comm_tp);
	r.optimizer += n * (b->optimizer - a->optimizer);
	r.copy += n * (b->copy - a->copy);
	r.host_optimizer += n * (b->host_optimizer - a->host_optimizer);
	r.grad_accum = ga;
	r.global_batch = b->micro_batch * ga * dp;
	sps = r.time > 0 ? (double)r.global_batch / r.time : 0;
	if (b->samples_per_s > 0) {
		r.tokens_per_s *= sps / b->samples_per_s;
		r.mfu *= sps / b->samples_per_s;
		r.hfu *= sps / b->samples_per_s;
		r.flops_per_gpu *= sps / b->samples_per_s;
	}
	r.samples_per_s = sps;
	*out = r;
}

/* Whether the steps of n, n + 1 and n + 2 micro-steps grow by the same period. */
static int same_period(const struct step_result *r0, const struct step_result *r1,
		       const struct step_result *r2)
{
	double tol = STEP_PERIOD_TOL * fabs(r2->time - r1->time);

	return fabs((r2->time - r1->time) - (r1->time - r0->time)) <= tol &&
		fabs((r2->compute - r1->compute) - (r1->compute - r0->compute)) <= tol &&
		fabs((r2->comm - r1->comm) - (r1->comm - r0->comm)) <= tol &&
		fabs((r2->exposed_comm - r1->exposed_comm) - (r1->exposed_comm - r0->exposed_comm)) <= tol;
}

int step_accumulate(int64_t ga, step_micro_fn sim, void *ctx, struct step_result *out, struct err *e)
{
	struct step_result r[3];
	uint64_t events = 0;
	int64_t k;
	int rc = 0, settled = 0;

	if (ga <= STEP_ACCUM_FULL)
		return sim(ctx, ga, out, e);
	memset(r, 0, sizeof r);
	for (k = 1; k <= STEP_PERIOD_PROBE && !settled && !rc; k++) {
		r[0] = r[1];
		r[1] = r[2];
		rc = sim(ctx, k, &r[2], e);
		events += r[2].events;
		settled = k >= 3 && same_period(&r[0], &r[1], &r[2]);
	}
	if (rc)
		return rc;
	step_extend(&r[1], &r[2], ga, out);
	out->events = events;
	out->period_settled = settled;
	return 0;
}

/* step_run's simulations of k micro-steps: s with grad_accum k, in ss. */
struct run_ctx {
	struct step_sim *ss;
	struct scenario *w;      /* a copy of the scenario (its pointers stay the original's) */
	const struct graph *g;
	int64_t mb;
};

static int run_micro(void *ctx, int64_t k, struct step_result *r, struct err *e)
{
	struct run_ctx *c = ctx;

	c->w->s.training.grad_accum = k;
	return step_simulate(c->ss, c->w, c->g, c->mb, r, e);
}

int step_run(const struct scenario *s, const struct graph *g, struct prediction *p, struct err *e)
{
	struct step_sim ss;
	struct run_ctx c = {&ss, malloc(sizeof *c.w), g, p->micro_batch > 0 ? p->micro_batch : 1};
	int rc;

	if (!c.w || step_sim_create(&ss)) {
		free(c.w);
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	}
	memcpy(c.w, s, sizeof *c.w);  /* read-only: its pointers stay s's */
	rc = step_accumulate(s->s.training.grad_accum, run_micro, &c, &p->step, e);
	/* no micro-batch from the scenario, and none from the memory model (not
	 * run, or not even one sample fits): 1 stands in */
	p->step.batch_assumed = p->micro_batch <= 0 ||
		(s->s.training.micro_batch <= 0 && p->max_micro_batch == 0);
	step_sim_delete(&ss);
	free(c.w);
	return rc;
}

/* ---- trace ---------------------------------------------------------------------- */

/* What each tag is, as traces name it. */
static const char *const kinds[T_COUNT] = {"issue ", "wait", "", "bwd ", "recompute ",
	"optimizer step", "all-gather", "reduce-scatter", "all-reduce", "TP all-reduce",
	"broadcast", "gather", "reduce", "copy to GPU", "copy to host",
	"optimizer step (host)", "issue ", "FSDP unit hooks", "FSDP2 copy-in/out",
	"FSDP flat gradient", "FSDP shard cast", "AccumulateGrad"};

const char *step_task_kind(const struct des_task *t)
{
	return t->tag >= 0 && t->tag < T_COUNT ? kinds[t->tag] : "?";
}

static const char *task_name(void *ctx, const struct des_task *t, char *buf, size_t n)
{
	const struct step_sim *ss = ctx;
	const struct graph *g = ss->g;
	char name[GRAPH_NAME], size[32];
	const char *op = t->label >= 0 && t->label < g->nops ? graph_op_name(g, t->label, name) : "";
	const char *const *what = kinds;

	if (t->coll >= 0) {
		const struct coll_cost *c = &ss->d.colls[t->coll].c;
		units_format(size, sizeof size, c->bytes, UNIT_BYTES);
		snprintf(buf, n, "%s%s %s (%s)", t->tag == T_TP ? "TP " : "", coll_op_name(c->op), size,
			 coll_algo_name(c->algo));
		return buf;
	}
	switch (t->tag) {
	case T_FWD: case T_BWD: case T_RECOMP: case T_DISPATCH:
		snprintf(buf, n, "%s%s", what[t->tag], t->label >= 0 ? op : "optimizer step");
		break;
	case T_ISSUE_COLL:  /* label: the collective's tag */
		snprintf(buf, n, "issue %s", t->label >= 0 && t->label < T_COUNT ? what[t->label] : "collective");
		break;
	default:
		snprintf(buf, n, "%s", t->tag >= 0 && t->tag < T_COUNT ? what[t->tag] : "?");
	}
	return buf;
}

int step_trace_write(const struct step_sim *ss, const char *path, struct err *e)
{
	char tmp[4096];
	FILE *f;
	int first = 1, ok;

	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return err_set(e, ERR_INPUT, path, 0, "cannot write the trace: %s", strerror(errno));
	fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
	fprintf(f, "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"rank 0 (every rank alike)\"}}");
	first = 0;
	if (ss->d.nstreams && ss->d.streams[ss->d.nstreams - 1].rank == 1)
		fprintf(f, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"replicas (GPUs 1..n-1)\"}}");
	des_trace_events(&ss->d, f, &first, task_name, (void *)ss);
	fprintf(f, "\n]}\n");
	ok = !ferror(f);
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path)) {
		int rc = err_set(e, ERR_SYSTEM, path, 0, "writing the trace failed: %s", strerror(errno));
		remove(tmp);
		return rc;
	}
	return 0;
}

int step_trace(const struct scenario *s, int64_t micro_batch, const char *path, struct err *e)
{
	struct step_sim ss;
	struct step_result r;
	struct graph g;
	struct graph_opts o;
	struct scenario *w = malloc(sizeof *w);
	int rc;

	if (!w)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	memcpy(w, s, sizeof *w);  /* read-only: its pointers stay s's */
	if (w->s.training.grad_accum > STEP_ACCUM_FULL)
		w->s.training.grad_accum = STEP_ACCUM_FULL;
	predict_graph_opts(w, &o);
	rc = graph_build(&g, &w->model, &o, e);
	if (!rc && step_sim_create(&ss))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	else if (!rc) {
		ss.full = 1;  /* a trace shows every block */
		rc = step_simulate(&ss, w, &g, micro_batch > 0 ? micro_batch : 1, &r, e);
		if (!rc)
			rc = step_trace_write(&ss, path, e);
		step_sim_delete(&ss);
	}
	graph_free(&g);
	free(w);
	return rc;
}
