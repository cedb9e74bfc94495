/*
 * memory.c — evaluating allocation tapes: peak per micro-batch, the breakdown at
 * the peak, the max-batch search and the timeline CSV (see memory.h).
 *
 * The allocator model is applied here, at evaluation, so that a tape holds
 * requested sizes only. PyTorch's caching allocator
 * (c10/cuda/CUDACachingAllocator.cpp): a request is rounded up to 512 B; up to
 * 1 MiB it is served from the small pool's 2 MiB segments, below 10 MiB from
 * 20 MiB segments of the large pool, larger ones get a segment of their own
 * rounded up to 2 MiB. Reserved memory is modelled as each pool's live bytes
 * packed into whole segments (no fragmentation beyond the last segment), which
 * is what cudaMalloc must provide. Memory outside the allocator (CUDA context,
 * NCCL buffers) is added as is.
 */
#include "memory.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memwalk.h"

/* ---- evaluation --------------------------------------------------------------- */

/* x rounded up to a multiple of a (a <= 1: x). Powers of two (the profiles'
 * alignments and segments) take a mask for x >= 0; the result is the same. */
static inline int64_t round_up(int64_t x, int64_t a)
{
	if (a <= 1)
		return x;
	if ((a & (a - 1)) == 0 && x >= 0)
		return (x + a - 1) & ~(a - 1);
	return (x + a - 1) / a * a;
}

/* Live bytes by pool while a tape is replayed; each pool's total rounded up to
 * its segments is kept as the pool changes (no pools: small and mid stay 0). */
struct pools {
	int64_t outside, small, mid, big;
	int64_t rsmall, rmid;  /* small, mid rounded up to small_seg, large_seg */
};

/* Replays event e at micro-batch b into q; returns the allocated size of its
 * block (the request rounded to the alignment). A request up to small_max is
 * served from the small pool, below split_max from the mid pool, larger ones
 * get a segment of their own rounded up to huge_round; outside the allocator
 * the request is taken as is. */
static inline int64_t replay_event(const struct mem_plan *p, const struct mem_event *e, int64_t b,
				   struct pools *q)
{
	int64_t sz = e->fixed + b * e->per_sample;

	if (!e->pooled) {
		q->outside += e->sign * sz;
		return sz;
	}
	sz = round_up(sz, p->align);
	if (p->small_max <= 0) {
		q->big += e->sign * sz;
	} else if (sz <= p->small_max) {
		q->small += e->sign * sz;
		q->rsmall = round_up(q->small, p->small_seg);
	} else if (sz < p->split_max) {
		q->mid += e->sign * sz;
		q->rmid = round_up(q->mid, p->large_seg);
	} else {
		q->big += e->sign * round_up(sz, p->huge_round);
	}
	return sz;
}

/* What cudaMalloc must provide: outside the allocator as is, each pool in
 * whole segments. */
static inline int64_t reserved(const struct pools *q)
{
	return q->outside + q->big + q->rsmall + q->rmid;
}

static int pow2_or_none(int64_t a)
{
	return a <= 1 || (a & (a - 1)) == 0;
}

/* scan_peak's loop (below) when no size is negative, the alignment and the
 * huge rounding are powers of two (every profile's) and the small pool's limit
 * is below the split: each rounding is then a mask, the pools live in
 * registers, blocks are tested for the large pool first (most blocks are) and
 * the peak is kept without a branch. Same arithmetic, same results. */
