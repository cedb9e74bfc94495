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
 *
 * On GPUs the caching allocator is also emulated (alloc.h): a tape is replayed
 * through it at each micro-batch the search tries (emu.c, where a periodic
 * run's copies whose allocator state repeats are made at once instead of
 * replayed), and searches and peaks are remembered here by a digest of what
 * they read.
 */
#include "memory.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "memrun.h"
#include "memwalk.h"
#include "vec.h"

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

/* Live bytes by pool while a tape is replayed: outside the allocator, blocks
 * with a segment of their own, the small pool, the large pool's split blocks.
 * What cudaMalloc must provide is the first two as they are and the last two
 * rounded up to whole segments (reserved()). */
enum { P_OUT, P_BIG, P_SMALL, P_MID, NPOOL };

struct pools {
	int64_t v[NPOOL];      /* bytes */
};

/* Event e at micro-batch b: returns the allocated size of its block (the
 * request rounded to the alignment; outside the allocator the request as is),
 * sets *pool to the pool it lives in and *delta to what it adds to that pool's
 * bytes (signed). A request up to small_max is served from the small pool,
 * below split_max from the mid pool, larger ones get a segment of their own
 * rounded up to huge_round. */
static inline int64_t event_size(const struct mem_plan *p, const struct mem_event *e, int64_t b,
				 int *pool, int64_t *delta)
{
	int64_t sz = e->fixed + b * e->per_sample;

	if (!e->pooled) {
		*pool = P_OUT;
		*delta = e->sign * sz;
		return sz;
	}
	sz = round_up(sz, p->align);
	if (p->small_max <= 0) {
		*pool = P_BIG;
		*delta = e->sign * sz;
	} else if (sz <= p->small_max) {
		*pool = P_SMALL;
		*delta = e->sign * sz;
	} else if (sz < p->split_max) {
		*pool = P_MID;
		*delta = e->sign * sz;
	} else {
		*pool = P_BIG;
		*delta = e->sign * round_up(sz, p->huge_round);
	}
	return sz;
}

/* Replays event e at micro-batch b into q; returns its allocated size. */
static inline int64_t replay_event(const struct mem_plan *p, const struct mem_event *e, int64_t b,
				   struct pools *q)
{
	int64_t delta, sz;
	int pool;

	sz = event_size(p, e, b, &pool, &delta);
	q->v[pool] += delta;
	return sz;
}

/* What cudaMalloc must provide: outside the allocator as is, each pool in
 * whole segments. */
static inline int64_t reserved(const struct mem_plan *p, const int64_t v[NPOOL])
{
	return v[P_OUT] + v[P_BIG] + round_up(v[P_SMALL], p->small_seg) + round_up(v[P_MID], p->large_seg);
}

/* A scan of a tape: the pools so far, the peak reserved bytes of its allocs
 * and the last event at the peak (-1 none). */
struct scan {
	struct pools q;
	int64_t peak;
	int at;
};

/* Takes (cur, i), an alloc's reserved bytes and its index, in tape order: the
 * peak is the largest, at the last event that reaches it. */
static inline void take(struct scan *st, int64_t cur, int i)
{
	if (cur >= st->peak) {
		st->peak = cur;
		st->at = i;
	}
}

/* Events s .. e - 1 one by one. Returns 1 when an alloc went over limit (>= 0):
 * the scan stops there. */
static int scan_events(const struct mem_plan *p, const struct mem_tape *tp, int64_t b, int s, int e,
		       int64_t limit, struct scan *st)
{
	int64_t cur;
	int i;

	for (i = s; i < e; i++) {
		replay_event(p, &tp->ev[i], b, &st->q);
		if (tp->ev[i].sign > 0) {
			cur = reserved(p, st->q.v);
			take(st, cur, i);
			if (limit >= 0 && cur > limit)
				return 1;
		}
	}
	return 0;
}

/* Reserved bytes after event j of copy k of periodic run r, whose first copy
 * starts from pools v0 and adds d per copy. */
static int64_t copy_reserved(const struct mem_plan *p, const struct mem_tape *tp, const struct mem_run *r,
			     int64_t b, const int64_t v0[NPOOL], const int64_t d[NPOOL], int64_t k, int j)
{
	int64_t v[NPOOL], delta;
	int c, i, pool;

	for (c = 0; c < NPOOL; c++)
		v[c] = v0[c] + k * d[c];
	for (i = 0; i <= j; i++) {
		event_size(p, &tp->ev[r->start + i], b, &pool, &delta);
		v[pool] += delta;
	}
	return reserved(p, v);
}

/* The peak over the copies of periodic run r in closed form. Each pool adds
 * d[pool] per copy, so after event j of copy k it holds v0 + k x d + (what
 * copy 0 added up to j), and reserved() is non-decreasing in each pool. When
 * no pool shrinks per copy, the last copy holds every event's largest value;
 * when none grows, the first does (and an equal value later, the last event at
 * the peak, is found by bisection over the copies). When some grow and others
 * shrink, reserved() is the pools' sum, moving by D per copy, plus what the
 * rounding to segments adds, which is less than R: copies further than R / |D|
 * from the first (D < 0) or the last (D > 0) are below that end's value, and
 * only those within are read; D = 0 reads every copy. Returns 1 when an alloc
 * went over limit. */
