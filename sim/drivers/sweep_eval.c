/*
 * sweep_eval.c — evaluating a sweep's cells (see sweep.h): the hot path.
 *
 * Work is grouped by (model, sequence length). When a cell of a new group comes,
 * the model goes into the working scenario; each candidate, when the group
 * first needs it, has its validity checked, its graph found among those the
 * group has built (graphs depend only on the graph options: tensor
 * parallelism, dtype, autocast, flavour) and its allocation tapes built (one
 * without and one with gradient accumulation: a tape does not depend on the
 * micro-batch, memory.h). These are the only allocations, and the framework
 * profiles the only files read (once per process). A cell then evaluates tapes
 * at the micro-batches it tries and simulates a step per fitting candidate in
 * the step_sim the context keeps (step.h); simulations and memory breakdowns
 * of a (candidate, micro-batch) already done in the group are reused, the same
 * inputs giving the same bits, so a cell's results do not depend on which cells
 * came before it (what lets MPI ranks split the cells).
 *
 * Choosing the batch of a candidate in a cell with global batch G on dp
 * data-parallel ranks: G must be a multiple of dp; with per = G / dp samples per
 * rank, the micro-batch is per when it fits without accumulation, else the
 * largest divisor of per that fits with accumulation (grad_accum = per /
 * micro-batch); none when not even one sample fits. "Fits" is first read from
 * the largest micro-batch the search found, then checked by a replay at the
 * micro-batch shown or exported (fitting): the emulated allocator's fit is
 * not monotone in the micro-batch.
 */
#include "sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "jobrun.h"
#include "memory.h"
#include "memwalk.h"
#include "predict.h"
#include "profile.h"
#include "step.h"

/* Step simulations and memory breakdowns already done for a candidate in the
 * group: cells of other batch sizes often land on the same micro-batch (and
 * three or more micro-steps extrapolate from the same two simulations), and
 * the same inputs give the same bits. A candidate's first simulation in a group
 * also does those its other cells will need (one task graph for all its
 * micro-batches, step_resimulate), so the memos hold one entry per batch and
 * accumulation of the group: 2 x nbatch + 2 (sweep_ctx_create). */

struct step_memo {
	int64_t mb, ga;           /* 0: empty */
	struct step_result st;
};

struct mem_memo {
	int64_t mb;               /* 0: empty */
	int a;                    /* plan */
	struct sweep_result r;    /* the memory fields and note */
};

/* One candidate's state in the current group. */
struct slot {
	int state;                /* 0 not set up, 1 valid, 2 invalid */
	int graph;                /* index into ctx->g */
	int prepared;             /* slot_prepare done */
	int have[2];              /* maxb[a] known */
	int64_t maxb[2];          /* largest micro-batch that fits on the tape without (0) and with
				     (1) accumulation */
	int tapes[2];             /* how many tapes (GPU roles) the plan without and with has */
	char note[112];           /* why invalid */
	struct step_memo *sm;     /* (ctx->nmemo) */
	struct mem_memo *mm;      /* (ctx->nmemo) */
	int nsm, nmm;             /* entries filled so far (the next to replace: modulo nmemo);
				     only those are read, so a new group empties a memo by these */
	uint64_t bounded1;        /* (bit per batch index) the cells whose least step time is in
				     ctx->lbt: that of step_bound_least (bounds) */
	uint64_t bounded2;        /* of them, those with step_bound_at's too, or with no
				     accumulation (nothing tighter to make) */
	uint64_t bounded0;        /* the cells whose least time from its kernels alone is in
				     ctx->lb0 (bounds0) */
	int bounded_any;          /* those of its kernels at any micro-batch are in ctx->lba
				     (bounds_any) */
	int planned;              /* plan holds its plan (apply) */
	struct plan plan;
	struct mem_kept kept[2];  /* its tapes without (0) and with (1) accumulation as built,
				     while ctx->kept_bytes allows (tapes); bytes 0: none */
};

/* A candidate of the cell that fits, its step not simulated yet (SWEEP_TABLES). */
struct pend {
	int i;                    /* candidate */
	int64_t mb, ga;
	double ub;                /* the most its score can be */
	int level;                /* what ub is from (upper_score): -1 its kernels at any
				     micro-batch (its memory not searched yet), 0 its kernels,
				     1 one micro-step's task graph, 2 every bound bounds() makes */
};

struct sweep_ctx {
	const struct sweep *sw;
	struct scenario work;     /* base + the group's model + a candidate's training */
	struct step_sim ss;
	struct step_sim *ks;      /* (ncand; nks made) the kernels' bounds (step_kernel_least), one per
				     graph of the group: each keeps its graph's kernel tables and
				     kernel times (kernel_least) */
	int nks;
	struct fw_profile prof[3];/* by engine (enum framework) */
	int prof_loaded[3];
	int group;                /* model x nseq + seq; -1 none */
	int group_note;           /* 1: every candidate of the group is invalid (note) */
	char note[112];
	struct graph *g;          /* (ncand) graphs of the group */
	struct graph_opts *go;
	int ng;
	struct slot *slots;       /* (ncand) */
	struct mem_plan scratch;  /* the tapes of one candidate: built, evaluated, built over */
	struct mem_scripts scripts; /* the group's walks, replayed by its tapes (memwalk.h) */
	int sc_slot, sc_a;        /* whose (-1 none) and which */
	size_t kept_bytes;        /* what the slots' kept tapes hold (at most SWEEP_KEPT_BYTES) */
	struct step_memo *sm;     /* (ncand x nmemo) the slots' memos */
	struct mem_memo *mm;
	int nmemo;
	int lo, hi;               /* the cells this context evaluates (sweep_ctx_cells) */
	int detail;            /* enum sweep_detail */
	double *lbt;              /* (ncand x nbatch) least step time of each candidate in each cell
				     of the group (s; 0: it does not fit), SWEEP_TABLES */
	double *lb0;              /* (ncand x nbatch) the same from its kernels alone (bounds0) */
	double *lba;              /* (ncand x nbatch) the same at whatever micro-batch its memory
				     search would choose (bounds_any) */
	unsigned char *waiting;   /* (ncand) the cell's candidates whose memory the tables search
				     only if their bound leaves them in (eval_cand) */
	struct step_bound *bnd;   /* (2 x nbatch) a candidate's bounds while they are made */
	struct step_bound *one;   /* (ncand x nbatch) with global batches: each candidate's bounds
				     of one micro-step in the group's cells, kept for those of
				     two (bounds) */
	int *order;               /* (ncand) the candidates in the order a cell evaluates them
				     (by_settings) */
	struct pend *pend;        /* (ncand) the cell's candidates waiting for their step */
	int *done;                /* (ncand) those of them simulated */
	struct prediction pred;   /* the job model's input and output (time_to_train) */
	struct sweep_counts k;
};

/* Candidates a and b (indices into the sweep's ctx) ordered by every
 * setting but the node count, then the node count: those that differ only in
 * it come one after the other, and where they build the same allocation tape
 * the next finds the last one's runs in the scratch plan (memrun_again;
 * bench/sweep-1m.ini: about 4,500 of its tables' 11,500 tapes). Each result
 * depends on its candidate alone, so the order changes no output. */
static int by_settings(const void *a, const void *b, void *ctx)
{
	const struct sweep_cand *c = ctx, *x = &c[*(const int *)a], *y = &c[*(const int *)b];
	const int64_t kx[] = {x->tp, x->strategy, x->sharding, x->fsdp_version, x->precision, x->recompute,
			      x->offload, x->nodes, *(const int *)a};
	const int64_t ky[] = {y->tp, y->strategy, y->sharding, y->fsdp_version, y->precision, y->recompute,
			      y->offload, y->nodes, *(const int *)b};
	size_t k;

	for (k = 0; k < sizeof kx / sizeof kx[0]; k++)
		if (kx[k] != ky[k])
			return kx[k] < ky[k] ? -1 : 1;
	return 0;
}

struct sweep_ctx *sweep_ctx_create(const struct sweep *sw)
{
	struct sweep_ctx *c = calloc(1, sizeof *c);
	int i;