static int64_t scan_peak_pow2(const struct mem_plan *p, const struct mem_tape *tp, int64_t b,
			      int64_t limit, int *at)
{
	const struct mem_event *ev = tp->ev;
	const int64_t am = p->align > 1 ? p->align - 1 : 0;
	const int pools = p->small_max > 0;
	/* no pools: every pooled block goes to "big", unrounded */
	const int64_t hm = pools && p->huge_round > 1 ? p->huge_round - 1 : 0;
	const int64_t small_max = p->small_max, big_min = pools ? p->split_max : 0;
	const int64_t lim = limit >= 0 ? limit : INT64_MAX;
	int64_t outside = 0, big = 0, small = 0, mid = 0, rsmall = 0, rmid = 0, peak = 0, sz, cur, sg;
	int i, a = -1, n = tp->n, take;

	for (i = 0; i < n; i++) {
		const struct mem_event *e = &ev[i];
		sg = e->sign;
		sz = e->fixed + b * e->per_sample;
		if (!e->pooled) {
			outside += sg * sz;
		} else {
			sz = (sz + am) & ~am;
			if (sz >= big_min) {
				big += sg * ((sz + hm) & ~hm);
			} else if (sz <= small_max) {
				small += sg * sz;
				rsmall = round_up(small, p->small_seg);
			} else {
				mid += sg * sz;
				rmid = round_up(mid, p->large_seg);
			}
		}
		cur = outside + big + rsmall + rmid;
		take = (sg > 0) & (cur >= peak);
		peak = take ? cur : peak;
		a = take ? i : a;
		if (sg > 0 && cur > lim)
			break;
	}
	*at = a;
	return peak;
}

/* The peak reserved bytes of tape t at b; *at = the last event at the peak
 * (-1 none). With limit >= 0, stops at the first event above limit and
 * returns its reserved bytes. */
static int64_t scan_peak(const struct mem_plan *p, int t, int64_t b, int64_t limit, int *at)
{
	const struct mem_tape *tp = &p->tape[t];
	struct pools q = {0, 0, 0, 0, 0, 0};
	int64_t peak = 0, cur;
	int i, a = -1;

	if (tp->nonneg && b >= 0 && pow2_or_none(p->align) && pow2_or_none(p->huge_round) &&
	    (p->small_max <= 0 || p->small_max < p->split_max))
		return scan_peak_pow2(p, tp, b, limit, at);
	for (i = 0; i < tp->n; i++) {
		const struct mem_event *e = &tp->ev[i];
		replay_event(p, e, b, &q);
		if (e->sign > 0 && (cur = reserved(&q)) >= peak) {
			peak = cur;
			a = i;
			if (limit >= 0 && cur > limit)
				break;
		}
	}
	*at = a;
	return peak;
}

int64_t mem_peak_packed(const struct mem_plan *p, int t, int64_t b)
{
	int at;

	return scan_peak(p, t, b, -1, &at);
}

/* ---- the caching allocator, emulated ---------------------------------------------- */

/* The emulation's scratch: the allocator, and its live blocks by request size
 * (a free releases the latest live block of its size): an open-addressing
 * table of sizes, each heading a stack of block handles. */
struct mem_emu {
	struct alloc a;
	int64_t *key;          /* (cap) request sizes */
	uint32_t *gen;         /* (cap) the replay that set the slot (older: empty) */
	uint32_t cur;          /* this replay */
	int *top;              /* (cap) the size's latest live block, -1 none */
	int *below;            /* (capb) per block handle: the next live block of its size */
	int cap, capb;
	int nomem;             /* the host ran out of memory */
	/* the last replay that ran through at the capacity, per tape: a sweep
	 * asks for the breakdown at the micro-batch its search just checked */
	int64_t last_b[2], last_peak[2];
	int last_at[2];
	int64_t max[2];        /* the search's answer per tape, -1 not searched */
};

/* Room for a tape of n events; the table emptied (a new generation).
 * Returns 0 or -1. */
static int emu_prepare(struct mem_emu *m, int n)
{
	int cap = 64;

	while (cap < 2 * n)
		cap *= 2;
	if (cap > m->cap) {
		int64_t *k = realloc(m->key, (size_t)cap * sizeof *k);
		uint32_t *g;
		int *tp;
		if (!k)
			return -1;
		m->key = k;
		tp = realloc(m->top, (size_t)cap * sizeof *tp);
		if (!tp)
			return -1;
		m->top = tp;
		g = realloc(m->gen, (size_t)cap * sizeof *g);
		if (!g)
			return -1;
		m->gen = g;
		memset(m->gen, 0, (size_t)cap * sizeof *g);
		m->cap = cap;
		m->cur = 0;
	}
	if (++m->cur == 0) {  /* wrapped: every slot emptied for real */
		memset(m->gen, 0, (size_t)m->cap * sizeof *m->gen);
		m->cur = 1;
	}
	return 0;
}