static int scan_periodic(const struct mem_plan *p, const struct mem_tape *tp, const struct mem_run *r,
			 int64_t b, int64_t limit, struct scan *st)
{
	const struct mem_event *ev = tp->ev + r->start;
	int64_t d[NPOOL] = {0}, v0[NPOOL], delta, lin, cur, maxc = INT64_MIN, lo, hi, mid, D, R, win;
	int j, c, pool, up, down, at = -1, stop;

	for (j = 0; j < r->len; j++) {
		event_size(p, &ev[j], b, &pool, &delta);
		d[pool] += delta;
	}
	lin = d[P_OUT] + d[P_BIG];
	up = lin >= 0 && d[P_SMALL] >= 0 && d[P_MID] >= 0;
	down = lin <= 0 && d[P_SMALL] <= 0 && d[P_MID] <= 0;
	memcpy(v0, st->q.v, sizeof v0);
	if (!up && !down) {
		D = lin + d[P_SMALL] + d[P_MID];
		/* round_up(x, a) - x is in [0, 2a - 1) (a < 2 adds nothing) */
		R = (p->small_seg > 1 ? 2 * p->small_seg : 0) + (p->large_seg > 1 ? 2 * p->large_seg : 0);
		win = D != 0 ? R / (D < 0 ? -D : D) + 1 : r->reps;
		if (win >= r->reps)
			return scan_events(p, tp, b, r->start, r->start + r->len * r->reps, limit, st);
		lo = D < 0 ? 0 : r->reps - win;  /* the copies read: lo .. lo + win - 1 */
		for (c = 0; c < NPOOL; c++)
			st->q.v[c] = v0[c] + lo * d[c];
		stop = scan_events(p, tp, b, r->start + (int)lo * r->len, r->start + (int)(lo + win) * r->len,
				   limit, st);
		for (c = 0; c < NPOOL && !stop; c++)
			st->q.v[c] = v0[c] + (int64_t)r->reps * d[c];
		return stop;
	}
	if (up) {  /* the last copy, from its pools */
		for (c = 0; c < NPOOL; c++)
			st->q.v[c] = v0[c] + (int64_t)(r->reps - 1) * d[c];
		stop = scan_events(p, tp, b, r->start + (r->reps - 1) * r->len, r->start + r->reps * r->len,
				   limit, st);
		if (!stop)  /* scan_events read the last copy: the pools are those after the run */
			return 0;
		return 1;
	}
	/* down: the first copy holds the largest value of every event */
	for (j = 0; j < r->len; j++) {
		replay_event(p, &ev[j], b, &st->q);
		if (ev[j].sign > 0 && (cur = reserved(p, st->q.v)) > maxc)
			maxc = cur;
	}
	if (limit >= 0 && maxc > limit) {  /* stop at the first alloc over, as a scan would */
		memcpy(st->q.v, v0, sizeof v0);
		return scan_events(p, tp, b, r->start, r->start + r->len, limit, st);
	}
	if (maxc >= st->peak) {  /* the last (copy, event) at the value maxc */
		for (j = 0; j < r->len; j++) {
			if (ev[j].sign <= 0 || copy_reserved(p, tp, r, b, v0, d, 0, j) != maxc)
				continue;
			lo = 0;  /* copy lo holds maxc; find the last that does */
			hi = r->reps - 1;
			while (lo < hi) {
				mid = lo + (hi - lo + 1) / 2;
				if (copy_reserved(p, tp, r, b, v0, d, mid, j) == maxc)
					lo = mid;
				else
					hi = mid - 1;
			}
			if (r->start + (int)lo * r->len + j > at)
				at = r->start + (int)lo * r->len + j;
		}
		st->peak = maxc;
		st->at = at;
	}
	for (c = 0; c < NPOOL; c++)
		st->q.v[c] = v0[c] + (int64_t)r->reps * d[c];
	return 0;
}

/* The peak reserved bytes of tape t at b; *at = the last event at the peak
 * (-1 none). With limit >= 0, stops at the first alloc above limit and
 * returns at least its reserved bytes. */
static int64_t scan_peak(const struct mem_plan *p, int t, int64_t b, int64_t limit, int *at)
{
	const struct mem_tape *tp = &p->tape[t];
	struct scan st;
	int i, stop = 0;

	memset(&st, 0, sizeof st);
	st.at = -1;
	for (i = 0; i < tp->nrun && !stop; i++) {
		const struct mem_run *r = &tp->run[i];
		stop = r->reps > 1 ? scan_periodic(p, tp, r, b, limit, &st)
			: scan_events(p, tp, b, r->start, r->start + r->len, limit, &st);
	}
	*at = st.at;
	return st.peak;
}

int64_t mem_peak_packed(const struct mem_plan *p, int t, int64_t b)
{
	int at;

	return scan_peak(p, t, b, -1, &at);
}

/* Sums of one copy of run r at b: per category and per label, of the signed
 * allocated sizes of its events 0 .. upto (all: len - 1). */
static void copy_sums(const struct mem_plan *p, const struct mem_tape *tp, const struct mem_run *r,
		      int64_t b, int upto, int64_t live[MEM_NCAT], int64_t what[W_NWHAT], int64_t *total)
{
	int64_t sz, delta;
	int j, pool;

	for (j = 0; j <= upto; j++) {
		const struct mem_event *e = &tp->ev[r->start + j];
		sz = e->sign * event_size(p, e, b, &pool, &delta);
		live[e->cat] += sz;
		what[e->what] += sz;
		*total += sz;
	}
}

/* ---- the caching allocator, emulated (emu.c): memos of its searches and peaks ---- */