	if (!c)
		return NULL;
	c->sw = sw;
	c->group = -1;
	c->lo = 0;
	c->hi = sw->ncell;
	c->sc_slot = -1;
	c->nmemo = 2 * sw->nbatch + 2;
	c->g = calloc((size_t)sw->ncand, sizeof *c->g);
	c->go = calloc((size_t)sw->ncand, sizeof *c->go);
	c->slots = calloc((size_t)sw->ncand, sizeof *c->slots);
	c->sm = calloc((size_t)sw->ncand * (size_t)c->nmemo, sizeof *c->sm);
	c->mm = calloc((size_t)sw->ncand * (size_t)c->nmemo, sizeof *c->mm);
	c->lbt = calloc((size_t)sw->ncand * (size_t)sw->nbatch, sizeof *c->lbt);
	c->lb0 = calloc((size_t)sw->ncand * (size_t)sw->nbatch, sizeof *c->lb0);
	c->lba = calloc((size_t)sw->ncand * (size_t)sw->nbatch, sizeof *c->lba);
	c->waiting = calloc((size_t)sw->ncand, sizeof *c->waiting);
	c->bnd = calloc(2 * (size_t)sw->nbatch, sizeof *c->bnd);
	if (sw->batch_mode == SWEEP_GLOBAL && c->bnd &&  /* only they accumulate (needs_accum) */
	    !(c->one = calloc((size_t)sw->ncand * (size_t)sw->nbatch, sizeof *c->one))) {
		sweep_ctx_delete(c);
		return NULL;
	}
	c->order = calloc((size_t)sw->ncand, sizeof *c->order);
	c->pend = calloc((size_t)sw->ncand, sizeof *c->pend);
	c->done = calloc((size_t)sw->ncand, sizeof *c->done);
	c->ks = calloc((size_t)sw->ncand, sizeof *c->ks);
	if (!c->g || !c->go || !c->slots || !c->sm || !c->mm || !c->lbt || !c->lb0 || !c->lba || !c->waiting ||
	    !c->bnd || !c->pend || !c->done || !c->order || !c->ks || step_sim_create(&c->ss)) {
		sweep_ctx_delete(c);
		return NULL;
	}
	for (i = 0; i < sw->ncand; i++)
		c->order[i] = i;
	qsort_r(c->order, (size_t)sw->ncand, sizeof *c->order, by_settings, (void *)sw->cands);
	/* every block simulated: a candidate's one task graph is re-timed at each
	 * of its micro-batches (step_resimulate), cheaper here than the periodic
	 * blocks' three shorter steps per micro-batch (step.h) */
	c->ss.full = 1;
	return c;
}

void sweep_ctx_cells(struct sweep_ctx *c, int lo, int hi)
{
	c->lo = lo;
	c->hi = hi;
}

void sweep_ctx_detail(struct sweep_ctx *c, int which)
{
	c->detail = which;
}

static void group_free(struct sweep_ctx *c)
{
	int i;

	c->sc_slot = -1;
	mem_scripts_clear(&c->scripts);  /* over the graphs freed below */
	for (i = 0; i < c->sw->ncand; i++) {
		struct slot *s = &c->slots[i];
		mem_kept_free(&s->kept[0]);
		mem_kept_free(&s->kept[1]);
		memset(s, 0, sizeof *s);
		s->sm = c->sm + (size_t)i * (size_t)c->nmemo;
		s->mm = c->mm + (size_t)i * (size_t)c->nmemo;
	}
	for (i = 0; i < c->ng; i++)
		graph_free(&c->g[i]);
	c->ng = 0;
	c->kept_bytes = 0;
	c->group = -1;
	c->ss.built = 0;  /* its task graph was over a graph just freed */
	for (i = 0; i < c->nks; i++)
		c->ks[i].kg = NULL;  /* and the kernel tables */
}

void sweep_ctx_delete(struct sweep_ctx *c)
{
	if (!c)
		return;
	if (c->slots && c->g)
		group_free(c);
	free(c->g);
	free(c->go);
	free(c->slots);
	free(c->sm);
	free(c->mm);
	free(c->lbt);
	free(c->lb0);
	free(c->lba);
	free(c->waiting);
	free(c->bnd);
	free(c->one);
	free(c->pend);
	free(c->order);
	free(c->done);
	mem_plan_free(&c->scratch);
	mem_scripts_free(&c->scripts);
	step_sim_delete(&c->ss);
	for (int i = 0; c->ks && i < c->nks; i++)
		step_sim_delete(&c->ks[i]);
	free(c->ks);
	free(c);
}

void sweep_ctx_counts(const struct sweep_ctx *c, struct sweep_counts *k)
{
	*k = c->k;
	k->step_graphs = c->ss.builds;
	k->tapes_replayed = c->scripts.replayed;
	mem_emu_counts(&c->scratch, &k->emu);
}

/* ---- groups and candidates ----------------------------------------------------------- */

static void group_set(struct sweep_ctx *c, int model, int seq)
{
	const struct sweep *sw = c->sw;
	struct scenario *w = &c->work;
	const struct model *m = &sw->models[model];

	group_free(c);
	c->group = model * sw->nseq + seq;
	*w = sw->base;  /* shallow: text and imports stay the base's */
	w->model = *m;
	snprintf(w->s.model.name, sizeof w->s.model.name, "%s", m->name);
	w->seq_len = sw->seqs[seq];
	w->target_len = w->seq_len;
	w->dropout = sw->base.s.model.dropout < 0 ? m->dropout : sw->base.s.model.dropout;
	c->group_note = 0;
	if (m->positions == POS_LEARNED && w->seq_len > m->max_positions) {
		c->group_note = 1;
		snprintf(c->note, sizeof c->note, "seq_len %lld exceeds the model's %lld learned positions",
			 (long long)w->seq_len, (long long)m->max_positions);
	}
}

/* Puts candidate i's training settings into the working scenario, and its
 * plan (plan.h: which engine, profile and mechanism; the checks wait for
 * slot_setup): derived at its first cell of the group and kept in its slot,
 * the same function of the same settings (the tables apply a candidate in
 * every cell, 1.1 million times for bench/sweep-1m.ini). */
static void apply(struct sweep_ctx *c, int i)
{
	const struct sweep_cand *k = &c->sw->cands[i];
	struct slot *s = &c->slots[i];
	struct scenario *w = &c->work;
	struct scn_training *t = &w->s.training;

	t->strategy = k->strategy;
	t->fsdp_sharding = k->sharding;
	t->fsdp_version = k->fsdp_version;
	t->precision = k->precision;
	t->recompute = k->recompute;
	t->offload = k->offload;
	t->tensor_parallel = k->tp;
	w->s.cluster.nodes = k->nodes;
	w->world = k->nodes * w->s.cluster.gpus_per_node;
	w->dp = w->world / k->tp;
	if (!s->planned) {
		plan_derive(&s->plan, &w->s, w->world, w->gpu.compute_capability);
		s->planned = 1;
	}
	w->plan = s->plan;
}

/* predict_graph_opts clears the struct before filling it, so the bytes compare. */
static int same_opts(const struct graph_opts *a, const struct graph_opts *b)
{
	return memcmp(a, b, sizeof *a) == 0;
}

/* The profile of the working candidate's engine, loaded once per process. */
static int profile(struct sweep_ctx *c, struct err *e)
{
	int fw = c->work.plan.engine;

	if (c->prof_loaded[fw])
		return 0;
	if (profile_load(plan_profile_name(&c->work.plan), &c->prof[fw], c->sw->file, 0, e))
		return e->code;
	c->prof_loaded[fw] = 1;
	return 0;
}