/* The table slot of size (made when absent). */
static int emu_slot(struct mem_emu *m, int64_t size)
{
	uint64_t h = (uint64_t)size * 0x9E3779B97F4A7C15ULL;
	int i = (int)(h >> 40) & (m->cap - 1);

	while (m->gen[i] == m->cur && m->key[i] != size)
		i = (i + 1) & (m->cap - 1);
	if (m->gen[i] != m->cur) {
		m->gen[i] = m->cur;
		m->key[i] = size;
		m->top[i] = -1;
	}
	return i;
}

static int emu_push(struct mem_emu *m, int64_t size, int h)
{
	int i = emu_slot(m, size);

	if (h >= m->capb) {
		int n = 2 * h + 64, *nb = realloc(m->below, (size_t)n * sizeof *nb);
		if (!nb)
			return -1;
		m->below = nb;
		m->capb = n;
	}
	m->below[h] = m->top[i];
	m->top[i] = h;
	return 0;
}

static int emu_pop(struct mem_emu *m, int64_t size)
{
	int i = emu_slot(m, size), h = m->top[i];

	if (h >= 0)
		m->top[i] = m->below[h];
	return h;
}

/* Replays tape t at b through the emulated allocator, cap bytes for its
 * requests. Returns 0, ALLOC_EOOM (it ran out) or ALLOC_ESYS (host memory);
 * *peak = the most it held plus what is outside it, *at = the event where it
 * first held that with the most allocated (-1 none). */
static int emu_replay(const struct mem_plan *p, int t, int64_t b, int64_t cap, int64_t *peak, int *at)
{
	const struct mem_tape *tp = &p->tape[t];
	struct mem_emu *m = p->emu;
	struct alloc_cfg c = p->acfg;
	int64_t outside = 0, sz, cur, best_alloc = -1;
	int i, h;

	*peak = 0;
	*at = -1;
	c.capacity = cap;
	if (emu_prepare(m, tp->n))
		return ALLOC_ESYS;
	alloc_reset(&m->a, &c);
	for (i = 0; i < tp->n; i++) {
		const struct mem_event *e = &tp->ev[i];
		sz = e->fixed + b * e->per_sample;
		if (!e->pooled) {
			outside += e->sign * sz;
		} else if (e->sign > 0) {
			h = alloc_malloc(&m->a, sz);
			if (h < 0)
				return h;
			if (emu_push(m, sz, h))
				return ALLOC_ESYS;
		} else if ((h = emu_pop(m, sz)) >= 0) {
			alloc_free(&m->a, h);
		}
		cur = m->a.reserved + outside;
		if (e->sign > 0 && (cur > *peak || (cur == *peak && m->a.allocated > best_alloc))) {
			*peak = cur;
			best_alloc = m->a.allocated;
			*at = i;
		}
	}
	return 0;
}

/* What the allocator may take: the device's capacity less what is outside it. */
static int64_t emu_capacity(const struct mem_plan *p, int t)
{
	return p->capacity - p->tape[t].outside;
}

/* A replay at the capacity, remembered when it ran through. */
static int emu_run(const struct mem_plan *p, int t, int64_t b, int64_t *peak, int *at)
{
	struct mem_emu *m = p->emu;
	int rc;

	if (m->last_b[t] == b) {
		*peak = m->last_peak[t];
		*at = m->last_at[t];
		return 0;
	}
	rc = emu_replay(p, t, b, emu_capacity(p, t), peak, at);
	if (rc == 0) {
		m->last_b[t] = b;
		m->last_peak[t] = *peak;
		m->last_at[t] = *at;
	}
	return rc;
}

