/*
 * memwalk.c — the allocation tape of one training step (see memwalk.h, memory.h).
 *
 * The walk: setup (what lives across steps), then for each micro-step the
 * forward op by op and the backward in reverse, then the optimizer step. Only
 * two micro-steps are walked: every later one repeats the second (gradients
 * already exist). The step is a steady-state one: optimizer states exist,
 * gradients were set to None by the previous zero_grad (PyTorch's default since
 * 2.0) unless the strategy keeps them in buffers.
 *
 * Mechanisms and their sources:
 *  - eager autograd (GRAPH_EAGER): a saved tensor lives until the backward of
 *    its first saver; an input gradient is allocated at the first consumer's
 *    backward (the last in forward), freed after its producer's backward; an add
 *    passes its output gradient through (AddBackward returns it as is); later
 *    contributions are new tensors accumulated into the buffer
 *    (torch/csrc/autograd/input_buffer.cpp). AccumulateGrad steals a fresh
 *    gradient when .grad is None and adds a new one otherwise
 *    (accumulate_grad.h).
 *  - autocast (torch.amp): a matmul casts its fp32 weight to 16 bits and saves
 *    the copy for backward; the 16-bit weight gradient is cast back to fp32 by
 *    ToCopyBackward before AccumulateGrad, once the product's node has released
 *    its saved tensors (the copy among them) and its incoming gradient
 *    (memstrat.c pt_cast_grads). The casts are cached until the
 *    outermost autocast region exits (after the loss, which the model computes
 *    inside it), also those a checkpointed region does not save
 *    (aten/src/ATen/autocast_mode.cpp, cached_casts).
 *  - fused attention (graph.h, AK_*): the kernel's backward workspace (fp32 dQ
 *    accumulator and row sums, the separate dq/dk/dv of a fused projection) is
 *    allocated before its input gradients and freed after them (flash_api.cpp
 *    mha_bwd; a slight overestimate: the accumulator is really freed before
 *    SplitBackward concatenates).
 *  - activation checkpointing (torch.utils.checkpoint, reentrant, the Hugging
 *    Face default): a region keeps only its inputs; its forward is replayed
 *    before its backward. selective = Korthikanti et al. 2022 §5: the attention
 *    core (scores, softmax, dropout, context) is the region.
 */
#include "memwalk_int.h"

#include <stdlib.h>
#include <string.h>

#include "vec.h"

/* ---- events ------------------------------------------------------------------ */

/* The strategy's hooks (memstrat.c) as the walk calls them. While a script is
 * recorded (memwalk_build), each call is written into it, with the phase and
 * micro-step its events take, between the walk's own events. */
enum hook {
	H_MICRO_BEGIN, H_FWD_PRE, H_FWD_POST, H_FWD_END, H_BWD_BEGIN, H_BWD_PRE, H_REPLAY_FETCH,
	H_PARAM_GRADS, H_BWD_POST, H_BWD_END, H_MICRO_END
};

static void call_hook(struct wk *w, int h, int i, int arg)
{
	switch (h) {
	case H_MICRO_BEGIN: memstrat_micro_begin(w); break;
	case H_FWD_PRE: memstrat_fwd_pre(w, i); break;
	case H_FWD_POST: memstrat_fwd_post(w, i); break;
	case H_FWD_END: memstrat_fwd_end(w); break;
	case H_BWD_BEGIN: memstrat_bwd_begin(w); break;
	case H_BWD_PRE: memstrat_bwd_pre(w, i); break;
	case H_REPLAY_FETCH: memstrat_replay_fetch(w, i, arg); break;
	case H_PARAM_GRADS: memstrat_param_grads(w, i); break;
	case H_BWD_POST: memstrat_bwd_post(w, i); break;
	case H_BWD_END: memstrat_bwd_end(w, arg); break;
	case H_MICRO_END: memstrat_micro_end(w); break;
	}
}

static void hook(struct wk *w, int h, int i, int arg)
{
	struct mem_script *sc = w->rec;

	if (sc) {
		if (sc->n == sc->cap) {
			int ncap = sc->cap ? 2 * sc->cap : 4096;
			struct mem_event *ne = realloc(sc->ev, (size_t)ncap * sizeof *ne);
			if (!ne) {
				w->oom = 1;
				return;
			}
			sc->ev = ne;
			sc->cap = ncap;
		}
		/* a hook: sign 0, what = the hook, op = its op, fixed = its argument */
		sc->ev[sc->n++] = (struct mem_event){.fixed = arg, .op = i, .what = (int16_t)h, .sign = 0,
			.phase = (int8_t)w->phase, .micro = (int8_t)w->micro};
	}
	w->in_hook = 1;
	call_hook(w, h, i, arg);
	w->in_hook = 0;
}