/* Sets up candidate i in the current group (once): validity, graph. */
static int slot_setup(struct sweep_ctx *c, int i, struct err *e)
{
	struct slot *s = &c->slots[i];
	struct graph_opts o;
	struct err why = {0};
	const char *msg;
	int j;

	if (s->state)
		return 0;
	if (c->group_note) {
		s->state = 2;
		snprintf(s->note, sizeof s->note, "%s", c->note);
		return 0;
	}
	if (scenario_check_training(&c->work, &why)) {
		msg = strstr(why.msg, "] ");  /* "file: [training] key: why" -> "key: why" */
		s->state = 2;
		snprintf(s->note, sizeof s->note, "%.111s", msg ? msg + 2 : why.msg);
		return 0;
	}
	predict_graph_opts(&c->work, &o);
	for (j = 0; j < c->ng && !same_opts(&c->go[j], &o); j++)
		;
	if (j == c->ng) {
		if (graph_build(&c->g[j], &c->work.model, &o, e)) {
			graph_free(&c->g[j]);
			return e->code;
		}
		c->go[j] = o;
		c->ng++;
		c->k.graphs++;
	}
	s->graph = j;
	s->state = 1;
	return profile(c, e);
}

/* The most bytes a context keeps of its group's tapes (struct mem_kept): the
 * tables of bench/sweep.ini keep 0.7-1.2 MB per group, those of
 * bench/sweep-1m.ini 8-34 MB. */
#define SWEEP_KEPT_BYTES ((size_t)64 << 20)

/* The tape of candidate i without (a = 0) or with (a = 1) accumulation, in
 * the context's scratch plan (its memory reused; what was there is dropped),
 * and the largest micro-batch that fits on it. Unless whole, the tables take a
 * tape cut short when not even one sample fits (mem_plan.stop_unfit: after
 * the setup or the first forward; they read only that it does not fit; every
 * figure needs the breakdown at one sample, the whole tape): bench/sweep-1m.ini,
 * whose smaller clusters cannot hold Llama 3 70B, has 3,528 of its tables'
 * 11,515 tapes so. The tables keep each whole tape they build in its slot
 * while the context's budget allows, and restore it when asked again
 * (mem_plan_restore: the same plan as a rebuild): they check a candidate's fit
 * at the micro-batch a cell shows after other candidates' tapes took the
 * scratch plan, 192 times on bench/sweep.ini, each a walk and a search for
 * runs otherwise. Every figure needs no copy: slot_prepare makes a
 * candidate's breakdowns while its tape is at hand. */
static int tapes(struct sweep_ctx *c, int i, int a, int whole, struct err *e)
{
	struct slot *s = &c->slots[i];
	int bind;

	if (c->sc_slot == i && c->sc_a == a && !(whole && c->scratch.unfit))
		return 0;
	c->sc_slot = -1;
	c->scratch.scripts = &c->scripts;
	c->scratch.stop_unfit = !whole && c->detail == SWEEP_TABLES;
	c->work.s.training.grad_accum = a ? 2 : 1;
	if (s->kept[a].bytes && !mem_plan_restore(&c->scratch, &s->kept[a])) {
		c->sc_slot = i;
		c->sc_a = a;
		c->k.tapes_kept++;
		return 0;
	}
	if (mem_plan_rebuild(&c->scratch, &c->work, &c->g[s->graph], &c->prof[c->work.plan.engine], e))
		return e->code;
	if (c->detail == SWEEP_TABLES && !c->scratch.unfit && !s->kept[a].bytes && c->kept_bytes < SWEEP_KEPT_BYTES &&
	    !mem_plan_keep(&c->scratch, &s->kept[a]))
		c->kept_bytes += s->kept[a].bytes;
	c->sc_slot = i;
	c->sc_a = a;
	if (!s->have[a]) {
		s->maxb[a] = mem_max_batch(&c->scratch, &bind);
		s->tapes[a] = c->scratch.ntapes;
		s->have[a] = 1;
	}
	c->k.tapes++;
	c->k.tapes_cut += c->scratch.unfit;
	return 0;
}

/* s->maxb[a] of candidate i, its tape built if not known yet. */
static int max_batch(struct sweep_ctx *c, int i, int a, int64_t *m, struct err *e)
{
	if (!c->slots[i].have[a] && tapes(c, i, a, 0, e))
		return e->code;
	*m = c->slots[i].maxb[a];
	return 0;
}

/* ---- one candidate ---------------------------------------------------------------------- */

/* The breakdown of the most loaded GPU of plan p at micro-batch b into r. */
static void breakdown(const struct mem_plan *p, const struct graph *g, int64_t b, struct sweep_result *r)
{
	struct mem_detail d, d2;
	int t, w, best = 0;
	char name[GRAPH_NAME];

	mem_detail_peak(p, 0, b, &d);
	for (t = 1; t < p->ntapes; t++) {
		mem_detail_peak(p, t, b, &d2);
		if (d2.peak > d.peak)
			d = d2;
	}
	r->peak = (double)d.peak;
	r->capacity = (double)p->capacity;
	r->params = (double)d.live[MEM_PARAMS];
	r->grads = (double)d.live[MEM_GRADS];
	r->optimizer = (double)d.live[MEM_OPTIM];
	r->activations = (double)(d.live[MEM_ACT] + d.live[MEM_ACT_GRAD]);
	r->buffers = (double)d.live[MEM_BUFFERS];
	r->overhead = (double)(d.live[MEM_OVERHEAD] + d.slack);
	for (w = 1; w < W_NWHAT; w++)
		if (d.what[w] > d.what[best])
			best = w;
	if (!r->note[0])
		snprintf(r->note, sizeof r->note, "peak: %s %.0f%%%s%s", mem_what_name(best),
			 d.peak > 0 ? 100.0 * (double)d.what[best] / (double)d.peak : 0.0,
			 d.op >= 0 ? ", " : "", d.op >= 0 ? graph_op_name(g, d.op, name) : "");
}

/* The memory figures of src (peak .. overhead, the binding note) into r. */
static void memory_figures(struct sweep_result *r, const struct sweep_result *src)
{
	r->peak = src->peak;
	r->capacity = src->capacity;
	r->params = src->params;
	r->grads = src->grads;
	r->optimizer = src->optimizer;
	r->activations = src->activations;
	r->buffers = src->buffers;
	r->overhead = src->overhead;
	memcpy(r->note, src->note, sizeof r->note);
	r->memory = src->memory;
}

/* breakdown() of candidate i's plan a, through its memo. Returns 0 or fills e. */
static int memory(struct sweep_ctx *c, int ci, int a, int64_t b, struct sweep_result *r, struct err *e)
{
	struct slot *s = &c->slots[ci];
	struct mem_memo *m;
	int i;

	for (i = 0; i < s->nmm && i < c->nmemo; i++) {
		m = &s->mm[i];
		if (m->mb == b && m->a == a) {
			memory_figures(r, &m->r);
			return 0;
		}
	}
	if (tapes(c, ci, a, 1, e))
		return e->code;
	breakdown(&c->scratch, &c->g[s->graph], b, r);
	r->memory = 1;
	m = &s->mm[s->nmm++ % c->nmemo];
	m->mb = b;
	m->a = a;
	m->r = *r;
	return 0;
}

/* The largest divisor of n that is <= m (0 when m < 1). */
static int64_t divisor_upto(int64_t n, int64_t m)
{
	int64_t d;

	for (d = m < n ? m : n; d >= 1; d--)
		if (n % d == 0)
			return d;
	return 0;
}

/* Whether a global batch needs the tape with accumulation: it does not fit
 * without (m0 samples do), and accumulation could help (more than one sample
 * per rank, one fits). Accumulation never lowers the peak (its tape is the one
 * without plus a micro-step before the last; test_sweep.c checks it), so when
 * one sample does not fit without it, nothing fits. */
static int needs_accum(const struct sweep_ctx *c, int64_t batch, int64_t m0)
{
	int64_t per = batch / c->work.dp;

	return c->sw->batch_mode == SWEEP_GLOBAL && per > m0 && per != 1 && m0 != 0;
}

/* Picks micro-batch and accumulation for candidate i; 0 = nothing fits, -1 an
 * error. r (may be NULL) gets max_micro_batch. */
static int64_t choose(struct sweep_ctx *c, int i, int64_t batch, int64_t *accum, int *a,
		      struct sweep_result *r, struct err *e)
{
	int64_t per, d, m0 = 0, m1 = 0;