/* A search's answer (tape_max_emu) is a function of what it reads: the tape's
 * events (sizes, sign, pool), what is outside the allocator, the capacity and
 * the pools' and allocator's settings. A sweep meets the same tape again and
 * again (DDP's at every GPU count): with every candidate's figures make bench's
 * bench_recommend counts 250 of bench/sweep.ini's 1,488 searches and 4,642 of
 * the 1,000,000-candidate sweep's 10,392 answered from a memo (of 264 and
 * 4,644 repeats, counted once with a temporary counter: the table is
 * direct-mapped). A peak (emu_peak) is likewise a function of those inputs, b
 * and whether b lies above the searched maximum (it then replays without a
 * limit at once; below, or before any search, the same replays): with every
 * candidate's figures bench/sweep.ini asks 4,097 peaks and make bench counts
 * 522 answered from a memo. The event index of a peak is that tape's too:
 * equal digests are equal events. Each answer is remembered under a 128-bit digest of those
 * inputs and a key (0 a search; 2 b + 1 when above, 2 b otherwise, a peak);
 * two different inputs share a digest with probability ~2^-128 per pair. */
struct emu_memo {
	uint64_t h1, h2;       /* the digest; both 0: empty */
	int64_t key;
	int64_t value;         /* the search's maximum, or the peak (bytes) */
	int at;                /* the peak's event */
};

/* A memo table, direct-mapped by the digest and key: it starts with
 * EMU_MEMO_FIRST entries and doubles, up to EMU_MEMO_N, when a quarter of them
 * are filled. A simulate searches once and asks a peak or two: tables of a
 * sweep's size from the start (4,096 entries, two of 160 KiB zeroed by calloc
 * per plan) were 4 % of bench_simulate's instructions (callgrind: 432 -> 414
 * million for 50 runs). Grown at a quarter full to 8,192, the sweeps remember
 * as many answers as 4,096 from the start did (make bench: bench/sweep.ini's
 * searches 250 against 256, peaks 522 against 519; the 1M sweep's searches
 * 4,642 against 4,636, peaks 28,111 against 27,872). */
struct emu_memos {
	struct emu_memo *e;    /* (cap) */
	int cap, used;         /* entries, of which filled */
};

#define EMU_MEMO_FIRST 256
#define EMU_MEMO_N 8192

/* What the allocator may take: the device's capacity less what is outside it. */
static int64_t emu_capacity(const struct mem_plan *p, int t)
{
	return p->capacity - p->tape[t].outside;
}

/* A replay at the capacity, remembered when it ran through. */
static int emu_run(const struct mem_plan *p, int t, int64_t b, int64_t *peak, int *at)
{
	struct mem_emu *m = p->emu;
	int rc, i;

	for (i = 0; i < EMU_MEMO; i++)
		if (m->memo_b[t][i] == b) {
			*peak = m->memo_peak[t][i];
			*at = m->memo_at[t][i];
			return 0;
		}
	rc = emu_replay(p, t, b, emu_capacity(p, t), peak, at);
	if (rc == 0) {
		i = m->memo_next[t];
		m->memo_next[t] = (i + 1) % EMU_MEMO;
		m->memo_b[t][i] = b;
		m->memo_peak[t][i] = *peak;
		m->memo_at[t][i] = *at;
	}
	return rc;
}

static void emu_digest(const struct mem_plan *p, int t, uint64_t *d1, uint64_t *d2);

/* The emulated peak of tape t at b (mem_peak), at *at. */
static int64_t emu_peak_run(const struct mem_plan *p, int t, int64_t b, int above, int *at)
{
	int64_t peak;
	/* above the searched maximum it runs out: what it would need, at once */
	int rc = above ? ALLOC_EOOM : emu_run(p, t, b, &peak, at);

	if (rc == ALLOC_EOOM)  /* what it would need */
		rc = emu_replay(p, t, b, EMU_UNLIMITED, &peak, at);
	if (rc)
		p->emu->nomem = 1;
	return peak;
}

/* The slot of (h1, key) in a table of cap entries (a power of two). */
static inline struct emu_memo *emu_slot(struct emu_memo *e, int cap, uint64_t h1, int64_t key)
{
	return &e[(h1 ^ (uint64_t)key * 0x9E3779B97F4A7C15ULL) & (uint64_t)(cap - 1)];
}

/* Table *tab made or doubled (struct emu_memos), its entries placed again
 * (one of two that meet in a slot is dropped: only hits are lost). Returns 0,
 * or -1 when the host has no memory (the table is kept as it was). */
static int emu_memos_grow(struct emu_memos **tab)
{
	struct emu_memos *m = *tab;
	struct emu_memo *e, *x;
	int cap = m && m->cap ? 2 * m->cap : EMU_MEMO_FIRST, i;

	if (!m && !(m = *tab = calloc(1, sizeof *m)))
		return -1;
	if (!(e = calloc((size_t)cap, sizeof *e)))
		return -1;
	m->used = 0;
	for (i = 0; i < m->cap; i++) {
		if (!m->e[i].h1 && !m->e[i].h2)
			continue;
		x = emu_slot(e, cap, m->e[i].h1, m->e[i].key);
		m->used += !x->h1 && !x->h2;
		*x = m->e[i];
	}
	free(m->e);
	m->e = e;
	m->cap = cap;
	return 0;
}

/* The entry of memo table *tab (made on first use, grown as it fills) for
 * tape t's inputs and key; *hit 1 when it holds their answer. The entry is to
 * be filled by emu_keep before the table is read again. NULL when the host
 * has no memory for the table. */
static struct emu_memo *emu_recall(const struct mem_plan *p, int t, struct emu_memos **tab, int64_t key,
				   struct emu_memo *id, int *hit)
{
	struct emu_memo *x;