int memwalk_record(struct wk *w, const struct mem_event *e)
{
	struct mem_script *sc = w->rec;

	if (sc->n == sc->cap) {
		int ncap = sc->cap ? 2 * sc->cap : 4096;
		struct mem_event *ne = realloc(sc->ev, (size_t)ncap * sizeof *ne);
		if (!ne) {
			w->oom = 1;
			return -1;
		}
		sc->ev = ne;
		sc->cap = ncap;
	}
	sc->ev[sc->n++] = *e;
	return 0;
}

int memwalk_grow(struct wk *w)
{
	struct mem_tape *t = w->t;
	/* first: room for the usual tape (3.9 to 5.6 events per op and tensor per
	 * micro-step over the shipped models), then doubling */
	int ncap = t->cap ? t->cap * 2 : 6 * (w->g->nops + w->g->nt) * w->nmicro + 256;
	struct mem_event *ne = realloc(t->ev, (size_t)ncap * sizeof *ne);

	if (!ne) {
		w->oom = 1;
		return -1;
	}
	t->ev = ne;
	t->cap = ncap;
	return 0;
}

static int new_block(struct wk *w, int tsr)
{
	if (w->nblk == w->capblk) {
		int ncap = w->capblk ? w->capblk * 2 : 1024;
		int *nb = realloc(w->bsz, (size_t)ncap * sizeof *nb);
		int *nr;
		if (!nb) {
			w->oom = 1;
			return -1;
		}
		w->bsz = nb;
		nr = realloc(w->bref, (size_t)ncap * sizeof *nr);
		if (!nr) {
			w->oom = 1;
			return -1;
		}
		w->bref = nr;
		w->capblk = ncap;
	}
	w->bsz[w->nblk] = tsr;
	w->bref[w->nblk] = 1;
	return w->nblk++;
}

static void unref_grad(struct wk *w, int tsr, int op)
{
	int b = w->gblk[tsr];

	if (b < 0)
		return;
	w->gblk[tsr] = -1;
	if (--w->bref[b] == 0)
		act(w, -1, W_ACT_GRAD, op, w->bsz[b], MEM_ACT_GRAD);
}

/* ---- the walk ---------------------------------------------------------------- */

/* Weight elements an autocast matmul casts (its own, or the tied table). */
static int64_t cast_elems(const struct wk *w, int i)
{
	const struct gop *o = &w->g->ops[i];

	if (!w->wcast || o->kind != OP_MATMUL)
		return 0;
	return o->tied ? w->table : (int64_t)(o->k * o->n);
}

static void cast_alloc(struct wk *w, int i)
{
	int64_t c = cast_elems(w, i);

	if (c && !w->castl[i]) {
		alloc(w, MEM_BUFFERS, W_CAST, i, c * w->wcast);
		w->castl[i] = 1;
	}
}

static void cast_free(struct wk *w, int i)
{
	if (w->castl[i]) {
		release(w, MEM_BUFFERS, W_CAST, i, cast_elems(w, i) * w->wcast);
		w->castl[i] = 0;
	}
}

/* Frees t after op i in forward when this was its last use and nothing keeps it. */
static void fwd_maybe_free(struct wk *w, int i, int t)
{
	if (t >= 0 && w->fl[t] && life_fwd_frees(&w->lf, w->g, i, t)) {
		act(w, -1, act_what(w, t), i, t, MEM_ACT);
		w->fl[t] = 0;
	}
}

static void fwd_op(struct wk *w, int i)
{
	const struct gop *o = &w->g->ops[i];
	int k, p;

	hook(w, H_FWD_PRE, i, 0);
	cast_alloc(w, i);
	for (p = w->lf.poff[i]; p < w->lf.poff[i + 1]; p++) {
		act(w, +1, act_what(w, w->lf.prod[p]), i, w->lf.prod[p], MEM_ACT);
		w->fl[w->lf.prod[p]] = 1;
	}
	for (k = 0; k < o->nin; k++)
		fwd_maybe_free(w, i, life_distinct_in(o, k));
	for (p = w->lf.poff[i]; p < w->lf.poff[i + 1]; p++)
		fwd_maybe_free(w, i, w->lf.prod[p]);
	hook(w, H_FWD_POST, i, 0);
}