	*accum = 1;
	*a = 0;
	if (max_batch(c, i, 0, &m0, e))
		return -1;
	if (r)
		r->max_micro_batch = m0;
	switch (c->sw->batch_mode) {
	case SWEEP_AUTO:
		return m0;
	case SWEEP_MICRO:
		return batch <= m0 ? batch : 0;
	default:
		per = batch / c->work.dp;
		if (!needs_accum(c, batch, m0))
			return per <= m0 ? per : 0;
		if (max_batch(c, i, 1, &m1, e))
			return -1;
		*a = 1;
		d = divisor_upto(per, m1 < per - 1 ? m1 : per - 1);
		*accum = d ? per / d : 1;
		return d;
	}
}

/* choose()'s micro-batch for candidate i, checked at that micro-batch: it fits
 * when its breakdown's peak is within the device, as simulate reports it
 * (memory.h). The emulated allocator's fit is not monotone in the
 * micro-batch (its cache fragments differently at each size), so one at or
 * below the searched maximum may not fit: on bench/sweep-1m.ini, Llama 3 8B
 * under ZeRO-2 with TP 8 on one node fits 56, 60 and 63 (its maximum) but not
 * 57-59, and 83 rows of its --csv had been shown as fitting. A global batch
 * then takes the next smaller divisor that fits, with accumulation; a given
 * micro-batch does not fit (0), *failed the micro-batch tried last (0 none).
 * Returns as choose. */
static int64_t fitting(struct sweep_ctx *c, int i, int64_t batch, int64_t *accum, int *a,
		       struct sweep_result *r, int64_t *failed, struct err *e)
{
	struct sweep_result x;
	int64_t mb = choose(c, i, batch, accum, a, r, e), per = batch / c->work.dp, m1 = 0;

	*failed = 0;
	while (mb > 0) {
		if (mb == c->slots[i].maxb[*a] && c->slots[i].tapes[*a] == 1)
			return mb;  /* the search's answer: a replay at it ran through (memory.h) */
		memset(&x, 0, sizeof x);
		if (memory(c, i, *a, mb, &x, e))
			return -1;
		if (mem_fits((int64_t)x.peak, (int64_t)x.capacity))  /* bytes, held exactly as doubles */
			return mb;
		*failed = mb;
		if (c->sw->batch_mode != SWEEP_GLOBAL || per == 1)
			return 0;
		if (max_batch(c, i, 1, &m1, e))
			return -1;
		*a = 1;  /* per samples at once do not fit: accumulate */
		mb = divisor_upto(per, m1 < mb - 1 ? m1 : mb - 1);
		*accum = mb ? per / mb : 1;
	}
	return mb;
}

/* Whether batch index bi is a cell of the group this context evaluates, with a
 * global batch the data-parallel degree divides. */
static int batch_here(const struct sweep_ctx *c, int bi)
{
	const struct sweep *sw = c->sw;
	int cell = c->group * sw->nbatch + bi;

	return cell >= c->lo && cell < c->hi &&
		!(sw->batch_mode == SWEEP_GLOBAL && sw->batches[bi] % c->work.dp);
}

/* What candidate i's memory gives in every cell of the group this context
 * evaluates, done at its first cell while each tape is at hand: the tape
 * without accumulation and the breakdowns at the micro-batches it decides,
 * then, if a batch needs it, the tape with accumulation and its breakdowns
 * (SWEEP_ALL; the tables search when a cell asks, settle). The cells then
 * read the memos; each tape is built once and evaluated while it is in the
 * cache. */
static int slot_prepare(struct sweep_ctx *c, int i, struct err *e)
{
	const struct sweep *sw = c->sw;
	struct sweep_result r;
	int64_t m0 = 0, mb, accum;
	int bi, pass, a;

	if (c->slots[i].prepared)
		return 0;
	c->slots[i].prepared = 1;
	if (max_batch(c, i, 0, &m0, e))
		return e->code;
	for (pass = 0; pass < 2; pass++)
		for (bi = 0; bi < sw->nbatch; bi++) {
			if (!batch_here(c, bi) || needs_accum(c, sw->batches[bi], m0) != pass)
				continue;
			mb = choose(c, i, sw->batches[bi], &accum, &a, NULL, e);
			if (mb < 0)
				return e->code;
			memset(&r, 0, sizeof r);
			if (memory(c, i, a, mb > 0 ? mb : 1, &r, e))
				return e->code;
		}
	return 0;
}

/* One optimizer step of micro-batch mb and grad_accum ga: steps of more than
 * SWEEP_ACCUM_SIMULATED micro-steps are extended by their period from the last
 * two simulated (step_extend, step.h: every micro-step but the last repeats).
 * tests/test_sweep.c checks this against full simulations of every strategy on
 * NVLink and InfiniBand. */

static struct step_memo *memo_find(const struct sweep_ctx *c, struct slot *s, int64_t mb, int64_t ga)
{
	int i;

	for (i = 0; i < s->nsm && i < c->nmemo; i++)
		if (s->sm[i].mb == mb && s->sm[i].ga == ga)
			return &s->sm[i];
	return NULL;
}

/* The simulations (micro-batch, accumulation) step() asks of candidate i in
 * the group's cells that this context evaluates: at most two per batch. */
static int needed(struct sweep_ctx *c, int i, int64_t *mbs, int64_t *gas, int *n, struct err *e)
{
	const struct sweep *sw = c->sw;
	int bi, a;
	int64_t mb, accum;

	*n = 0;
	for (bi = 0; bi < sw->nbatch; bi++) {
		if (!batch_here(c, bi))
			continue;
		mb = choose(c, i, sw->batches[bi], &accum, &a, NULL, e);
		if (mb < 0)
			return e->code;
		if (mb == 0)
			continue;
		if (accum <= SWEEP_ACCUM_SIMULATED) {
			mbs[*n] = mb, gas[(*n)++] = accum;
		} else {
			mbs[*n] = mb, gas[(*n)++] = SWEEP_ACCUM_SIMULATED - 1;
			mbs[*n] = mb, gas[(*n)++] = SWEEP_ACCUM_SIMULATED;
		}
	}
	return 0;
}

/* Simulates (mb, ga) of slot s into its memo; step_resimulate keeps the task
 * graph when the previous simulation was this candidate's at this ga. */
static int simulate_one(struct sweep_ctx *c, struct slot *s, int64_t mb, int64_t ga, struct err *e)
{
	struct step_memo *m = &s->sm[s->nsm++ % c->nmemo];

	c->work.s.training.grad_accum = ga;
	m->mb = 0;
	if (step_resimulate(&c->ss, &c->work, &c->g[s->graph], mb, &m->st, e))
		return e->code ? e->code : ERR_SYSTEM;
	m->mb = mb;
	m->ga = ga;
	c->k.steps++;
	c->k.events += (long)m->st.events;
	return 0;
}

static const struct step_result *simulate(struct sweep_ctx *c, struct slot *s, int64_t mb, int64_t ga,
					   struct err *e)
{
	int64_t mbs[2 * SWEEP_MAX_AXIS], gas[2 * SWEEP_MAX_AXIS];
	struct step_memo *m = memo_find(c, s, mb, ga);
	int n, j, pass, i = (int)(s - c->slots);

	if (m)
		return &m->st;
	/* the others of the group first, grouped by accumulation (one task graph
	 * each), then this one if the batches did not name it; not for the
	 * tables alone, which simulate only what their bounds cannot rule out */
	n = 0;
	if (c->detail == SWEEP_ALL && needed(c, i, mbs, gas, &n, e))
		return NULL;
	for (pass = 1; pass <= SWEEP_ACCUM_SIMULATED; pass++)
		for (j = 0; j < n; j++)
			if (gas[j] == pass && !memo_find(c, s, mbs[j], gas[j]) &&
			    simulate_one(c, s, mbs[j], gas[j], e))
				return NULL;
	m = memo_find(c, s, mb, ga);
	if (!m) {
		if (simulate_one(c, s, mb, ga, e))
			return NULL;
		m = memo_find(c, s, mb, ga);
	}
	return &m->st;
}

static int step(struct sweep_ctx *c, struct slot *s, int64_t mb, int64_t ga, struct step_result *st,
		struct err *e)
{
	const struct step_result *p;
	struct step_result two;

