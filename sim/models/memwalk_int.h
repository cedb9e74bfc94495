/*
 * memwalk_int.h — what memwalk.c (the autograd walk) and memstrat.c (what each
 * strategy allocates around it) share while a tape is built. Private to them.
 */
#ifndef SHARDCAST_MEMWALK_INT_H
#define SHARDCAST_MEMWALK_INT_H

#include "life.h"
#include "memwalk.h"
#include "wrap.h"


struct wk {
	const struct scenario *s;
	const struct graph *g;
	const struct fw_profile *pf;
	const struct plan *pl;  /* the strategy's plan (s->plan) */
	struct mem_tape *t;
	int role, mech, eager, mixed, offload, zstage; /* copies of the plan's */
	int keep_grads;       /* zero_grad keeps .grad allocated (the plan's) */
	int phase, micro;
	int nmicro;           /* micro-steps walked (1, or 2 with accumulation) */
	struct mem_script *rec; /* the script being recorded, NULL none */
	int in_hook;          /* 1: events come from a strategy hook (not recorded) */
	int64_t N;            /* ranks sharing model states */
	int64_t ndp;          /* replicas (dp) */
	int wp, wg, wm, wo, wcast; /* bytes per element: working params, grads, master, optimizer, autocast */
	int64_t P;            /* parameters per rank (elements) */
	int64_t table;        /* elements of the token table (per TP rank) */
	int owner;            /* op owning the token table, -1 none */
	int64_t tied_held;    /* bytes: the tied table's gradients autograd holds until the
				 owner's arrives (memstrat.c tied_grad), 0 none */
	int cast_op;          /* op whose autocast weight gradient awaits its fp32 cast, -1 none
				 (memstrat.c pt_param_grads, pt_cast_grads) */
	int oom;
	struct life lf;       /* the graph's lifetimes (life.h): regions, keepers, frees */
	/* per tensor */
	char *fl, *rl;        /* forward copy live, replay copy live */
	int *gblk;            /* gradient block, -1 none */
	/* gradient blocks */
	int *bsz;             /* the tensor whose size each block has */
	int *bref;
	int nblk, capblk;
	/* per op */
	char *pg;             /* (nops x GRAPH_OP_PTENSORS) per-tensor gradient allocated: 1 in
				 the width autograd writes, 2 in FSDP2's accumulation width (wacc) */
	char *castl;          /* autocast weight copy live */
	/* units (MECH_UNITS) and per-op fetch (MECH_ZERO3) */
	struct wrap_unit *u;  /* wrap.h's units (wrap_units_build) */
	int nu, capu;
	int *uown;            /* per op: unit owning its parameters */
	int *ufoff, *ufirst;  /* units whose first op is op i, ascending (CSR over ops) */
	int *uloff, *ulast;   /* units whose last op is op i, ascending (CSR over ops) */
	int *uooff, *uops;    /* ops owning parameters of unit u, descending (CSR over units) */
	int *unext;           /* (2 nu) per unit: the next unit in backward [2u] and forward
				 [2u + 1] order, -1 none (memstrat.c next_unit) */
	char *ul, *ugl, *usg; /* gathered, unsharded grad, grad shard allocated */
	char *ufg;            /* FSDP1 no_sync: the unit's flat unsharded gradient kept (.grad) */
	int ulag;             /* FSDP1 forward prefetch: the unit whose end of backward waits for the
				 next unit's ops (plan.h post_lag), -1 none */
	int64_t *ush;         /* per unit: elements of its shard (FSDP2: the sum of the
				 per-parameter padded shards) */
	char *agl, *pfl, *arl;/* FSDP2, per unit: all-gather buffer, post-forward shards,
				 reduce-dtype all-reduce output (HSDP) allocated */
	int agheld, rsheld;   /* FSDP2: the unit whose all-gather buffer (forward) and
				 reduce-scatter input are kept for the next one, -1 none */
	int reshard_fwd, fwd_prefetch, bwd_prefetch;
	int wgat, wug, wsg, wrs, wstage, wmp, wagb, wfc;
	int wacc;             /* FSDP2 no_sync: plan_widths.accum_grad */
	int64_t *G, *pers;    /* ZeRO-3: fetched elements, persistent elements per op */
	char *zl;             /* ZeRO-3: gathered */
	int64_t zlive;        /* ZeRO-3: gathered elements */
	int64_t *after;       /* ZeRO-3: fetched elements after op i (reuse distance) */
	int *znext, *zprev;   /* ZeRO-3: the next op after / before op i that fetches (G > 0), -1 none */
	int zfrom[2], zcur[2], zok[2]; /* ZeRO-3, per direction (0 backward, 1 forward), when zok:
				 the op of the last prefetch and where it stopped (-1 the end);
				 the fetching ops between them are gathered (memstrat.c zero3_pre) */
	int zscan;            /* ZeRO-3: every prefetch from the next op (MEMWALK_PREFETCH_SCAN) */
	int stop_unfit;       /* MEMWALK_STOP_UNFIT */
	double host;          /* bytes per rank on the host */
};


/* Makes room for more events on w's tape (memwalk.c). Returns 0, or -1 and
 * sets w->oom. */
int memwalk_grow(struct wk *w);

/* Appends the walk's own event e to the script being recorded. Returns 0, or
 * -1 and sets w->oom. */
int memwalk_record(struct wk *w, const struct mem_event *e);

/* Appends one event to the tape; sizes are bytes (fixed) and bytes per sample
 * (ps); pooled = 1 when the framework's allocator serves it. Empty events are
 * not recorded. */