static void replay_free(struct wk *w, int i, int t)
{
	if (t < 0 || !w->rl[t] || !life_replay_frees(&w->lf, w->g, i, t))
		return;
	act(w, -1, W_RECOMPUTE, i, t, MEM_ACT);
	w->rl[t] = 0;
}

/* Replays region R's forward before its backward (memory.h S5). */
static void replay(struct wk *w, int R)
{
	int f = w->lf.rfirst[R], l = w->lf.rlast[R], i, k, p;

	for (i = f; i <= l; i++) {
		const struct gop *o = &w->g->ops[i];
		hook(w, H_REPLAY_FETCH, i, l);
		cast_alloc(w, i);
		for (p = w->lf.poff[i]; p < w->lf.poff[i + 1]; p++) {
			act(w, +1, W_RECOMPUTE, i, w->lf.prod[p], MEM_ACT);
			w->rl[w->lf.prod[p]] = 1;
		}
		for (k = 0; k < o->nin; k++)
			replay_free(w, i, life_distinct_in(o, k));
		for (p = w->lf.poff[i]; p < w->lf.poff[i + 1]; p++)
			replay_free(w, i, w->lf.prod[p]);
	}
}

static void input_grads(struct wk *w, int i, int gout)
{
	const struct gop *o = &w->g->ops[i];
	int k, t;

	for (k = 0; k < o->nin; k++) {
		t = life_distinct_in(o, k);
		if (t < 0 || w->g->t[t].producer < 0 || w->g->t[t].nograd)
			continue;
		if (o->kind == OP_ADD && gout >= 0) {
			if (w->gblk[t] < 0) {  /* AddBackward passes the gradient through */
				w->gblk[t] = gout;
				w->bref[gout]++;
			}
		} else if (w->gblk[t] < 0) {
			int b = new_block(w, t);
			if (b < 0)
				return;
			w->gblk[t] = b;
			act(w, +1, W_ACT_GRAD, i, t, MEM_ACT_GRAD);
		} else if (w->eager) {  /* a new contribution, accumulated then freed */
			act(w, +1, W_ACT_GRAD, i, t, MEM_ACT_GRAD);
			act(w, -1, W_ACT_GRAD, i, t, MEM_ACT_GRAD);
		}
	}
}

static void bwd_op(struct wk *w, int i)
{
	const struct gop *o = &w->g->ops[i];
	int R = w->lf.reg[i], gout = o->out >= 0 ? w->gblk[o->out] : -1, p, t;
	int runs = o->kind == OP_LOSS || gout >= 0 || has_param_grads(w, i);

	hook(w, H_BWD_PRE, i, 0);  /* FSDP's pre-backward unshard precedes the recompute */
	if (R >= 0 && i == w->lf.rlast[R])
		replay(w, R);
	if (runs) {
		/* a fused kernel's backward workspace, freed when it returns */
		int64_t ws = (int64_t)o->bwd_ws;
		memwalk_event(w, +1, MEM_ACT_GRAD, W_TEMP_ACT, i, 0, ws, 1);
		input_grads(w, i, gout);
		memwalk_event(w, -1, MEM_ACT_GRAD, W_TEMP_ACT, i, 0, ws, 1);
		if (has_param_grads(w, i))
			hook(w, H_PARAM_GRADS, i, 0);
	}
	if (o->out >= 0)
		unref_grad(w, o->out, i);
	for (p = w->lf.foff[i]; p < w->lf.foff[i + 1]; p++) {
		t = w->lf.ffree[p];
		if (w->fl[t] && !w->g->t[t].held) {
			act(w, -1, act_what(w, t), i, t, MEM_ACT);
			w->fl[t] = 0;
		}
	}
	for (p = w->lf.roff[i]; p < w->lf.roff[i + 1]; p++) {
		t = w->lf.rfree[p];
		if (w->rl[t]) {
			act(w, -1, W_RECOMPUTE, i, t, MEM_ACT);
			w->rl[t] = 0;
		}
	}
	cast_free(w, i);
	hook(w, H_BWD_POST, i, 0);
}