	if (ga <= SWEEP_ACCUM_SIMULATED) {
		p = simulate(c, s, mb, ga, e);
		if (!p)
			return e->code ? e->code : ERR_SYSTEM;
		*st = *p;
		return 0;
	}
	p = simulate(c, s, mb, SWEEP_ACCUM_SIMULATED - 1, e);
	if (!p)
		return e->code ? e->code : ERR_SYSTEM;
	two = *p;
	p = simulate(c, s, mb, SWEEP_ACCUM_SIMULATED, e);
	if (!p)
		return e->code ? e->code : ERR_SYSTEM;
	step_extend(&two, p, ga, st);  /* by the period (step.h) */
	return 0;
}

/* Time to train: failure-free from the throughput, or with [failures] the
 * job model's mean wall time (jobrun.h: failures, checkpoints, restarts, the
 * best checkpoint interval when it is auto) at this step time. */
static int train_time(struct sweep_ctx *c, const struct graph *g, const struct step_result *st,
		      struct sweep_result *r, struct err *e)
{
	const struct sweep *sw = c->sw;
	struct prediction *p = &c->pred;

	if (sw->train_steps > 0)
		r->train_days = (double)sw->train_steps * st->time / 86400;
	else if (sw->train_tokens > 0)
		r->train_days = sw->train_tokens / st->tokens_per_s / 86400;
	if (sw->set.objective != SWEEP_TIME_TO_TRAIN || !c->work.has_failures)
		return 0;
	memset(p, 0, sizeof *p);
	p->params = g->params;
	p->micro_batch = st->micro_batch;
	p->max_micro_batch = r->max_micro_batch;
	p->step = *st;
	p->step.valid = 1;
	if (jobrun_predict(&c->work, p, e))
		return e->code;
	r->train_days = p->job.wall_days;
	r->ettr = p->job.ettr;
	return 0;
}

static void score(const struct sweep *sw, struct sweep_result *r)
{
	r->gpu_hours_per_mtok = (double)r->world / r->tokens_per_s * 1e6 / 3600;
	switch (sw->set.objective) {
	case SWEEP_COST: r->score = -r->gpu_hours_per_mtok; break;
	case SWEEP_TIME_TO_TRAIN: r->score = -r->train_days; break;
	default: r->score = r->tokens_per_s; break;
	}
}

/* Why candidate s does not fit (a: the tape with accumulation; failed: the
 * micro-batch fitting() found too large, 0 none), with the bytes it would
 * need when its memory figures were computed. */
static void nofit_note(const struct sweep_ctx *c, const struct slot *s, int a, int64_t batch, int64_t failed,
		       struct sweep_result *r)
{
	char need[64] = "does not fit";

	if (r->memory)
		snprintf(need, sizeof need, "needs %.1f GiB", r->peak / (1 << 30));
	if (failed > 0)
		snprintf(r->note, sizeof r->note, "micro-batch %lld %s though %lld fits: the allocator's cache "
			 "fragments differently at each size", (long long)failed, need, (long long)s->maxb[a]);
	else if (c->sw->batch_mode == SWEEP_MICRO && s->maxb[0] > 0)
		snprintf(r->note, sizeof r->note, "largest micro-batch that fits is %lld", (long long)s->maxb[0]);
	else if (a && s->maxb[0] > 0)
		snprintf(r->note, sizeof r->note, "fits %lld without accumulation; with it (%lld per GPU) "
			 "micro-batch 1 %s", (long long)s->maxb[0], (long long)(batch / c->work.dp), need);
	else
		snprintf(r->note, sizeof r->note, "%s at micro-batch 1 of %.1f GiB", need,
			 (double)(int64_t)c->work.capacity / (1 << 30));
}

static int finish(struct sweep_ctx *c, int i, struct sweep_result *r, struct err *e);
static int settle(struct sweep_ctx *c, int i, int64_t batch, struct sweep_result *r, struct err *e);

/* Whether the micro-batch and accumulation candidate i takes at batch are
 * known without a memory search not made yet (choose). */
static int searched(const struct sweep_ctx *c, int i, int64_t batch)
{
	const struct slot *s = &c->slots[i];

	return s->have[0] && (!needs_accum(c, batch, s->maxb[0]) || s->have[1]);
}

static int eval_cand(struct sweep_ctx *c, int i, int64_t batch, struct sweep_result *r, struct err *e)
{
	struct slot *s = &c->slots[i];

	c->waiting[i] = 0;
	apply(c, i);
	r->world = c->work.world;
	if (slot_setup(c, i, e))
		return e->code;
	if (s->state == 2) {
		r->status = SWEEP_INVALID;
		snprintf(r->note, sizeof r->note, "%s", s->note);
		return 0;
	}
	if (c->sw->batch_mode == SWEEP_GLOBAL && batch % c->work.dp) {
		r->status = SWEEP_INDIVISIBLE;
		snprintf(r->note, sizeof r->note, "global batch %lld is not a multiple of %lld data-parallel ranks",
			 (long long)batch, (long long)c->work.dp);
		return 0;
	}
	c->k.candidates++;
	/* the tables search its memory when its bound at any micro-batch leaves it
	 * in (tables()) */
	if (c->detail == SWEEP_TABLES && c->sw->batch_mode == SWEEP_GLOBAL && !searched(c, i, batch)) {
		c->waiting[i] = 1;
		r->status = SWEEP_OK;
		return 0;
	}
	return settle(c, i, batch, r, e);
}

/* Candidate i's micro-batch and accumulation at batch (choose), from its
 * memory search: SWEEP_NOFIT with its note, or SWEEP_OK, and with every figure
 * (SWEEP_ALL) its memory and step; the working scenario is i's (apply). */
static int settle(struct sweep_ctx *c, int i, int64_t batch, struct sweep_result *r, struct err *e)
{
	struct slot *s = &c->slots[i];
	int64_t mb, accum, failed = 0;
	int a;

	if (c->detail == SWEEP_ALL && slot_prepare(c, i, e))
		return e->code;
	/* every figure: checked at its micro-batch now; the tables check those they may show */
	mb = c->detail == SWEEP_ALL ? fitting(c, i, batch, &accum, &a, r, &failed, e)
				    : choose(c, i, batch, &accum, &a, r, e);
	if (mb < 0)
		return e->code;
	if (mb == 0) {
		r->status = SWEEP_NOFIT;
		if (c->detail == SWEEP_ALL && memory(c, i, a, failed > 0 ? failed : 1, r, e))
			return e->code;
		nofit_note(c, s, a, batch, failed, r);
		return 0;
	}
	c->work.s.training.micro_batch = mb;
	if (c->detail == SWEEP_ALL && memory(c, i, a, mb, r, e))
		return e->code;
	r->status = SWEEP_OK;
	r->micro_batch = mb;
	r->grad_accum = accum;
	if (c->detail == SWEEP_TABLES)
		return 0;  /* its step when its bound says it may be shown (tables()) */
	return finish(c, i, r, e);
}

/* Candidate i's step at the micro-batch and accumulation eval_cand chose (in
 * r), and the figures and score that follow; the working scenario is i's
 * (apply). */
static int finish(struct sweep_ctx *c, int i, struct sweep_result *r, struct err *e)
{
	struct slot *s = &c->slots[i];
	struct step_result st;
	int64_t mb = r->micro_batch, accum = r->grad_accum;

	c->work.s.training.micro_batch = mb;
	if (step(c, s, mb, accum, &st, e))
		return e->code;
	r->global_batch = st.global_batch;
	r->step_time = st.time;
	r->compute = st.compute;
	r->comm = st.comm;
	r->exposed_comm = st.exposed_comm;
	r->tokens_per_s = st.tokens_per_s;
	r->samples_per_s = st.samples_per_s;
	r->mfu = st.mfu;
	c->work.s.training.grad_accum = accum;
	if (train_time(c, &c->g[s->graph], &st, r, e))
		return e->code;
	score(c->sw, r);
	return 0;
}

/* ---- ranking ------------------------------------------------------------------------------ */

/* Ranks the fitting candidates of one cell by score, ties by candidate order. */
static void rank_cell(struct sweep_result *r, int n)
{
	int i, j, better;

	for (i = 0; i < n; i++) {
		if (r[i].status != SWEEP_OK)
			continue;
		better = 0;
		for (j = 0; j < n; j++)
			if (r[j].status == SWEEP_OK &&
			    (r[j].score > r[i].score || (r[j].score == r[i].score && j < i)))
				better++;
		r[i].rank = better + 1;
	}
}