/* The emulated peak of tape t at b (mem_peak), at *at. */
static int64_t emu_peak(const struct mem_plan *p, int t, int64_t b, int *at)
{
	int64_t peak;
	/* above the searched maximum it runs out: what it would need, at once */
	int rc = p->emu->max[t] >= 0 && b > p->emu->max[t] ? ALLOC_EOOM : emu_run(p, t, b, &peak, at);

	if (rc == ALLOC_EOOM)  /* what it would need */
		rc = emu_replay(p, t, b, (int64_t)1 << 60, &peak, at);
	if (rc)
		p->emu->nomem = 1;
	return peak;
}

static int emu_fits(const struct mem_plan *p, int t, int64_t b)
{
	int64_t peak;
	int at, rc = emu_run(p, t, b, &peak, &at);

	if (rc == ALLOC_ESYS)
		p->emu->nomem = 1;
	return rc == 0;
}

int64_t mem_peak(const struct mem_plan *p, int t, int64_t b)
{
	int at;

	return p->emulate ? emu_peak(p, t, b, &at) : scan_peak(p, t, b, -1, &at);
}

/* The composition of tape t at b after event at (live, what, slack, op, phase). */
static void composition(const struct mem_plan *p, int t, int64_t b, int at, struct mem_detail *d)
{
	const struct mem_tape *tp = &p->tape[t];
	struct pools q = {0, 0, 0, 0, 0, 0};
	int64_t sz, alloc_total = 0;
	int i;

	d->event = at;
	for (i = 0; i <= at; i++) {
		const struct mem_event *e = &tp->ev[i];
		sz = e->sign * replay_event(p, e, b, &q);
		d->live[e->cat] += sz;
		d->what[e->what] += sz;
		alloc_total += sz;
	}
	d->slack = d->peak - alloc_total;
	if (at >= 0) {
		d->op = tp->ev[at].op;
		d->phase = tp->ev[at].phase;
	}
}

void mem_detail(const struct mem_plan *p, int t, int64_t b, struct mem_detail *d)
{
	const struct mem_tape *tp = &p->tape[t];
	struct pools q = {0, 0, 0, 0, 0, 0};
	int64_t sz, cur, states = 0, tens = 0, what[W_NWHAT] = {0};
	int i, at = -1;

	memset(d, 0, sizeof *d);
	d->op = -1;
	for (i = 0; i < tp->n; i++) {
		const struct mem_event *e = &tp->ev[i];
		sz = replay_event(p, e, b, &q);
		if (e->cat != MEM_OVERHEAD && (tens += e->sign * sz) > d->tensors) {
			d->tensors = tens;
			d->tensor_phase = e->phase;
		}
		what[e->what] += e->sign * sz;
		if (what[e->what] > d->what_peak[e->what])
			d->what_peak[e->what] = what[e->what];
		if (e->cat == MEM_PARAMS || e->cat == MEM_GRADS || e->cat == MEM_OPTIM) {
			states += e->sign * sz;
			if (states > d->states_peak)
				d->states_peak = states;
			if (e->phase == MEM_SETUP)
				d->states_setup = states;
		}
		if (e->sign > 0 && (cur = reserved(&q)) >= d->peak) {
			d->peak = cur;  /* the last event at the peak: its fullest composition */
			at = i;
		}
	}
	if (p->emulate)
		d->peak = emu_peak(p, t, b, &at);
	composition(p, t, b, at, d);
}

void mem_detail_peak(const struct mem_plan *p, int t, int64_t b, struct mem_detail *d)
{
	int at;

	memset(d, 0, sizeof *d);
	d->op = -1;
	d->peak = p->emulate ? emu_peak(p, t, b, &at) : scan_peak(p, t, b, -1, &at);
	composition(p, t, b, at, d);
}

/* ---- max-batch search ----------------------------------------------------------- */

/* The largest b whose unrounded live bytes fit at every event: an upper bound,
 * since rounding and pools only add. */
static int64_t linear_bound(const struct mem_plan *p, int t)
{
	const struct mem_tape *tp = &p->tape[t];
	int64_t ub = (int64_t)1 << 40, c, room;
	int i;

	for (i = 0; i < tp->n; i++) {
		if (tp->cum_fixed[i] > p->capacity)
			return -1;
		/* ub = min(ub, room / cum_ps): floor(room / ps) < ub exactly when
		 * room < ub x ps, so the division is done only when it lowers ub */
		if (tp->cum_ps[i] > 0) {
			room = p->capacity - tp->cum_fixed[i];
			if (__builtin_mul_overflow(ub, tp->cum_ps[i], &c) || c > room)
				ub = room / tp->cum_ps[i];
		}
	}
	return ub;
}