/* Everything the micro-step still holds (held outputs; anything a graph without
 * a saver left behind) is dropped at its end. */
static void micro_end(struct wk *w)
{
	const struct graph *g = w->g;
	int t;

	for (t = g->nt - 1; t >= 0; t--) {
		if (w->fl[t]) {
			act(w, -1, act_what(w, t), -1, t, MEM_ACT);
			w->fl[t] = 0;
		}
		if (w->rl[t]) {
			act(w, -1, W_RECOMPUTE, -1, t, MEM_ACT);
			w->rl[t] = 0;
		}
		unref_grad(w, t, -1);
	}
	hook(w, H_MICRO_END, -1, 0);
}

static void micro_step(struct wk *w, int last)
{
	const struct graph *g = w->g;
	int i, t;

	w->phase = MEM_FWD;
	hook(w, H_MICRO_BEGIN, -1, 0);
	for (t = 0; t < g->nt; t++)
		if (g->t[t].producer < 0) {
			act(w, +1, W_INPUT, -1, t, MEM_ACT);
			w->fl[t] = 1;
		}
	for (i = 0; i < g->nops; i++)
		fwd_op(w, i);
	/* the outermost autocast region exits after the loss and clears its cast
	 * cache: the copies a recompute region's forward did not save go (the
	 * recompute casts again, autocast_mode.cpp clear_cache) */
	for (i = 0; i < g->nops; i++)
		if (w->lf.reg[i] >= 0)
			cast_free(w, i);
	for (t = 0; t < g->nt; t++)  /* the forward returns: its output objects go */
		if (g->t[t].fwd_held && w->fl[t] && !life_kept(&w->lf, g, t)) {
			act(w, -1, act_what(w, t), g->nops - 1, t, MEM_ACT);
			w->fl[t] = 0;
		}
	hook(w, H_FWD_END, -1, 0);
	w->phase = MEM_BWD;
	hook(w, H_BWD_BEGIN, -1, 0);
	for (i = g->nops - 1; i >= 0; i--)
		bwd_op(w, i);
	hook(w, H_BWD_END, -1, last);
	micro_end(w);
}

/* ---- building ---------------------------------------------------------------- */

static int prepare(struct wk *w)
{
	const struct graph *g = w->g;
	int nt = g->nt, i;

	w->gblk = malloc((size_t)nt * sizeof *w->gblk);
	w->fl = calloc((size_t)nt, 1);
	w->rl = calloc((size_t)nt, 1);
	w->castl = calloc((size_t)g->nops, 1);
	if (!w->gblk || !w->fl || !w->rl || !w->castl ||
	    life_build(&w->lf, g, w->s->s.training.recompute))
		return -1;
	for (i = 0; i < nt; i++)
		w->gblk[i] = -1;
	return 0;
}

static void wk_free(struct wk *w)
{
	life_free(&w->lf);
	free(w->fl); free(w->rl); free(w->gblk); free(w->bsz); free(w->bref);
	free(w->pg); free(w->castl); free(w->u); free(w->uown); free(w->ul); free(w->ugl); free(w->ufg);
	free(w->usg); free(w->ush); free(w->agl); free(w->pfl); free(w->arl); free(w->G); free(w->pers); free(w->zl); free(w->after);
	free(w->ufoff); free(w->ufirst); free(w->uloff); free(w->ulast); free(w->uooff); free(w->uops);
	free(w->unext);
	free(w->znext); free(w->zprev);
}

/* Whether script sc holds the walk of w (its graph, checkpointing,
 * micro-steps and autocast copies: all the walk's own events depend on). */
static int script_fits(const struct mem_script *sc, const struct wk *w)
{
	return sc->valid && sc->g == w->g && sc->recompute == w->s->s.training.recompute &&
		sc->nmicro == w->nmicro && sc->wcast == w->wcast && sc->table == w->table;
}

/* Whether a walk with MEMWALK_STOP_UNFIT stops here: the events so far
 * cannot hold one sample on the device, so neither can the whole tape
 * (mem_tape_bound: a prefix's bound is at least the whole tape's). Sets
 * t->cut. */
static int unfit_so_far(struct wk *w)
{
	if (!w->stop_unfit || w->oom || mem_tape_bound(w->t, (int64_t)w->s->capacity) >= 1)
		return 0;
	w->t->cut = 1;
	return 1;
}