void sweep_cell_best(const struct sweep *sw, const struct sweep_result *cell, int *best,
		     int *runner_up)
{
	int i;

	*best = *runner_up = -1;
	for (i = 0; i < sw->ncand; i++)
		if (cell[i].rank == 1)
			*best = i;
	if (*best < 0)
		return;
	for (i = 0; i < sw->ncand; i++)
		if (cell[i].rank > 1 && strcmp(sw->cands[i].strat, sw->cands[*best].strat) &&
		    (*runner_up < 0 || cell[i].rank < cell[*runner_up].rank))
			*runner_up = i;
}

/* ---- recommend's tables: the steps they can show (SWEEP_TABLES) --------------------- */

/* The micro-batch and accumulation candidate i takes in each cell of the
 * group this context evaluates whose memory searches are made (choose), into
 * mb and ga, and those cells into *known (a bit per batch index): mb 0 where
 * the cell is not evaluated here, not known yet or nothing fits. A cell's
 * bounds are made once its choice is known: a search the tables have not
 * needed is not made for a bound (bench/sweep.ini's tables: 255 searches of
 * tapes with accumulation when every cell's choice was made at the first,
 * about 120 so). Returns 0 or an error code. */
static int cell_choices(struct sweep_ctx *c, int i, int64_t *mb, int64_t *ga, uint64_t *known, struct err *e)
{
	const struct sweep *sw = c->sw;
	int bi, a;

	*known = 0;
	for (bi = 0; bi < sw->nbatch; bi++) {
		mb[bi] = 0;
		ga[bi] = 1;
		if (!batch_here(c, bi) || !searched(c, i, sw->batches[bi]))
			continue;
		if ((mb[bi] = choose(c, i, sw->batches[bi], &ga[bi], &a, NULL, e)) < 0)
			return e->code;
		*known |= (uint64_t)1 << bi;
	}
	return 0;
}

/* The least step time of candidate i in each cell of the group this context
 * evaluates whose choice is known (cell_choices), into c->lbt (step.h; 0
 * where it does not fit): its task graph of one micro-step bounded at each
 * micro-batch (re-timed from one to the next), for step_bound_least; with
 * tight, then that of two micro-steps where a cell accumulates more, for
 * step_bound_at. A graph of two micro-steps costs about twice one of one
 * (bench/sweep.ini's tables spent 0.17 s, 13 %, on them when every candidate
 * built one: timed once around step_bound), and a candidate the looser bound
 * already rules out never needs it (tables). Each bound walks its graph's
 * critical path too where a cell takes that many micro-steps at that
 * micro-batch (the path bounds that step alone): bench/sweep.ini's tables
 * simulate 186 steps with it, 329 without. Cells known later are bounded
 * when asked. The working scenario is i's. */
static int bounds(struct sweep_ctx *c, int i, int tight, struct err *e)
{
	const struct sweep *sw = c->sw;
	struct slot *s = &c->slots[i];
	double *lbt = c->lbt + (size_t)i * (size_t)sw->nbatch, x;
	int64_t mb[SWEEP_MAX_AXIS], ga[SWEEP_MAX_AXIS], m = 0;
	struct step_bound *one = c->one ? c->one + (size_t)i * (size_t)sw->nbatch : c->bnd, *two = c->bnd + sw->nbatch;
	uint64_t known, todo[3], bit, made[3] = {0, 0, 0}, acc = 0;
	int bi, j, pass, path;

	if (cell_choices(c, i, mb, ga, &known, e))
		return e->code;
	for (bi = 0; bi < sw->nbatch; bi++)
		if (mb[bi] > 0 && ga[bi] > 1)
			acc |= (uint64_t)1 << bi;
	/* nothing looser to try, or no room to keep one's bounds: both at once */
	tight |= !c->one || !(known & ~s->bounded2 & acc);
	todo[1] = known & ~s->bounded1;
	todo[2] = tight ? known & ~s->bounded2 : 0;
	if (!todo[1] && !todo[2])
		return 0;
	for (pass = 1; pass <= 2; pass++)
		for (bi = 0; bi < sw->nbatch; bi++) {
			struct step_bound *b = pass == 1 ? &one[bi] : &two[bi];
			bit = (uint64_t)1 << bi;
			if (!(todo[pass] & bit) || mb[bi] <= 0 || (pass == 2 && ga[bi] == 1))
				continue;
			/* its critical path where a cell of this micro-batch takes
			 * pass micro-steps (step_bound_at reads it there alone) */
			for (path = 0, j = 0; j < sw->nbatch; j++)
				path |= mb[j] == mb[bi] && ga[j] == pass;
			/* the same micro-batch in another cell: kept (one) or made now,
			 * with its path where this cell's needs one */
			for (j = 0; j < sw->nbatch && !(j != bi && mb[j] == mb[bi] &&
							   (pass == 1 ? ((c->one ? s->bounded1 & known : 0) | made[1]) >> j & 1
								      : made[2] >> j & 1) &&
							   (!path || (pass == 1 ? one[j] : two[j]).path > 0));
			     j++)
				;
			made[pass] |= bit;
			if (j < sw->nbatch) {
				*b = pass == 1 ? one[j] : two[j];
				continue;
			}
			c->work.s.training.grad_accum = pass;
			c->work.s.training.micro_batch = mb[bi];
			if (step_bound(&c->ss, &c->work, &c->g[s->graph], mb[bi], path, b, e))
				return e->code ? e->code : ERR_SYSTEM;
			m++;
		}
	for (bi = 0; bi < sw->nbatch; bi++) {
		bit = (uint64_t)1 << bi;
		if (!((todo[1] | todo[2]) & bit))
			continue;
		lbt[bi] = 0;
		if (mb[bi] <= 0)
			continue;
		lbt[bi] = step_bound_least(&one[bi], ga[bi]);
		if ((todo[2] & bit) && ga[bi] > 1 && (x = step_bound_at(&one[bi], &two[bi], ga[bi])) > lbt[bi])
			lbt[bi] = x;  /* both hold: the larger */
	}
	s->bounded1 |= todo[1];
	s->bounded2 |= todo[2];
	c->k.bounds += m;
	return 0;
}

/* step_kernel_least of the working scenario on graph j of the group, in that
 * graph's own step_sim: its kernel tables (eager extras, op classes) are
 * built at its first bound and kept, where one step_sim for every graph
 * rebuilt them whenever the next candidate bounded had another (2.4 % of
 * bench/sweep.ini's tables, perf). Returns 0 or fills e. */
static int kernel_least(struct sweep_ctx *c, int j, const int64_t *mbs, int n, double *least, struct err *e)
{
	for (; c->nks <= j; c->nks++)
		if (step_sim_create(&c->ks[c->nks]))
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory bounding the step");
	return step_kernel_least(&c->ks[j], &c->work, &c->g[j], mbs, n, least, e);
}

/* The least step time of candidate i in each cell of the group this context
 * evaluates from its kernels alone, into c->lb0 (0 where it does not fit):
 * ga x one micro-step's forward and backward kernels at the cell's micro-batch
 * (step_kernel_least), no task graph built. A candidate this rules out never
 * needs one (tables): bench/sweep-1m.ini's tables bounded 6,679 candidates by
 * their kernels and then built 1,971 task graphs (1,310 steps simulated), where
 * they had built 7,988 to bound every candidate by its graph (the same tables,
 * a quarter less time: README, Speed (24)). The working scenario is i's. */