/* Whether tape t's peak at b fits (the scan stops at the first event over). */
static int fits(const struct mem_plan *p, int t, int64_t b)
{
	int at;

	return scan_peak(p, t, b, p->capacity, &at) <= p->capacity;
}

/* The largest b in [lo, hi) that fit() accepts, lo accepted (or 0 for
 * none) and hi not. */
static int64_t bisect(const struct mem_plan *p, int t, int64_t lo, int64_t hi,
		      int (*fit)(const struct mem_plan *, int, int64_t))
{
	int64_t mid;

	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (fit(p, t, mid))
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static int64_t tape_max(const struct mem_plan *p, int t)
{
	int64_t hi = linear_bound(p, t), lo, step = 1;

	if (hi < 1 || !fits(p, t, 1))
		return 0;
	if (fits(p, t, hi))
		return hi;
	/* gallop down from the bound to a fitting b, then bisect (lo fits, hi not) */
	lo = hi - 1;
	while (lo > 1 && !fits(p, t, lo)) {
		hi = lo;
		step *= 2;
		lo = hi - step > 1 ? hi - step : 1;
	}
	return bisect(p, t, lo, hi, fits);
}

/* How far below b (which does not fit) the answer likely is: what the
 * allocator would need at b beyond the capacity, in samples of the tape's
 * largest per-sample total; at least 1. */
static int64_t emu_guess(const struct mem_plan *p, int t, int64_t b)
{
	const struct mem_tape *tp = &p->tape[t];
	int64_t need, ps = 0, over;
	int i, at;

	if (emu_replay(p, t, b, (int64_t)1 << 60, &need, &at))
		return 1;
	for (i = 0; i < tp->n; i++)
		ps = tp->cum_ps[i] > ps ? tp->cum_ps[i] : ps;
	over = need - p->capacity;
	return ps > 0 && over > 0 ? (over + ps - 1) / ps : 1;
}

/* The largest b that the emulated allocator runs without failing, searched
 * from the packed model's answer (usually within a sample or two of it):
 * gallop away from it, then bisect; never above the linear bound. */
static int64_t tape_max_emu(const struct mem_plan *p, int t)
{
	int64_t ub = linear_bound(p, t), b = tape_max(p, t), lo, hi, nb, step = 1;

	if (ub < 1)
		return 0;
	b = b < 1 ? 1 : b > ub ? ub : b;
	if (emu_fits(p, t, b)) {
		lo = b;
		hi = ub + 1;  /* past the bound: known not to fit */
		while ((nb = lo + step) <= ub && emu_fits(p, t, nb)) {
			lo = nb;
			step *= 2;
		}
		if (nb <= ub)
			hi = nb;
	} else {
		hi = b;
		lo = 0;  /* 0: nothing fits */
		step = emu_guess(p, t, b);
		while ((nb = hi - step) >= 1 && !emu_fits(p, t, nb)) {
			hi = nb;
			step *= 2;
		}
		if (nb >= 1)
			lo = nb;
	}
	return bisect(p, t, lo, hi, emu_fits);
}

int64_t mem_max_batch(const struct mem_plan *p, int *binding)
{
	int64_t best = -1, b;
	int t;

	*binding = 0;
	for (t = 0; t < p->ntapes; t++) {
		b = p->emulate ? (p->emu->max[t] = tape_max_emu(p, t)) : tape_max(p, t);
		if (best < 0 || b < best) {
			best = b;
			*binding = t;
		}
	}
	return best < 0 ? 0 : best;
}

/* ---- building ------------------------------------------------------------------- */

static int cumulate(struct mem_tape *t)
{
	int64_t f = 0, s = 0, o;
	int i;

	if (t->n + 1 > t->cum_cap) {  /* a rebuilt plan keeps its arrays when they are large enough */
		int64_t *cf = realloc(t->cum_fixed, ((size_t)t->n + 1) * sizeof *cf), *cp;
		if (!cf)
			return -1;
		t->cum_fixed = cf;
		cp = realloc(t->cum_ps, ((size_t)t->n + 1) * sizeof *cp);
		if (!cp)
			return -1;
		t->cum_ps = cp;
		t->cum_cap = t->n + 1;
	}
	t->nonneg = 1;
	t->outside = 0;
	for (i = 0, o = 0; i < t->n; i++) {
		if (!t->ev[i].pooled) {  /* setup's fixed costs (context, NCCL): no per-sample part */
			o += t->ev[i].sign * t->ev[i].fixed;
			t->outside = o > t->outside ? o : t->outside;
		}
		if (t->ev[i].fixed < 0 || t->ev[i].per_sample < 0)
			t->nonneg = 0;
		f += t->ev[i].sign * t->ev[i].fixed;
		s += t->ev[i].sign * t->ev[i].per_sample;
		t->cum_fixed[i] = f;
		t->cum_ps[i] = s;
	}
	return 0;
}

int mem_plan_build(struct mem_plan *p, const struct scenario *s, const struct graph *g,
		   const struct fw_profile *pf, struct err *e)
{
	memset(p, 0, sizeof *p);
	return mem_plan_rebuild(p, s, g, pf, e);
}

int mem_plan_rebuild(struct mem_plan *p, const struct scenario *s, const struct graph *g,
		     const struct fw_profile *pf, struct err *e)
{
	const struct scn_training *t = &s->s.training;
	struct mem_tape keep[2];
	struct mem_scripts *scripts = p->scripts;
	struct mem_emu *emu = p->emu;
	double host = 0, h2 = 0;
	int rc, i;

	memcpy(keep, p->tape, sizeof keep);
	memset(p, 0, sizeof *p);
	p->scripts = scripts;
	p->emu = emu;
	for (i = 0; i < 2; i++) {  /* the arrays, emptied */
		p->tape[i].ev = keep[i].ev;
		p->tape[i].cap = keep[i].cap;
		p->tape[i].cum_fixed = keep[i].cum_fixed;
		p->tape[i].cum_ps = keep[i].cum_ps;
		p->tape[i].cum_cap = keep[i].cum_cap;
	}
	p->capacity = (int64_t)s->capacity;
	p->align = (int64_t)pf->alignment;
	if (pf->small_pool_max > 0 && s->gpu.memory > 0) {  /* no caching allocator on the CPU backend */
		p->small_max = (int64_t)pf->small_pool_max;
		p->small_seg = (int64_t)pf->small_segment;
		p->split_max = (int64_t)pf->large_split_max;
		p->large_seg = (int64_t)pf->large_segment;
		p->huge_round = (int64_t)pf->huge_round;
		p->emulate = 1;
		p->acfg.max_split = (int64_t)(t->max_split_size_mb * 1048576.0);
		p->acfg.expandable = t->expandable_segments;
		p->acfg.gc_threshold = t->gc_threshold;
		p->acfg.allowed = (int64_t)(t->memory_fraction * s->capacity);
		if (!p->emu && !(p->emu = calloc(1, sizeof *p->emu)))
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory building the memory timeline");
		p->emu->last_b[0] = p->emu->last_b[1] = -1;  /* new tapes: nothing remembered */
		p->emu->max[0] = p->emu->max[1] = -1;
	}
	p->batch_mult = s->dp * t->grad_accum;
	if (s->plan.mech == MECH_DP && s->world > 1) {
		p->ntapes = 2;
		rc = memwalk_build(&p->tape[0], ROLE_DP_MASTER, s, g, pf, &host, p->scripts, e);
		if (!rc)
			rc = memwalk_build(&p->tape[1], ROLE_DP_REPLICA, s, g, pf, &h2, p->scripts, e);
		p->tape[1].gpu = 1;
	} else {
		p->ntapes = 1;
		rc = memwalk_build(&p->tape[0], ROLE_RANK, s, g, pf, &host, p->scripts, e);
	}
	p->host = host;
	for (i = 0; !rc && i < p->ntapes; i++)
		if (cumulate(&p->tape[i]))
			rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory building the memory timeline");
	return rc;
}

void mem_plan_free(struct mem_plan *p)
{
	int i;

	for (i = 0; i < 2; i++) {
		free(p->tape[i].ev);
		free(p->tape[i].cum_fixed);
		free(p->tape[i].cum_ps);
	}
	if (p->emu) {
		alloc_release(&p->emu->a);
		free(p->emu->key);
		free(p->emu->gen);
		free(p->emu->top);
		free(p->emu->below);
		free(p->emu);
	}
	memset(p, 0, sizeof *p);
}

/* ---- labels ------------------------------------------------------------------------ */

const char *mem_what_name(int what)
{
	static const char *const names[W_NWHAT] = {
		"CUDA context", "cuBLAS workspace", "NCCL buffers", "parameters",
		"fp32 master weights", "optimizer states", "loss-scale state", "gradients",
		"gradient shard", "fp32 gradient copy", "input ids", "saved activations",
		"transient activations", "recomputed activations", "activation gradients",
		"weight-gradient temporaries", "autocast weight copies", "gathered parameters",
		"unsharded gradients", "reduce-scatter buffers", "gradient buckets",
		"gathered logits", "replica parameters", "replica gradients",
		"optimizer-step temporaries", "staging copies", "all-gather buffers",
		"post-forward shards"};

	return what >= 0 && what < W_NWHAT ? names[what] : "?";
}

const char *mem_cat_name(int cat)
{
	static const char *const names[MEM_NCAT] = {"params", "grads", "optimizer", "activations",
		"activation_grads", "buffers", "overhead"};
	return cat >= 0 && cat < MEM_NCAT ? names[cat] : "?";
}

const char *mem_phase_name(int phase)
{
	static const char *const names[] = {"setup", "forward", "backward", "optimizer"};
	return phase >= 0 && phase <= MEM_OPT ? names[phase] : "?";
}

/* ---- predict.c's entry --------------------------------------------------------------- */

static void fill_result(const struct mem_plan *p, const struct graph *g, const struct mem_detail *d,
			int t, struct mem_result *r)
{
	int w, best = 0;

	memset(r, 0, sizeof *r);
	r->valid = 1;
	r->params = (double)d->live[MEM_PARAMS];
	r->grads = (double)d->live[MEM_GRADS];
	r->optimizer = (double)d->live[MEM_OPTIM];
	r->activations = (double)(d->live[MEM_ACT] + d->live[MEM_ACT_GRAD]);
	r->buffers = (double)d->live[MEM_BUFFERS];
	r->overhead = (double)(d->live[MEM_OVERHEAD] + d->slack);
	r->fixed_overhead = (double)d->live[MEM_OVERHEAD];
	r->tensor_peak = (double)d->tensors;
	r->tensor_phase = d->tensor_phase;
	r->peak = (double)d->peak;
	r->capacity = (double)p->capacity;
	r->fits = d->peak <= p->capacity;
	r->binding_gpu = p->tape[t].gpu;
	r->host = p->host;
	for (w = 1; w < W_NWHAT; w++)
		if (d->what[w] > d->what[best])
			best = w;
	snprintf(r->binding, sizeof r->binding, "GPU %d: %s (%.0f%% of the peak), %s%s%s",
		 r->binding_gpu, mem_what_name(best), d->peak > 0 ?
		 100.0 * (double)d->what[best] / (double)d->peak : 0.0, mem_phase_name(d->phase),
		 d->op >= 0 ? " " : "", d->op >= 0 ? g->ops[d->op].name : "");
}

int mem_predict(const struct scenario *s, const struct graph *g, struct prediction *pr,
		struct err *e)
{
	struct fw_profile pf;
	struct mem_plan p;
	struct mem_detail d, d2;
	int rc, bind = 0, t = 0;
	int64_t b;

	rc = plan_profile_load(s, &pf, e);
	if (rc)
		return rc;
	rc = mem_plan_build(&p, s, g, &pf, e);
	if (rc)
		goto out;
	pr->max_micro_batch = mem_max_batch(&p, &bind);
	pr->max_global_batch = pr->max_micro_batch * p.batch_mult;
	b = s->s.training.micro_batch > 0 ? s->s.training.micro_batch : pr->max_micro_batch;
	if (b < 1)
		b = 1;  /* nothing fits: describe one sample */
	pr->micro_batch = b;
	mem_detail(&p, 0, b, &d);
	if (p.ntapes == 2) {  /* dp: the most loaded GPU */
		mem_detail(&p, 1, b, &d2);
		if (d2.peak > d.peak) {
			d = d2;
			t = 1;
		}
	}
	fill_result(&p, g, &d, t, &pr->mem);
	if (p.ntapes == 2)
		pr->mem.other_peak = (double)(t ? mem_peak(&p, 0, b) : d2.peak);
out:
	mem_plan_free(&p);
	return rc;
}

/* ---- the timeline CSV ------------------------------------------------------------------ */

static void csv_rows(const struct mem_plan *p, const struct graph *g, int t, int64_t b, FILE *f)
{
	const struct mem_tape *tp = &p->tape[t];
	struct pools q = {0, 0, 0, 0, 0, 0};
	int64_t live[MEM_NCAT] = {0}, sz, total = 0;
	int i, c;

	fprintf(f, "event,phase,micro,op,what,action,bytes");
	for (c = 0; c < MEM_NCAT; c++)
		fprintf(f, ",%s", mem_cat_name(c));
	fprintf(f, ",allocated,reserved\n");
	for (i = 0; i < tp->n; i++) {
		const struct mem_event *e = &tp->ev[i];
		sz = replay_event(p, e, b, &q);
		live[e->cat] += e->sign * sz;
		total += e->sign * sz;
		fprintf(f, "%d,%s,%d,%s,%s,%s,%lld", i, mem_phase_name(e->phase), e->micro,
			e->op >= 0 ? g->ops[e->op].name : "", mem_what_name(e->what),
			e->sign > 0 ? "alloc" : "free", (long long)sz);
		for (c = 0; c < MEM_NCAT; c++)
			fprintf(f, ",%lld", (long long)live[c]);
		fprintf(f, ",%lld,%lld\n", (long long)total, (long long)reserved(&q));
	}
}

int mem_write_timeline(const struct mem_plan *p, const struct graph *g, int t, int64_t b,
		       FILE *f, const char *path, struct err *e)
{
	csv_rows(p, g, t, b, f);
	if (fflush(f) || ferror(f))
		return err_set(e, ERR_SYSTEM, path, 0, "cannot write the memory timeline: %s", strerror(errno));
	return 0;
}

int mem_timeline_csv(const struct scenario *s, const struct graph *g, int64_t b,
		     const char *path, struct err *e)
{
	struct fw_profile pf;
	struct mem_plan p;
	char tmp[CFG_STR_MAX + 16];
	FILE *f;
	int rc, t = 0;

	rc = plan_profile_load(s, &pf, e);
	if (rc)
		return rc;
	rc = mem_plan_build(&p, s, g, &pf, e);
	if (!rc && p.ntapes == 2 && mem_peak(&p, 1, b) > mem_peak(&p, 0, b))
		t = 1;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = rc ? NULL : fopen(tmp, "w");
	if (!rc && !f)
		rc = err_set(e, ERR_INPUT, path, 0, "cannot write the memory timeline: %s", strerror(errno));
	if (f) {
		rc = mem_write_timeline(&p, g, t, b, f, path, e);
		if (fclose(f) && !rc)
			rc = err_set(e, ERR_SYSTEM, path, 0, "cannot write the memory timeline: %s", strerror(errno));
		if (!rc && rename(tmp, path))
			rc = err_set(e, ERR_INPUT, path, 0, "cannot write the memory timeline: %s", strerror(errno));
		if (rc)
			remove(tmp);
	}
	mem_plan_free(&p);
	return rc;
}