/* The tape from a recorded script: its events copied, its hooks called; with
 * MEMWALK_STOP_UNFIT it stops after the first micro-step's forward when the
 * activations have already left no room for one sample (bench/sweep-1m.ini's
 * tables: about 1,800 tapes beyond those cut after their setup). */
static void replay_script(struct wk *w, const struct mem_script *sc)
{
	const struct mem_event *e;
	struct mem_tape *t = w->t;
	int i;

	for (i = 0; i < sc->n; i++) {
		e = &sc->ev[i];
		if (e->sign) {
			if (t->n == t->cap && memwalk_grow(w))
				return;
			t->ev[t->n++] = *e;
			continue;
		}
		w->phase = e->phase;
		w->micro = e->micro;
		w->in_hook = 1;
		call_hook(w, e->what, e->op, (int)e->fixed);
		w->in_hook = 0;
		if (e->what == H_FWD_END && e->micro == 0 && unfit_so_far(w))
			return;
	}
}

int memwalk_build(struct mem_tape *t, int role, const struct scenario *s, const struct graph *g,
		  const struct fw_profile *pf, unsigned flags, double *host, struct mem_scripts *cache,
		  struct err *e)
{
	struct wk w;
	struct mem_script *sc = NULL;
	int rc = 0, nmicro = s->s.training.grad_accum > 1 ? 2 : 1, m, k, replay = 0;

	memset(&w, 0, sizeof w);
	w.s = s;
	w.g = g;
	w.pf = pf;
	w.t = t;
	w.role = role;
	w.nmicro = nmicro;
	w.zscan = (flags & MEMWALK_PREFETCH_SCAN) != 0;
	w.stop_unfit = (flags & MEMWALK_STOP_UNFIT) != 0;
	w.pg = calloc((size_t)g->nops * GRAPH_OP_PTENSORS + 1, 1);
	if (!w.pg || memstrat_configure(&w))
		goto oom;
	/* the walk's own events do not depend on the strategy but through the
	 * autocast copies, nor do they read its state, except DataParallel's
	 * gather (which drops the outputs): those of every other mechanism are
	 * recorded once and replayed */
	if (cache && w.mech != MECH_DP) {
		for (k = 0; k < cache->n && !script_fits(&cache->s[k], &w); k++)
			;
		if (k < cache->n) {
			sc = &cache->s[k];
			replay = 1;
		} else {
			for (k = 0; k < cache->n && cache->s[k].valid; k++)
				;
			if (k == cache->n && vec_grow((void **)&cache->s, &cache->cap, cache->n + 1, sizeof *cache->s))
				goto oom;
			if (k == cache->n)
				memset(&cache->s[cache->n++], 0, sizeof *cache->s);
			sc = &cache->s[k];
			sc->n = 0;
			sc->g = g;
			sc->recompute = s->s.training.recompute;
			sc->nmicro = nmicro;
			sc->wcast = w.wcast;
			sc->table = w.table;
		}
	}
	if (!replay && prepare(&w))
		goto oom;
	memstrat_setup(&w);
	if (unfit_so_far(&w)) {  /* the states alone leave no room for a sample: nothing more to walk */
		*host = w.host * (double)s->s.cluster.gpus_per_node;
		goto out;
	}
	if (replay) {
		replay_script(&w, sc);
		cache->replayed++;
	} else {
		w.rec = sc;
		for (m = 0; m < nmicro; m++) {
			w.micro = m;
			micro_step(&w, m == nmicro - 1);
		}
		w.rec = NULL;
		if (sc && !w.oom) {
			sc->valid = 1;
			cache->recorded++;
		}
	}
	if (!t->cut)
		memstrat_step(&w);
	if (w.oom)
		goto oom;
	*host = w.host * (double)s->s.cluster.gpus_per_node;
out:
	wk_free(&w);
	return rc;
oom:
	rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory building the memory timeline");
	goto out;
}

void mem_scripts_clear(struct mem_scripts *c)
{
	int i;

	for (i = 0; i < c->n; i++)
		c->s[i].valid = 0;
}

void mem_scripts_free(struct mem_scripts *c)
{
	int i;

	for (i = 0; i < c->n; i++)
		free(c->s[i].ev);
	free(c->s);
	memset(c, 0, sizeof *c);
}