static inline void memwalk_event(struct wk *w, int sign, int cat, int what, int op, int64_t fixed,
				 int64_t ps, int pooled)
{
	struct mem_tape *t = w->t;

	if (fixed == 0 && ps == 0)
		return;
	if (t->n == t->cap && memwalk_grow(w))
		return;
	if (!pooled) {  /* outside the allocator (mem_tape.outside): its fixed bytes */
		t->outside_now += sign * fixed;
		t->outside = t->outside_now > t->outside ? t->outside_now : t->outside;
	}
	t->ev[t->n++] = (struct mem_event){
		.fixed = fixed, .per_sample = ps, .op = op, .what = (int16_t)what, .cat = (int8_t)cat,
		.sign = (int8_t)sign, .phase = (int8_t)w->phase, .micro = (int8_t)w->micro,
		.pooled = (int8_t)pooled, .pad = 0};
	if (w->rec && !w->in_hook)
		memwalk_record(w, &t->ev[t->n - 1]);
}

static inline int64_t cdiv(int64_t a, int64_t b)
{
	return b > 0 ? (a + b - 1) / b : a;
}

static inline void alloc(struct wk *w, int cat, int what, int op, int64_t fixed)
{
	memwalk_event(w, +1, cat, what, op, fixed, 0, 1);
}

static inline void release(struct wk *w, int cat, int what, int op, int64_t fixed)
{
	memwalk_event(w, -1, cat, what, op, fixed, 0, 1);
}

static inline int64_t tbytes(const struct wk *w, int t)
{
	return (int64_t)graph_tensor_bytes(w->g, t);
}

/* An event of tensor tsr's size: per sample, or fixed (graph.h). */
static inline void act(struct wk *w, int sign, int what, int op, int tsr, int cat)
{
	if (w->g->t[tsr].fixed)
		memwalk_event(w, sign, cat, what, op, tbytes(w, tsr), 0, 1);
	else
		memwalk_event(w, sign, cat, what, op, 0, tbytes(w, tsr), 1);
}

static inline int kept(const struct wk *w, int t)
{
	return life_kept(&w->lf, w->g, t);
}

static inline int act_what(const struct wk *w, int t)
{
	if (w->g->t[t].producer < 0)
		return W_INPUT;
	return kept(w, t) ? W_SAVED : W_TEMP_ACT;
}

static inline int64_t shard(const struct wk *w, int64_t n)
{
	return cdiv(n, w->N);
}

/* Whether this micro-step's backward reduces its gradients (plan.h
 * plan_micro_syncs), from w->micro, which a script's replay sets too. */
static inline int walk_syncs(const struct wk *w)
{
	return plan_micro_syncs(w->pl, w->micro == w->nmicro - 1);
}

/* PyTorch's or DeepSpeed's engine (per-tensor autograd gradients, their
 * buffers), not the shardcast runtime's flat buffers. */
static inline int pt(const struct wk *w)
{
	return w->pl->engine != FW_SHARDCAST;
}

static inline int has_param_grads(const struct wk *w, int i)
{
	return w->g->ops[i].params > 0 || (w->g->ops[i].tied && w->owner >= 0);
}

/* memstrat.c helpers the FSDP2 walk (memfsdp2.c) shares: the next unit in
 * forward (fwd = 1) or backward order, the unit op i's gradient lands in,
 * and which Adam step temporaries apply (enum opt_impl, OPTI_DEFAULT none).
 * An op's parameter tensors are the graph's (graph_op_params).
 * memstrat_unit_grads_free: unit u's per-parameter gradients (PyTorch's
 * .grad of each, as the backward left them), freed at op, its ops
 * descending. */
int memstrat_next_unit(const struct wk *w, int u, int fwd);
int memstrat_opt_temp_kind(const struct wk *w);
void memstrat_unit_grads(struct wk *w, int i);
void memstrat_unit_grads_free(struct wk *w, int u, int op);
void memstrat_grad_shard(struct wk *w, int u, int op, int64_t bytes);

/* memfsdp2.c: FSDP2's units (plan.h layout LAYOUT_PER_PARAM): per-parameter
 * shards, the all-gather and reduce-scatter buffers and their handoff. */
int64_t memfsdp2_shard(const struct wk *w, int i, int k, int64_t n);
void memfsdp2_setup(struct wk *w);
void memfsdp2_fwd_pre(struct wk *w, int i);
void memfsdp2_fwd_post(struct wk *w, int i);
void memfsdp2_fwd_end(struct wk *w);
void memfsdp2_bwd_pre(struct wk *w, int i);
void memfsdp2_bwd_post(struct wk *w, int i);
void memfsdp2_bwd_end(struct wk *w);
void memfsdp2_step(struct wk *w);

/* memstrat.c: the strategy's part of the walk. configure returns 0 or -1 (out
 * of memory); the hooks run before/after an op's forward and backward. */
int memstrat_configure(struct wk *w);
void memstrat_setup(struct wk *w);
void memstrat_micro_begin(struct wk *w);
void memstrat_fwd_pre(struct wk *w, int i);
void memstrat_fwd_post(struct wk *w, int i);
void memstrat_fwd_end(struct wk *w);
void memstrat_bwd_begin(struct wk *w);
void memstrat_bwd_pre(struct wk *w, int i);
void memstrat_replay_fetch(struct wk *w, int i, int last);
void memstrat_param_grads(struct wk *w, int i);
void memstrat_bwd_post(struct wk *w, int i);
void memstrat_bwd_end(struct wk *w, int last_micro);
void memstrat_micro_end(struct wk *w);
void memstrat_step(struct wk *w);

#endif