	*hit = 0;
	if ((!*tab || ((*tab)->used >= (*tab)->cap / 4 && (*tab)->cap < EMU_MEMO_N)) &&
	    emu_memos_grow(tab) && (!*tab || !(*tab)->e))
		return NULL;
	emu_digest(p, t, &id->h1, &id->h2);
	id->h1 |= id->h1 == 0 && id->h2 == 0;  /* (0, 0) marks an empty entry */
	id->key = key;
	x = emu_slot((*tab)->e, (*tab)->cap, id->h1, key);
	*hit = x->h1 == id->h1 && x->h2 == id->h2 && x->key == key;
	return x;
}

/* Fills entry x of table tab (emu_recall) with the answer to id's inputs,
 * unless the host's memory cut the answer short (then the entry is left
 * empty). */
static void emu_keep(const struct mem_plan *p, struct emu_memos *tab, struct emu_memo *x,
		     const struct emu_memo *id, int64_t value, int at)
{
	int was = x->h1 || x->h2;

	*x = (struct emu_memo){0, 0, id->key, value, at};
	if (!p->emu->nomem) {
		x->h1 = id->h1;
		x->h2 = id->h2;
	}
	tab->used += (x->h1 || x->h2) - was;
}

/* emu_peak_run through the peaks remembered (struct emu_memo). */
static int64_t emu_peak(const struct mem_plan *p, int t, int64_t b, int *at)
{
	struct mem_emu *m = p->emu;
	int above = m->max[t] >= 0 && b > m->max[t], hit;
	struct emu_memo id, *x = emu_recall(p, t, &m->seen, 2 * b + above, &id, &hit);
	int64_t peak;

	m->k.peaks++;
	if (hit) {
		m->k.peaks_known++;
		*at = x->at;
		return x->value;
	}
	peak = emu_peak_run(p, t, b, above, at);
	if (x)
		emu_keep(p, m->seen, x, &id, peak, *at);
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

/* The composition of tape t at b after event at (live, what, slack, op, phase):
 * whole copies of periodic runs are added as multiples of one. */
static void composition(const struct mem_plan *p, int t, int64_t b, int at, struct mem_detail *d)
{
	const struct mem_tape *tp = &p->tape[t];
	int64_t live[MEM_NCAT] = {0}, what[W_NWHAT] = {0}, total = 0, one_total;
	int i, c, full, n;

	d->event = at;
	for (i = 0; i < tp->nrun && at >= 0; i++) {
		const struct mem_run *r = &tp->run[i];
		n = r->len * r->reps;
		if (r->reps == 1) {  /* literal: as far as at */
			struct mem_run one = {r->start, 1, 1, 0};
			for (; one.start < r->start + n && one.start <= at; one.start++)
				copy_sums(p, tp, &one, b, 0, d->live, d->what, &total);
		} else {
			full = at >= r->start + n ? r->reps : (at - r->start) / r->len;
			if (at >= r->start) {
				memset(live, 0, sizeof live);
				memset(what, 0, sizeof what);
				one_total = 0;
				copy_sums(p, tp, r, b, r->len - 1, live, what, &one_total);
				for (c = 0; c < MEM_NCAT; c++)
					d->live[c] += full * live[c];
				for (c = 0; c < W_NWHAT; c++)
					d->what[c] += full * what[c];
				total += full * one_total;
				if (full < r->reps)  /* at is in copy full */
					copy_sums(p, tp, r, b, at - r->start - full * r->len, d->live, d->what, &total);
			}
		}
		if (at < r->start + n)
			break;
	}
	d->slack = d->peak - total;
	if (at >= 0) {
		d->op = tp->ev[at].op;
		d->phase = tp->ev[at].phase;
	}
}

static inline int is_state(int cat)
{
	return cat == MEM_PARAMS || cat == MEM_GRADS || cat == MEM_OPTIM;
}

/* The running totals mem_detail follows besides the peak: bytes per label and
 * of the model states (params + grads + optimizer). */
struct totals {
	int64_t what[W_NWHAT];
	int64_t states;
	int64_t tensors;       /* every category but the fixed overhead */
};

/* Event e (allocated size sz, signed) into x and the maxima of d, at copy k of
 * a run whose copies add dx (NULL: a literal event, k = 0). */
static void total_event(const struct mem_event *e, int64_t sz, struct totals *x, const struct totals *dx,
			int64_t k, struct mem_detail *d)
{
	int64_t v;

	if (e->cat != MEM_OVERHEAD) {
		x->tensors += sz;
		v = x->tensors + (dx ? k * dx->tensors : 0);
		if (v > d->tensors) {
			d->tensors = v;
			d->tensor_phase = e->phase;
		}
	}
	x->what[e->what] += sz;
	v = x->what[e->what] + (dx ? k * dx->what[e->what] : 0);
	if (v > d->what_peak[e->what])
		d->what_peak[e->what] = v;
	if (!is_state(e->cat))
		return;
	x->states += sz;
	v = x->states + (dx ? k * dx->states : 0);
	if (v > d->states_peak)
		d->states_peak = v;
	if (e->phase == MEM_SETUP)
		d->states_setup = v;
}

/* what_peak, states_peak and states_setup of tape t at b. Totals grow by the
 * same amount per copy of a periodic run, so each event's largest value is in
 * the first or the last copy, and the last setup event is in the last. */
static void detail_maxima(const struct mem_plan *p, int t, int64_t b, struct mem_detail *d)
{
	const struct mem_tape *tp = &p->tape[t];
	struct totals x, dx, save;
	int64_t delta, sz;
	int i, j, c, pool;

	memset(&x, 0, sizeof x);
	for (i = 0; i < tp->nrun; i++) {
		const struct mem_run *r = &tp->run[i];
		const struct mem_event *ev = tp->ev + r->start;
		if (r->reps == 1) {
			for (j = 0; j < r->len; j++)
				total_event(&ev[j], ev[j].sign * event_size(p, &ev[j], b, &pool, &delta), &x, NULL, 0, d);
			continue;
		}
		memset(&dx, 0, sizeof dx);
		for (j = 0; j < r->len; j++) {  /* what one copy adds */
			sz = ev[j].sign * event_size(p, &ev[j], b, &pool, &delta);
			dx.what[ev[j].what] += sz;
			dx.states += is_state(ev[j].cat) ? sz : 0;
			dx.tensors += ev[j].cat != MEM_OVERHEAD ? sz : 0;
		}
		save = x;  /* the first copy, then the last (setup's last value wins) */
		for (j = 0; j < r->len; j++)
			total_event(&ev[j], ev[j].sign * event_size(p, &ev[j], b, &pool, &delta), &x, &dx, 0, d);
		x = save;
		for (j = 0; j < r->len; j++)
			total_event(&ev[j], ev[j].sign * event_size(p, &ev[j], b, &pool, &delta), &x, &dx,
				    r->reps - 1, d);
		x = save;
		for (c = 0; c < W_NWHAT; c++)
			x.what[c] += (int64_t)r->reps * dx.what[c];
		x.states += (int64_t)r->reps * dx.states;
		x.tensors += (int64_t)r->reps * dx.tensors;
	}
}

void mem_detail(const struct mem_plan *p, int t, int64_t b, struct mem_detail *d)
{
	int at;

	memset(d, 0, sizeof *d);
	d->op = -1;
	d->peak = scan_peak(p, t, b, -1, &at);
	detail_maxima(p, t, b, d);
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

/* ub lowered to floor((cap - f) / s) where s > 0: the most samples that fit
 * beside f fixed bytes when each takes s (f <= cap). floor(room / s) < ub
 * exactly when room < ub x s, so the division is done only when it lowers ub. */
static inline int64_t bound_at(int64_t ub, int64_t cap, int64_t f, int64_t s)
{
	int64_t c;

	if (s > 0 && (__builtin_mul_overflow(ub, s, &c) || c > cap - f))
		ub = (cap - f) / s;
	return ub;
}

/* bound_at over k = 0 .. last for f + k df fixed and s + k ds per-sample bytes,
 * given that every such f + k df <= cap: bound_at at k = 0 and k = last
 * suffices. The k with s + k ds > 0 are an interval, and over it h(k) =
 * (cap - f - k df) / (s + k ds) is monotone, since h(k + 1) - h(k) has the sign
 * of N = -df s - (cap - f) ds, whatever k. Its least value is at an end of the
 * interval, and that end is 0 or last: if ds > 0 and s <= 0 (the interval
 * starts past 0), N > 0 would need df > 0 and df |s| > (cap - f) ds >=
 * last df ds, so s + last ds < 0 and the interval empty: h falls, its least
 * value at last; if ds < 0 and s > 0 (the interval may end before last),
 * N < 0 would need df s > (cap - f) |ds| >= last df |ds|, so s + last ds > 0
 * and the interval ends at last; otherwise h rises, its least value at 0. */
static inline int64_t bound_copies(int64_t ub, int64_t cap, int64_t f, int64_t s, int64_t df, int64_t ds,
				   int64_t last)
{
	return bound_at(bound_at(ub, cap, f, s), cap, f + last * df, s + last * ds);
}

/* mem_linear_bound: an upper bound, since rounding and pools only add. Read
 * run by run (memrun.h): after event j of copy k of a periodic run the tape
 * holds what it held after event j of the first copy plus k times one copy's
 * sum, in the fixed and in the per-sample bytes, so the fixed bytes are
 * largest at the first or the last copy and bound_copies needs two copies
 * (tests/test_periodic.c checks it against every event). */
int64_t mem_linear_bound(const struct mem_plan *p, int t)
{
	return mem_tape_bound(&p->tape[t], p->capacity);
}

int64_t mem_tape_bound(const struct mem_tape *tp, int64_t cap)
{
	const struct mem_run whole = {0, tp->n, 1, 0}, *runs = tp->nrun > 0 ? tp->run : &whole;
	int64_t ub = (int64_t)1 << 40, f = 0, s = 0, df, ds, last;
	int r, i, nrun = tp->nrun > 0 ? tp->nrun : 1;

	for (r = 0; r < nrun; r++) {
		const struct mem_run *u = &runs[r];
		const struct mem_event *e = tp->ev + u->start;
		for (i = 0, df = 0, ds = 0; i < u->len; i++) {  /* one copy's sums */
			df += e[i].sign * e[i].fixed;
			ds += e[i].sign * e[i].per_sample;
		}
		last = u->reps - 1;
		for (i = 0; i < u->len; i++) {
			f += e[i].sign * e[i].fixed;
			s += e[i].sign * e[i].per_sample;
			if (f > cap || f + last * df > cap)
				return -1;
			ub = bound_copies(ub, cap, f, s, df, ds, last);
		}
		f += last * df;  /* past the run: its last copy's end */
		s += last * ds;
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

/* The packed model's largest b for tape t; ub: mem_linear_bound(p, t). */
static int64_t tape_max(const struct mem_plan *p, int t, int64_t ub)
{
	int64_t hi = ub, lo, step = 1;

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

/* The largest b that the emulated allocator runs without failing, searched
 * from the packed model's answer B (usually within a sample or two of it;
 * never above the linear bound): when B fits, gallop up from it, then bisect;
 * else try B - 1, B - 2, ... down to the first that fits. The emulated fit is
 * not monotone in b (the cache fragments differently at each size: Llama 2
 * 13B under ZeRO-1 with full checkpointing on 8 A100s fits 22, 24, 27 and 29
 * but not 23, 25, 26, 28 or 30), so a bisection below B answered one of its
 * boundaries, depending on the path (22 there); the scan answers the largest
 * that fits at or below B, every b between it and B checked not to fit, as
 * the breakdowns above the answer assume (emu_peak). It also replays less:
 * bench/sweep.ini's tables 19.4 -> 16.4 million replayed events (make bench;
 * one capped replay per b, none without a limit to guess a step from). B is
 * not a proven ceiling: the allocator can hold less than the packed model
 * counts (a segment reused for two requests of different pools: 22 MiB held
 * against 32 MiB, tests/test_alloc.c), which is why a fit at B gallops up;
 * when B does not fit, nothing above it is tried. Of bench/sweep.ini's 752
 * searches that fit at B, none fitted above it (counted once with a
 * temporary counter). */
static int64_t tape_max_emu(const struct mem_plan *p, int t)
{
	int64_t ub = mem_linear_bound(p, t), b = tape_max(p, t, ub), lo, hi, nb, step = 1;

	if (ub < 1)
		return 0;
	b = b < 1 ? 1 : b > ub ? ub : b;
	if (!emu_fits(p, t, b)) {
		for (lo = b - 1; lo >= 1 && !emu_fits(p, t, lo); lo--)
			;
		return lo;  /* 0: nothing fits */
	}
	lo = b;
	hi = ub + 1;  /* past the bound: known not to fit */
	while ((nb = lo + step) <= ub && emu_fits(p, t, nb)) {
		lo = nb;
		step *= 2;
	}
	if (nb <= ub)
		hi = nb;
	return bisect(p, t, lo, hi, emu_fits);
}

/* Mixes 64-bit word w into the digest (h1, h2): two multiply-rotate lanes
 * with different constants, finished in emu_digest. */
static inline void mix(uint64_t *h1, uint64_t *h2, uint64_t w)
{
	*h1 = (*h1 ^ w) * 0x9E3779B97F4A7C15ULL;
	*h1 = (*h1 << 29 | *h1 >> 35);
	*h2 = (*h2 + w) * 0xC2B2AE3D27D4EB4FULL;
	*h2 = (*h2 << 31 | *h2 >> 33) ^ w;
}

/* splitmix64's finaliser: every input bit reaches every output bit. */
static inline uint64_t avalanche(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

/* The digest of what tape t's search reads. A periodic run's copies repeat
 * its first copy's sizes, sign and pool exactly (memrun.h), so the first copy
 * and the number of copies stand for them all. */
static void emu_digest(const struct mem_plan *p, int t, uint64_t *d1, uint64_t *d2)
{
	const struct mem_tape *tp = &p->tape[t];
	const struct mem_event *e;
	uint64_t h1 = 0x243F6A8885A308D3ULL, h2 = 0x13198A2E03707344ULL;
	int r, i;

	mix(&h1, &h2, (uint64_t)p->capacity);
	mix(&h1, &h2, (uint64_t)p->align);
	mix(&h1, &h2, (uint64_t)p->small_max);
	mix(&h1, &h2, (uint64_t)p->small_seg);
	mix(&h1, &h2, (uint64_t)p->split_max);
	mix(&h1, &h2, (uint64_t)p->large_seg);
	mix(&h1, &h2, (uint64_t)p->huge_round);
	mix(&h1, &h2, (uint64_t)p->acfg.max_split);
	mix(&h1, &h2, (uint64_t)p->acfg.expandable);
	mix(&h1, &h2, (uint64_t)(p->acfg.gc_threshold * 1e9));
	mix(&h1, &h2, (uint64_t)p->acfg.allowed);
	mix(&h1, &h2, (uint64_t)tp->outside);
	mix(&h1, &h2, (uint64_t)tp->n);
	for (r = 0; r < tp->nrun; r++) {
		mix(&h1, &h2, (uint64_t)tp->run[r].len << 32 | (uint32_t)tp->run[r].reps);
		for (i = 0; i < tp->run[r].len; i++) {
			e = &tp->ev[tp->run[r].start + i];
			mix(&h1, &h2, (uint64_t)e->fixed);
			mix(&h1, &h2, (uint64_t)e->per_sample);
			mix(&h1, &h2, (uint64_t)(e->sign * 2 + e->pooled));
		}
	}
	*d1 = avalanche(h1);
	*d2 = avalanche(h2 ^ h1);
}

/* tape_max_emu through the searches remembered (struct emu_memo). */
static int64_t tape_max_known(const struct mem_plan *p, int t)
{
	struct mem_emu *m = p->emu;
	int hit;
	struct emu_memo id, *x = emu_recall(p, t, &m->known, 0, &id, &hit);
	int64_t max;

	m->k.searches++;
	if (hit) {
		m->k.remembered++;
		return x->value;
	}
	max = tape_max_emu(p, t);
	if (x)
		emu_keep(p, m->known, x, &id, max, -1);
	return max;
}

void mem_emu_counts(const struct mem_plan *p, struct mem_emu_counts *k)
{
	if (p->emu)
		*k = p->emu->k;
	else
		memset(k, 0, sizeof *k);
}

int64_t mem_max_batch(const struct mem_plan *p, int *binding)
{
	int64_t best = -1, b;
	int t;

	*binding = 0;
	for (t = 0; p->unfit && t < p->ntapes; t++)
		if (p->tape[t].cut) {  /* its events so far bound it below one sample: so is the whole tape */
			*binding = t;
			return 0;
		}
	for (t = 0; t < p->ntapes; t++) {
		b = p->emulate ? (p->emu->max[t] = tape_max_known(p, t)) : tape_max(p, t, mem_linear_bound(p, t));
		if (best < 0 || b < best) {
			best = b;
			*binding = t;
		}
	}
	return best < 0 ? 0 : best;
}

/* ---- building ------------------------------------------------------------------- */

int mem_plan_build(struct mem_plan *p, const struct scenario *s, const struct graph *g,
		   const struct fw_profile *pf, struct err *e)
{
	memset(p, 0, sizeof *p);
	return mem_plan_rebuild(p, s, g, pf, e);
}

/* Tape t emptied for a new build, from old (what the last build left): its
 * arrays kept, the events built last moved aside with the count of their runs
 * (memrun_again) and the spare array to be filled; what one build sets (the
 * events, the runs, the GPU it stands for, its outside bytes) reset. */
static void tape_reuse(struct mem_tape *t, const struct mem_tape *old)
{
	*t = *old;
	t->ev = old->pev;
	t->cap = old->pcap;
	t->pev = old->ev;
	t->pcap = old->cap;
	t->pn = old->n;
	t->pnrun = old->nrun;
	t->n = t->nrun = t->gpu = t->cut = 0;
	t->outside = t->outside_now = 0;
}

/* The emulation's scratch of plan p, made if p has none, for new tapes:
 * nothing remembered of the last ones but what the digests stand for (struct
 * emu_memo). Returns 0 or -1 (out of memory). */
static int emu_new_tapes(struct mem_plan *p)
{
	struct mem_emu *m;
	int i;

	if (!p->emu && !(p->emu = calloc(1, sizeof *p->emu)))
		return -1;
	m = p->emu;
	for (i = 0; i < 2 * EMU_MEMO; i++)
		m->memo_b[i / EMU_MEMO][i % EMU_MEMO] = -1;
	m->max[0] = m->max[1] = -1;
	m->cls[0].k = m->cls[1].k = -1;
	return 0;
}

int mem_plan_rebuild(struct mem_plan *p, const struct scenario *s, const struct graph *g,
		     const struct fw_profile *pf, struct err *e)
{
	const struct scn_training *t = &s->s.training;
	struct mem_tape keep[2];
	struct mem_scripts *scripts = p->scripts;
	struct mem_emu *emu = p->emu;
	double host = 0, h2 = 0;
	int rc, i, stop_unfit = p->stop_unfit;
	unsigned flags = stop_unfit ? MEMWALK_STOP_UNFIT : 0;

	memcpy(keep, p->tape, sizeof keep);
	memset(p, 0, sizeof *p);
	p->scripts = scripts;
	p->emu = emu;
	p->stop_unfit = stop_unfit;
	for (i = 0; i < 2; i++)
		tape_reuse(&p->tape[i], &keep[i]);
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
		if (emu_new_tapes(p))
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory building the memory timeline");
	}
	p->batch_mult = s->dp * t->grad_accum;
	if (s->plan.mech == MECH_DP && s->world > 1) {
		p->ntapes = 2;
		rc = memwalk_build(&p->tape[0], ROLE_DP_MASTER, s, g, pf, flags, &host, p->scripts, e);
		if (!rc && !p->tape[0].cut)
			rc = memwalk_build(&p->tape[1], ROLE_DP_REPLICA, s, g, pf, flags, &h2, p->scripts, e);
		p->tape[1].gpu = 1;
	} else {
		p->ntapes = 1;
		rc = memwalk_build(&p->tape[0], ROLE_RANK, s, g, pf, flags, &host, p->scripts, e);
	}
	p->host = host;
	p->unfit = p->tape[0].cut || p->tape[1].cut;
	for (i = 0; !rc && !p->unfit && i < p->ntapes; i++) {
		if (memrun_again(&p->tape[i], g))
			rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory building the memory timeline");
	}
	return rc;
}

/* The fields of tape from, besides its arrays, that a build sets and
 * tape_reuse resets: its sizes, GPU, bytes outside the allocator, the op
 * shifts its runs were found with, whether it was cut. */
static void built_fields(struct mem_tape *to, const struct mem_tape *from)
{
	to->n = from->n;
	to->nrun = from->nrun;
	to->gpu = from->gpu;
	to->outside = from->outside;
	memcpy(to->dop, from->dop, sizeof to->dop);
	to->ndop = from->ndop;
	to->gnops = from->gnops;
	to->cut = from->cut;
}

int mem_plan_keep(const struct mem_plan *p, struct mem_kept *k)
{
	const struct mem_tape *tp;
	const struct mem_run *r;
	int t, i, n, at;

	memset(k, 0, sizeof *k);
	if (p->unfit)
		return -1;
	k->p = *p;
	k->p.scripts = NULL;
	k->p.emu = NULL;
	for (t = 0; t < 2; t++) {
		tp = &p->tape[t];
		for (n = at = i = 0; i < tp->nrun; i++) {
			r = &tp->run[i];
			if (r->start != at)  /* the runs cover the events in order (memrun.h) */
				break;
			n += r->len;
			at += r->len * r->reps;
		}
		if (at != tp->n || (tp->n > 0 && tp->nrun == 0) ||
		    (n && !(k->ev[t] = malloc((size_t)n * sizeof *k->ev[t]))) ||
		    (tp->nrun && !(k->run[t] = malloc((size_t)tp->nrun * sizeof *k->run[t])))) {
			mem_kept_free(k);
			return -1;
		}
		for (n = i = 0; i < tp->nrun; i++) {
			r = &tp->run[i];
			memcpy(k->ev[t] + n, tp->ev + r->start, (size_t)r->len * sizeof *tp->ev);
			n += r->len;
		}
		if (tp->nrun)
			memcpy(k->run[t], tp->run, (size_t)tp->nrun * sizeof *tp->run);
		k->bytes += (size_t)n * sizeof *tp->ev + (size_t)tp->nrun * sizeof *tp->run;
		memset(&k->p.tape[t], 0, sizeof k->p.tape[t]);
		built_fields(&k->p.tape[t], tp);
	}
	return 0;
}

/* Tape t, emptied by tape_reuse, as kept in k (its events, runs and
 * built_fields). Returns 0 or -1 (out of memory). */
static int kept_tape(struct mem_tape *t, const struct mem_kept *k, int ti)
{
	const struct mem_tape *kt = &k->p.tape[ti];
	const struct mem_event *src = k->ev[ti];
	struct mem_event *dst;
	int i, c, j;

	if (vec_grow((void **)&t->ev, &t->cap, kt->n, sizeof *t->ev) ||
	    vec_grow((void **)&t->run, &t->caprun, kt->nrun, sizeof *t->run))
		return -1;
	for (i = 0; i < kt->nrun; i++) {
		const struct mem_run *r = &k->run[ti][i];
		dst = t->ev + r->start;
		memcpy(dst, src, (size_t)r->len * sizeof *dst);
		for (c = 1; c < r->reps; c++) {  /* copy c: the first with its ops moved by c x dop */
			dst += r->len;
			memcpy(dst, src, (size_t)r->len * sizeof *dst);
			for (j = 0; j < r->len; j++)
				if (dst[j].op >= 0)
					dst[j].op += c * r->dop;
		}
		src += r->len;
		t->run[i] = *r;
	}
	built_fields(t, kt);
	return 0;
}

int mem_plan_restore(struct mem_plan *p, const struct mem_kept *k)
{
	struct mem_tape keep[2];
	struct mem_scripts *scripts = p->scripts;
	struct mem_emu *emu = p->emu;
	int i, stop_unfit = p->stop_unfit;

	memcpy(keep, p->tape, sizeof keep);
	*p = k->p;
	p->scripts = scripts;
	p->emu = emu;
	p->stop_unfit = stop_unfit;
	for (i = 0; i < 2; i++)
		tape_reuse(&p->tape[i], &keep[i]);
	if (p->emulate && emu_new_tapes(p)) {
		p->ntapes = 0;
		return -1;
	}
	for (i = 0; i < 2; i++)
		if (kept_tape(&p->tape[i], k, i)) {
			p->tape[0].n = p->tape[1].n = p->tape[0].nrun = p->tape[1].nrun = 0;
			p->ntapes = 0;
			return -1;
		}
	return 0;
}

void mem_kept_free(struct mem_kept *k)
{
	free(k->ev[0]);
	free(k->ev[1]);
	free(k->run[0]);
	free(k->run[1]);
	memset(k, 0, sizeof *k);
}

void mem_plan_free(struct mem_plan *p)
{
	int i;

	for (i = 0; i < 2; i++) {
		free(p->tape[i].ev);
		free(p->tape[i].pev);
		memrun_free(&p->tape[i]);
	}
	if (p->emu) {
		alloc_release(&p->emu->a);
		for (i = 0; i < 2; i++) {
			free(p->emu->cls[i].of);
			free(p->emu->cls[i].fixed);
			free(p->emu->cls[i].ps);
		}
		free(p->emu->k1);
		free(p->emu->k2);
		free(p->emu->val);
		free(p->emu->gen);
		free(p->emu->rep);
		free(p->emu->top);
		free(p->emu->depth);
		emu_period_free(&p->emu->per);
		free(p->emu->below);
		if (p->emu->known)
			free(p->emu->known->e);
		if (p->emu->seen)
			free(p->emu->seen->e);
		free(p->emu->known);
		free(p->emu->seen);
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
	int64_t most;
	const char *what;
	char name[GRAPH_NAME];

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
	r->fits = mem_fits(d->peak, p->capacity);
	r->binding_gpu = p->tape[t].gpu;
	r->host = p->host;
	for (w = 1; w < W_NWHAT; w++)
		if (d->what[w] > d->what[best])
			best = w;
	/* the caching allocator's free cached blocks can be the largest part of a
	 * reserved peak (a segment mapped in the optimizer step while backward's
	 * blocks sit free): then they bind, not the largest tensor label */
	most = d->slack > d->what[best] ? d->slack : d->what[best];
	what = d->slack > d->what[best] ? "free blocks cached by the allocator" : mem_what_name(best);
	snprintf(r->binding, sizeof r->binding, "GPU %d: %s (%.0f%% of the peak), %s%s%s",
		 r->binding_gpu, what, d->peak > 0 ? 100.0 * (double)most / (double)d->peak : 0.0,
		 mem_phase_name(d->phase), d->op >= 0 ? " " : "", d->op >= 0 ? graph_op_name(g, d->op, name) : "");
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
	struct pools q = {{0}};
	int64_t live[MEM_NCAT] = {0}, sz, total = 0;
	int i, c;
	char name[GRAPH_NAME];

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
			e->op >= 0 ? graph_op_name(g, e->op, name) : "", mem_what_name(e->what),
			e->sign > 0 ? "alloc" : "free", (long long)sz);
		for (c = 0; c < MEM_NCAT; c++)
			fprintf(f, ",%lld", (long long)live[c]);
		fprintf(f, ",%lld,%lld\n", (long long)total, (long long)reserved(p, q.v));
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