static int bounds0(struct sweep_ctx *c, int i, struct err *e)
{
	const struct sweep *sw = c->sw;
	struct slot *s = &c->slots[i];
	double *lb = c->lb0 + (size_t)i * (size_t)sw->nbatch, least[SWEEP_MAX_AXIS];
	int64_t mb[SWEEP_MAX_AXIS], ga[SWEEP_MAX_AXIS], mbs[SWEEP_MAX_AXIS];
	int bi, j, n = 0, at[SWEEP_MAX_AXIS];
	uint64_t known, todo;

	if (cell_choices(c, i, mb, ga, &known, e))
		return e->code;
	if (!(todo = known & ~s->bounded0))
		return 0;
	for (bi = 0; bi < sw->nbatch; bi++) {
		if (!(todo >> bi & 1) || mb[bi] <= 0)
			continue;
		for (j = 0; j < n && mbs[j] != mb[bi]; j++)
			;
		if (j == n)
			mbs[n++] = mb[bi];
		at[bi] = j;
	}
	if (n && kernel_least(c, s->graph, mbs, n, least, e))
		return e->code ? e->code : ERR_SYSTEM;
	for (bi = 0; bi < sw->nbatch; bi++)
		if (todo >> bi & 1)
			lb[bi] = mb[bi] > 0 ? (double)ga[bi] * least[at[bi]] : 0;
	c->k.kernel_bounds += !s->bounded0;
	s->bounded0 |= todo;
	return 0;
}

/* The micro-batches a candidate may take in a cell of per samples per GPU
 * below below, with global batches: the divisors d of per (choose and
 * fitting take one, in per / d micro-steps), added to mbs[0..*n) where not
 * there yet, in no particular order (least_over takes the least of their
 * steps). Returns 0, or -1 when more than SWEEP_ANY_MBS in all. */
#define SWEEP_ANY_MBS 256      /* micro-batches bounded at once; more: not known */
static int divisors(int64_t per, int64_t below, int64_t *mbs, int *n)
{
	int64_t d, q[2];
	int j, k;

	for (d = 1; d <= per / d; d++) {  /* d and per / d: each pair once */
		if (per % d)
			continue;
		q[0] = d;
		q[1] = per / d;
		for (k = 0; k < 1 + (q[1] != d); k++) {
			if (q[k] >= below)
				continue;
			for (j = 0; j < *n && mbs[j] != q[k]; j++)
				;
			if (j == *n && *n == SWEEP_ANY_MBS)
				return -1;
			if (j == *n)
				mbs[(*n)++] = q[k];
		}
	}
	return 0;
}

/* The least time of a step of per samples per GPU over the micro-batches
 * mbs[0..n) below below that divide per, least[j] the kernels' bound of one
 * micro-step of mbs[j] (step_kernel_least): per / d of them; 0 for none. */
static double least_over(int64_t per, int64_t below, const int64_t *mbs, const double *least, int n)
{
	double lb = 0, t;
	int j;

	for (j = 0; j < n; j++)
		if (mbs[j] < below && per % mbs[j] == 0 && ((t = (double)(per / mbs[j]) * least[j]) < lb || lb == 0))
			lb = t;
	return lb;
}

/* The least step time of candidate i in each cell of the group this context
 * evaluates, with global batches, whatever micro-batch its memory search
 * would choose, into c->lba (0: not known): bounds0's bound at every divisor
 * of the batch per GPU (divisors), the least (least_over). A candidate this
 * rules out in every cell never needs its tape (tables). The working scenario
 * is i's. */
static int bounds_any(struct sweep_ctx *c, int i, struct err *e)
{
	const struct sweep *sw = c->sw;
	struct slot *s = &c->slots[i];
	double *lb = c->lba + (size_t)i * (size_t)sw->nbatch, least[SWEEP_ANY_MBS];
	int64_t mbs[SWEEP_ANY_MBS];
	int bi, n = 0;

	if (s->bounded_any)
		return 0;
	s->bounded_any = 1;
	for (bi = 0; bi < sw->nbatch; bi++)
		lb[bi] = 0;
	for (bi = 0; bi < sw->nbatch; bi++)
		if (batch_here(c, bi) && divisors(sw->batches[bi] / c->work.dp, INT64_MAX, mbs, &n))
			return 0;
	if (n && kernel_least(c, s->graph, mbs, n, least, e))
		return e->code ? e->code : ERR_SYSTEM;
	for (bi = 0; bi < sw->nbatch; bi++)
		if (batch_here(c, bi))
			lb[bi] = least_over(sw->batches[bi] / c->work.dp, INT64_MAX, mbs, least, n);
	return 0;
}

/* What upper_score's bound of candidate i in the cell of batch index bi (r:
 * its micro-batch and accumulation) is from after bounds0 and bounds made
 * what they made. */
static int bound_level(const struct sweep_ctx *c, int i, int bi, const struct sweep_result *r)
{
	const struct slot *s = &c->slots[i];

	return !(s->bounded1 >> bi & 1) ? 0 : (s->bounded2 >> bi & 1) || r->grad_accum <= 1 ? 2 : 1;
}

static int score_of(struct sweep_ctx *c, int i, struct sweep_result *x, double t, double *ub, struct err *e);

/* Whether the objective is the job model's time (time_to_train with
 * [failures]): not bounded here, at any level, so every step is simulated. */
static int unbounded(const struct sweep_ctx *c)
{
	return c->sw->set.objective == SWEEP_TIME_TO_TRAIN && c->work.has_failures;
}

/* The most candidate i's score can be in a cell of batch index bi (r: its
 * micro-batch and accumulation): the score of a step of its least time, by
 * level -1 its kernels alone at any micro-batch (bounds_any; r's not known
 * yet), 0 its kernels alone (bounds0; the task graph's when bounds already
 * made it), 1 its task graph of one micro-step, 2 every bound bounds() makes.
 * *got: the level ub is from (2: none tighter to make). */
static int upper_score(struct sweep_ctx *c, int i, int bi, const struct sweep_result *r, int level,
		       double *ub, int *got, struct err *e)
{
	struct sweep_result x = *r;
	size_t at = (size_t)i * (size_t)c->sw->nbatch + (size_t)bi;
	double t;

	*got = 2;
	if (unbounded(c)) {
		*ub = HUGE_VAL;
		return 0;
	}
	if (level < 0) {
		if (bounds_any(c, i, e))
			return e->code;
		t = c->lba[at];
		/* a step of the cell's batch, whatever its micro-batch: that is all
		 * the score reads of it (the job model's is not bounded, above) */
		x.micro_batch = c->sw->batches[bi] / c->work.dp;
		x.grad_accum = 1;
	} else if (level == 0 && !(c->slots[i].bounded1 >> bi & 1)) {
		if (bounds0(c, i, e))
			return e->code;
		t = c->lb0[at];
	} else {
		if (bounds(c, i, level >= 2, e))
			return e->code;
		t = c->lbt[at];
	}
	*got = level < 0 ? -1 : bound_level(c, i, bi, r);
	return score_of(c, i, &x, t, ub, e);
}

/* Into *ub the score of candidate i (x: its micro-batch and accumulation) at a
 * step of t s, HUGE_VAL when t is not known (0). Returns 0 or an error code. */
static int score_of(struct sweep_ctx *c, int i, struct sweep_result *x, double t, double *ub, struct err *e)
{
	struct step_result st;

	if (!(t > 0)) {  /* nothing known of its time */
		*ub = HUGE_VAL;
		return 0;
	}
	memset(&st, 0, sizeof st);
	st.time = t;
	st.micro_batch = x->micro_batch;
	st.grad_accum = x->grad_accum;
	st.global_batch = x->micro_batch * x->grad_accum * c->work.dp;
	step_throughput(&c->g[c->slots[i].graph], &st);
	x->tokens_per_s = st.tokens_per_s;
	if (train_time(c, &c->g[c->slots[i].graph], &st, x, e))
		return e->code;
	score(c->sw, x);
	*ub = x->score;
	return 0;
}

/* Whether a score of at most ub is surely below score (by more than the
 * rounding of a step extended by its period, step.h). */
static int below(double ub, double score)
{
	return ub < score - fabs(score) * 1e-6;
}

/* Whether a candidate of strategy strat whose score is at most ub can be
 * neither the best (best) nor the runner-up (ru) of the candidates simulated
 * so far: below the best's, and of the best's strategy or below the
 * runner-up's too. */
static int ruled_out(const struct sweep_ctx *c, const char *strat, double ub, const struct sweep_result *out,
		     int best, int ru)
{
	const struct sweep *sw = c->sw;

	return best >= 0 && below(ub, out[best].score) &&
	       (!strcmp(strat, sw->cands[best].strat) || (ru >= 0 && below(ub, out[ru].score)));
}

/* Whether every smaller micro-batch candidate i could take in the cell of
 * batch index bi than r's (fitting's, when r's does not fit: with global
 * batches a smaller divisor of the batch per GPU, accumulating the rest; none
 * otherwise) is ruled out (ruled_out) by its kernels' bound there (bounds0's,
 * least_over). Sets *yes; returns 0 or an error code. */
static int smaller_ruled_out(struct sweep_ctx *c, int i, int bi, const struct sweep_result *r,
			     const struct sweep_result *out, int best, int ru, int *yes, struct err *e)
{
	const struct sweep *sw = c->sw;
	int64_t mbs[SWEEP_ANY_MBS], per = sw->batches[bi] / c->work.dp;
	double least[SWEEP_ANY_MBS], ub;
	struct sweep_result x = *r;
	int n = 0;

	*yes = 0;
	if (unbounded(c) || (sw->batch_mode == SWEEP_GLOBAL && divisors(per, r->micro_batch, mbs, &n)))
		return 0;
	if (n == 0) {  /* nothing smaller to fall back to */
		*yes = 1;
		return 0;
	}
	if (kernel_least(c, c->slots[i].graph, mbs, n, least, e))
		return e->code ? e->code : ERR_SYSTEM;
	x.micro_batch = per;  /* a step of the cell's batch: all the score reads of it (upper_score) */
	x.grad_accum = 1;
	if (score_of(c, i, &x, least_over(per, r->micro_batch, mbs, least, n), &ub, e))
		return e->code;
	*yes = ruled_out(c, sw->cands[i].strat, ub, out, best, ru);
	return 0;
}

static int by_bound(const void *a, const void *b)
{
	const struct pend *x = a, *y = b;

	if (x->ub != y->ub)
		return x->ub > y->ub ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The best and the runner-up (another strategy) among the n candidates
 * simulated so far, as rank_cell and sweep_cell_best would pick them. */
static void leaders(const struct sweep *sw, const struct sweep_result *out, const int *done, int n, int *best,
		    int *ru)
{
	int j, i;

	*best = *ru = -1;
	for (j = 0; j < n; j++) {
		i = done[j];
		if (*best < 0 || out[i].score > out[*best].score || (out[i].score == out[*best].score && i < *best))
			*best = i;
	}
	for (j = 0; j < n; j++) {
		i = done[j];
		if (i != *best && strcmp(sw->cands[i].strat, sw->cands[*best].strat) &&
		    (*ru < 0 || out[i].score > out[*ru].score || (out[i].score == out[*ru].score && i < *ru)))
			*ru = i;
	}
}

/* The steps of the cell's fitting candidates (eval_cand left them waiting)
 * that recommend's tables may show: in the order of the most their scores can
 * be, each simulated unless its bound is below the best's score and it is of
 * the best's strategy or its bound is below the runner-up's too; the others
 * are SWEEP_BOUNDED. A bound that leaves one in is followed by the next
 * tighter (its kernels', its task graph's, then that of two micro-steps) and
 * the candidate takes its place again. The best and the runner-up are those
 * every step would give (tests/test_sweep.c). */
static int tables(struct sweep_ctx *c, int bi, struct sweep_result *out, struct err *e)
{
	const struct sweep *sw = c->sw;
	struct sweep_result *r;
	struct pend *p, x;
	struct sweep_result keep;
	int64_t mb, accum, failed;
	int i, j, k, a, n = 0, nd = 0, best = -1, ru = -1;

	for (i = 0; i < sw->ncand; i++) {
		if (out[i].status != SWEEP_OK)
			continue;
		apply(c, i);
		p = &c->pend[n++];
		p->i = i;
		if (upper_score(c, i, bi, &out[i], c->waiting[i] ? -1 : 0, &p->ub, &p->level, e))
			return e->code;
	}
	qsort(c->pend, (size_t)n, sizeof *c->pend, by_bound);
	for (j = 0; j < n; j++) {
		p = &c->pend[j];
		r = &out[p->i];
		if (ruled_out(c, sw->cands[p->i].strat, p->ub, out, best, ru)) {
			c->k.unsearched += c->waiting[p->i];
			r->status = SWEEP_BOUNDED;
			snprintf(r->note, sizeof r->note, "not simulated: its bound cannot reach the cell's best or "
				 "runner-up (the tables)");
			continue;
		}
		apply(c, p->i);
		if (c->waiting[p->i]) {  /* its memory, searched now that its bound leaves it in */
			c->waiting[p->i] = 0;
			if (settle(c, p->i, sw->batches[bi], r, e))
				return e->code;
			if (r->status != SWEEP_OK)
				continue;
		}
		if (p->level < 2) {  /* a looser bound leaves it in: the next, then its place again */
			if (upper_score(c, p->i, bi, r, p->level + 1, &p->ub, &p->level, e))
				return e->code;
			x = *p;
			for (k = j; k + 1 < n && by_bound(&c->pend[k + 1], &x) < 0; k++)
				c->pend[k] = c->pend[k + 1];
			c->pend[k] = x;
			j--;
			continue;
		}
		/* its step at the micro-batch it chose, before that is checked to
		 * fit (fitting: a breakdown, its tape built again): when the step
		 * is ruled out and so is every smaller micro-batch it would take
		 * if that did not fit, the check is not needed */
		keep = *r;
		if (finish(c, p->i, r, e))
			return e->code;
		if (ruled_out(c, sw->cands[p->i].strat, r->score, out, best, ru)) {
			if (smaller_ruled_out(c, p->i, bi, r, out, best, ru, &k, e))
				return e->code;
			if (k) {
				*r = keep;
				r->status = SWEEP_BOUNDED;
				snprintf(r->note, sizeof r->note, "not simulated: its bound cannot reach the cell's best "
					 "or runner-up (the tables)");
				continue;
			}
		}
		*r = keep;
		/* the micro-batch it would be shown at must fit (fitting) */
		mb = fitting(c, p->i, sw->batches[bi], &accum, &a, NULL, &failed, e);
		if (mb < 0)
			return e->code;
		if (mb == 0) {
			r->status = SWEEP_NOFIT;
			r->micro_batch = r->grad_accum = 0;
			nofit_note(c, &c->slots[p->i], a, sw->batches[bi], failed, r);
			continue;
		}
		r->micro_batch = mb;
		r->grad_accum = accum;
		if (finish(c, p->i, r, e))
			return e->code;
		c->done[nd++] = p->i;
		leaders(sw, out, c->done, nd, &best, &ru);
	}
	return 0;
}

/* The memory figures of candidate i, the best of its cell (SWEEP_TABLES):
 * the breakdown eval_cand leaves out, at the micro-batch and tape it chose. */
static int best_memory(struct sweep_ctx *c, int i, int64_t batch, struct sweep_result *r, struct err *e)
{
	int64_t accum, mb, failed;
	int a;

	apply(c, i);
	mb = fitting(c, i, batch, &accum, &a, NULL, &failed, e);
	if (mb < 0)
		return e->code;
	return memory(c, i, a, mb, r, e);
}

int sweep_eval_cell(struct sweep_ctx *c, int cell, struct sweep_result *out, struct err *e)
{
	const struct sweep *sw = c->sw;
	int model, seq, batch, i, j;

	sweep_cell_axes(sw, cell, &model, &seq, &batch);
	if (c->group != model * sw->nseq + seq)
		group_set(c, model, seq);
	for (j = 0; j < sw->ncand; j++) {
		struct sweep_result *r = &out[i = c->order[j]];
		memset(r, 0, sizeof *r);
		r->cell = cell;
		r->cand = i;
		if (eval_cand(c, i, sw->batches[batch], r, e))
			return e->code;
	}
	if (c->detail == SWEEP_TABLES && tables(c, batch, out, e))
		return e->code;
	rank_cell(out, sw->ncand);
	for (i = 0; c->detail == SWEEP_TABLES && i < sw->ncand; i++)
		if (out[i].rank == 1 && best_memory(c, i, sw->batches[batch], &out[i], e))
			return e->code;
	return 0;
}
