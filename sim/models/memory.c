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
 * through it at each micro-batch the search tries, searches and peaks are
 * remembered by a digest of what they read, and a periodic run's copies whose
 * allocator state repeats are made at once instead of replayed (emu_skip).
 */
#include "memory.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- the caching allocator, emulated ---------------------------------------------- */

/* The emulation's scratch: the allocator, and its live blocks by request size
 * (a free releases the latest live block of its size).
 *
 * A request's size is fixed + b x per_sample: the tape's pooled events fall in
 * classes of equal (fixed, per_sample), found once per tape. At a given b two
 * classes may have the same size (fixed1 + b ps1 = fixed2 + b ps2), so each
 * replay maps every class to a representative, the first class of its size
 * at that b: live blocks stacked per representative are then exactly the live
 * blocks stacked per size, and an event needs no hashing of its own. */
struct mem_classes {
	int *of;               /* (n) per event: its class, -1 outside the allocator; an
				  alloc the next event frees (that event of its class): -2 - class */
	int64_t *fixed, *ps;   /* (k) per class: bytes, bytes per sample */
	int k;                 /* classes; -1 not found yet for the tape */
	int end;               /* 1 + the last alloc event: a replay stops there (only frees
				  follow, which change neither its peak nor whether it fits) */
	int capn, capk;
};

/* Where a replay stands: its next event, the bytes outside the allocator,
 * and its peak so far (emu_take). */
struct emu_pos {
	int i, at;
	int64_t outside, peak, best_alloc;
};

#define EMU_MEMO 8

/* A segment made during the period emu_skip reads: with reserved bytes r
 * above the period's start before it, of seg bytes. */
struct emu_made {
	int64_t r, seg;
};

/* A part of the allocator a period changed: free block i of its start
 * (segment 0), or a segment it made (segment 1, of pool small), cut into
 * pieces first .. first + n - 1 (emu_period). */
struct emu_region {
	int segment, i, small, first, n;
	int64_t end;           /* the address past its last piece */
};

/* A free block as emu_skip compares them. */
struct emu_free {
	int64_t addr, size;
	int small, whole;
};

/* A block the period pushed on its size's stack (rep), and whether it is
 * still there at the period's end. */
struct emu_push {
	int rep, h, live;
};

/* emu_skip's scratch, kept between replays. */
struct emu_period {
	struct emu_free *fb0;  /* (capf) the free blocks at the period's start: in the pools'
				  (size, address) order, then in address order (emu_skip) */
	int capf;
	int *free1;            /* (capf1) those at its end */
	int capf1;
	struct emu_made *made; /* (capmade) */
	int nmade, capmade;
	struct emu_push *push; /* (cappush) */
	int npush, cappush;
	/* what the period left: per region (a free block of its start, or a
	 * segment it made) its pieces, and per block it pushed the piece */
	struct emu_region *reg; /* (capreg) */
	int nreg, capreg;
	int64_t *psize;        /* (capp) per piece: bytes */
	int8_t *pused;         /* (capp) allocated */
	int *ph;               /* (capp) its handle: at the period's end, then as made */
	int np, capp;
	int *pof;              /* (cappof) per push: its piece, -1 popped */
	int cappof;
	int *cur;              /* (capcur) per free block of the start: its region (emu_layout);
				  then the free blocks a period made at once starts from */
	int *next;             /* (capcur) those it leaves */
	int *rof;              /* (capcur) per free block of the start: its region, -1 none */
	int capcur;
	int *sego;             /* (capreg) the segment regions in address order */
	int nseg, capsego;
};

struct mem_emu {
	struct alloc a;
	struct mem_classes cls[2];  /* per tape */
	/* an open-addressing table: (k1, k2) -> val, the slots of older
	 * generations empty */
	int64_t *k1, *k2;      /* (cap) */
	int *val;              /* (cap) */
	uint32_t *gen;         /* (cap) the use that set the slot (older: empty) */
	uint32_t cur;          /* this use */
	int cap;
	int *rep;              /* (capk) per class: its representative at this b */
	int *top;              /* (capk) per representative: its size's latest live block, -1 none */
	int *depth;            /* (capk) per representative: emu_closed's stack depth */
	int capk;
	struct emu_period per; /* emu_skip's scratch */
	int *below;            /* (capb) per block handle: the next live block of its size */
	int capb;
	int nomem;             /* the host ran out of memory */
	/* the last EMU_MEMO replays that ran through at the capacity, per tape
	 * (a replay is a function of its tape and b): a sweep asks for the
	 * breakdown at micro-batches its search checked (7 % of the replays of
	 * bench/sweep.ini were repeats) */
	int64_t memo_b[2][EMU_MEMO], memo_peak[2][EMU_MEMO];  /* b -1: empty */
	int memo_at[2][EMU_MEMO];
	int memo_next[2];      /* the entry the next replay takes */
	int64_t max[2];        /* the search's answer per tape, -1 not searched */
	struct emu_memos *known; /* searches done, by what they read; NULL none yet */
	struct emu_memos *seen;  /* peaks found, by what they read; NULL none yet */
	struct mem_emu_counts k; /* what it has done */
};

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

/* *v, of have elements of size sz, with room for n. Returns 0 or -1 (*v kept). */
static int emu_grow(void **v, int have, int n, size_t sz)
{
	void *nv;

	if (n <= have)
		return 0;
	nv = realloc(*v, (size_t)n * sz);
	if (!nv)
		return -1;
	*v = nv;
	return 0;
}

/* A table of room for n keys, emptied (a new generation). Returns 0 or -1. */
static int emu_table(struct mem_emu *m, int n)
{
	int cap = 64;

	while (cap < 2 * n)
		cap *= 2;
	if (cap > m->cap) {
		if (emu_grow((void **)&m->k1, m->cap, cap, sizeof *m->k1) ||
		    emu_grow((void **)&m->k2, m->cap, cap, sizeof *m->k2) ||
		    emu_grow((void **)&m->val, m->cap, cap, sizeof *m->val) ||
		    emu_grow((void **)&m->gen, m->cap, cap, sizeof *m->gen))
			return -1;
		memset(m->gen, 0, (size_t)cap * sizeof *m->gen);
		m->cap = cap;
		m->cur = 0;
	}
	if (++m->cur == 0) {  /* wrapped: every slot emptied for real */
		memset(m->gen, 0, (size_t)m->cap * sizeof *m->gen);
		m->cur = 1;
	}
	return 0;
}

/* The value of key (k1, k2), set to v when the key is new. */
static int emu_find(struct mem_emu *m, int64_t k1, int64_t k2, int v)
{
	uint64_t x = (uint64_t)k1 * 0x9E3779B97F4A7C15ULL ^ (uint64_t)k2 * 0xC2B2AE3D27D4EB4FULL;
	int i = (int)(x >> 40) & (m->cap - 1);

	while (m->gen[i] == m->cur && (m->k1[i] != k1 || m->k2[i] != k2))
		i = (i + 1) & (m->cap - 1);
	if (m->gen[i] != m->cur) {
		m->gen[i] = m->cur;
		m->k1[i] = k1;
		m->k2[i] = k2;
		m->val[i] = v;
	}
	return m->val[i];
}

/* The class of pooled event e (a new one when its sizes are new), or -1. */
static int emu_class(struct mem_emu *m, struct mem_classes *c, const struct mem_event *e)
{
	int k = emu_find(m, e->fixed, e->per_sample, c->k);

	if (k == c->k && k == c->capk) {  /* a new class, and no room */
		if (emu_grow((void **)&c->fixed, c->capk, 2 * k + 16, sizeof *c->fixed) ||
		    emu_grow((void **)&c->ps, c->capk, 2 * k + 16, sizeof *c->ps))
			return -1;
		c->capk = 2 * k + 16;
	}
	if (k == c->k) {  /* a new class */
		c->fixed[k] = e->fixed;
		c->ps[k] = e->per_sample;
		c->k++;
	}
	return k;
}

/* Whether event i is an alloc that event i + 1, a free of its class, undoes
 * (of: the classes, not yet marked at i + 1). */
static inline int undone(const struct mem_tape *tp, const int *of, int i)
{
	return i + 1 < tp->n && of[i] >= 0 && tp->ev[i].sign > 0 && tp->ev[i + 1].sign < 0 && of[i + 1] == of[i];
}

/* The classes of tape tp's pooled events into c (an alloc the next event
 * undoes marked), and where its last alloc is. A periodic run's later copies
 * repeat its first copy's sizes, signs and pools (memrun.h): their classes
 * and marks are the first copy's, but for the last event of the last copy,
 * followed by the next run's first. Returns 0 or -1. */
static int emu_classes(struct mem_emu *m, const struct mem_tape *tp, struct mem_classes *c)
{
	const struct mem_run *r;
	int i, k, j, s, last, firsts = 0;

	for (j = 0; j < tp->nrun; j++)  /* the events classed one by one: each run's first copy */
		firsts += tp->run[j].len;
	if (emu_table(m, firsts) || emu_grow((void **)&c->of, c->capn, tp->n, sizeof *c->of))
		return -1;
	c->capn = c->capn > tp->n ? c->capn : tp->n;
	c->k = 0;
	for (j = 0; j < tp->nrun; j++) {  /* classes */
		r = &tp->run[j];
		for (i = r->start; i < r->start + r->len; i++)
			if (!tp->ev[i].pooled)
				c->of[i] = -1;
			else if ((c->of[i] = emu_class(m, c, &tp->ev[i])) < 0)
				return -1;
		for (k = 1; k < r->reps; k++)
			memcpy(c->of + r->start + k * r->len, c->of + r->start, (size_t)r->len * sizeof *c->of);
	}
	for (j = 0; j < tp->nrun; j++) {  /* marks, from the first copy */
		r = &tp->run[j];
		s = r->start;
		last = s + r->len * r->reps - 1;
		for (i = s; i < s + r->len; i++)
			if (undone(tp, c->of, i))
				c->of[i] = -2 - c->of[i];
		for (k = 1; k < r->reps; k++) {
			memcpy(c->of + s + k * r->len, c->of + s, (size_t)(r->len - 1) * sizeof *c->of);
			i = s + (k + 1) * r->len - 1;  /* the copy's last: as copy 0's, or before the next run */
			c->of[i] = c->of[s + r->len - 1] <= -2 ? -2 - c->of[s + r->len - 1] : c->of[s + r->len - 1];
			if (i < last ? c->of[s + r->len - 1] <= -2 : undone(tp, c->of, i))
				c->of[i] = -2 - c->of[i];
		}
	}
	for (c->end = tp->n; c->end > 0 && tp->ev[c->end - 1].sign <= 0; c->end--)
		;
	return 0;
}

/* Ready to replay tape t at b: its classes, each mapped to its size's
 * representative, no live block. Returns 0 or -1. */
static int emu_prepare(struct mem_emu *m, const struct mem_tape *tp, int t, int64_t b)
{
	struct mem_classes *c = &m->cls[t];
	int i;

	if (c->k < 0 && emu_classes(m, tp, c))
		return -1;
	if (emu_grow((void **)&m->rep, m->capk, c->k, sizeof *m->rep) ||
	    emu_grow((void **)&m->top, m->capk, c->k, sizeof *m->top) ||
	    emu_grow((void **)&m->depth, m->capk, c->k, sizeof *m->depth))
		return -1;
	m->capk = m->capk > c->k ? m->capk : c->k;
	if (emu_table(m, c->k))
		return -1;
	for (i = 0; i < c->k; i++) {
		m->rep[i] = emu_find(m, c->fixed[i] + b * c->ps[i], 0, i);
		m->top[i] = -1;
	}
	return 0;
}

/* Room in m->below for block handle h. Returns 0 or -1. */
static int emu_below(struct mem_emu *m, int h)
{
	int n = 2 * h + 64;

	if (emu_grow((void **)&m->below, m->capb, n, sizeof *m->below))
		return -1;
	m->capb = n;
	return 0;
}

/* Takes the state after an alloc event i into the replay's peak: the most
 * held (cur), at the event where it first held that with the most allocated. */
static inline void emu_take(int64_t cur, int64_t allocated, int i, int64_t *peak, int64_t *best_alloc, int *at)
{
	if (cur > *peak || (cur == *peak && allocated > *best_alloc)) {
		*peak = cur;
		*best_alloc = allocated;
		*at = i;
	}
}

#define EMU_UNLIMITED ((int64_t)1 << 60)

/* Runs the replay of tape t at b on from q (m->a, m->top, m->below as it left
 * them) to event stop (exclusive; at most its last alloc); an alloc the next
 * event undoes (mem_classes.of) goes through alloc_probe when the cache serves
 * it, the pair taken at once. Returns 0, ALLOC_EOOM or ALLOC_ESYS. */
static int emu_loop(const struct mem_plan *p, int t, int64_t b, struct emu_pos *q, int stop)
{
	const struct mem_tape *tp = &p->tape[t];
	struct mem_emu *m = p->emu;
	const int *cls = m->cls[t].of, *rep = m->rep;
	int *top = m->top;
	int64_t outside = q->outside, sz, pk = q->peak, best_alloc = q->best_alloc, handed;
	int i, h, k, r, pat = q->at, rc = 0;

	if (stop > m->cls[t].end)
		stop = m->cls[t].end;
	for (i = q->i; i < stop; i++) {
		const struct mem_event *e = &tp->ev[i];
		sz = e->fixed + b * e->per_sample;
		if (!e->pooled) {
			outside += e->sign * sz;
			if (e->sign > 0)
				emu_take(m->a.reserved + outside, m->a.allocated, i, &pk, &best_alloc, &pat);
		} else if (e->sign > 0) {
			if ((k = cls[i]) <= -2) {  /* freed by the next event */
				if (alloc_probe(&m->a, sz, &handed)) {  /* from the cache: nothing changes */
					m->k.probed++;
					emu_take(m->a.reserved + outside, m->a.allocated + handed, i, &pk, &best_alloc,
						 &pat);
					i++;
					continue;
				}
				k = -2 - k;
			}
			h = alloc_malloc(&m->a, sz);
			if (h < 0 || (h >= m->capb && emu_below(m, h))) {
				rc = h < 0 ? h : ALLOC_ESYS;
				break;
			}
			r = rep[k];  /* on its size's stack */
			m->below[h] = top[r];
			top[r] = h;
			emu_take(m->a.reserved + outside, m->a.allocated, i, &pk, &best_alloc, &pat);
		} else if ((h = top[r = rep[cls[i]]]) >= 0) {
			top[r] = m->below[h];
			alloc_free(&m->a, h);
		}
	}
	m->k.events += i - q->i;
	*q = (struct emu_pos){i, pat, outside, pk, best_alloc};
	return rc;
}

/* ---- periodic runs: the allocator's copies extended --------------------------------- */

/* emu_skip reads the counts at 2 SKIP_MAXP + 1 copy starts after SKIP_WARM
 * copies, then one period, and makes periods only when two whole ones are
 * left after it: a run of fewer than SKIP_REPS copies (2 + 8 + 1 + 2 for the
 * shortest period) never gains, and is not tried. SKIP_MAXP is the step
 * model's longest period (STEP_BLOCK_MAXP); the bench scenario's forward has
 * 4 (four checkpointed inputs fill a segment). */
#define SKIP_REPS 16           /* copies a run needs for emu_skip to be tried */
#define SKIP_WARM 2            /* copies replayed before the allocator's counts are read */
#define SKIP_MAXP 4            /* longest period looked for, in copies */

/* Whether every block live at the start of a copy of run r stays allocated
 * to the run's end at b: in one copy, no size's stack of live blocks goes
 * below where it started (each free releases a block of the same copy). */
static int emu_closed(const struct mem_plan *p, int t, const struct mem_run *r)
{
	struct mem_emu *m = p->emu;
	const struct mem_tape *tp = &p->tape[t];
	const int *of = m->cls[t].of;
	int i, k, ok = 1;

	for (i = r->start; i < r->start + r->len; i++)
		if ((k = of[i]) != -1)
			m->depth[m->rep[k <= -2 ? -2 - k : k]] = 0;
	for (i = r->start; i < r->start + r->len && ok; i++) {
		if ((k = of[i]) == -1)
			continue;
		k = m->rep[k <= -2 ? -2 - k : k];
		m->depth[k] += tp->ev[i].sign;
		ok = m->depth[k] >= 0;
	}
	return ok;
}

/* The allocator's counts at a copy boundary (emu_skip). */
struct emu_counts {
	int64_t reserved, allocated, segments, nfree;
};

static struct emu_counts emu_counts_of(const struct alloc *a)
{
	return (struct emu_counts){a->reserved, a->allocated, a->segments, a->free_[0].count + a->free_[1].count};
}

/* Room for n more in *v of *cap elements of sz. Returns 0 or -1. */
static int emu_room(void **v, int *cap, int n, size_t sz)
{
	if (n <= *cap)
		return 0;
	if (emu_grow(v, *cap, n, sz))
		return -1;
	*cap = n;
	return 0;
}

/* The free blocks of a into x->fb0 in the pools' (size, address) order (no
 * sort: alloc_free_blocks by size). Returns their count or -1. */
static int emu_free_read(struct alloc *a, struct emu_period *x)
{
	int n = a->free_[0].count + a->free_[1].count, i, h;

	if (emu_room((void **)&x->fb0, &x->capf, n + 1, sizeof *x->fb0) ||
	    emu_room((void **)&x->free1, &x->capf1, n + 1, sizeof *x->free1) ||
	    alloc_free_blocks(a, x->free1, n, 0) != n)
		return -1;
	for (i = 0; i < n; i++) {
		h = x->free1[i];
		x->fb0[i] = (struct emu_free){a->b[h].addr, a->b[h].size, a->b[h].small,
			a->b[h].prev < 0 && a->b[h].next < 0};
	}
	return n;
}

static int by_addr(const void *u, const void *v)
{
	const struct emu_free *x = u, *y = v;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Replays one period of P copies of run r from q (at copy c's start), event by
 * event, into m->per: the segments it makes (emu_made) and the blocks it
 * pushes (emu_push). Returns 0, -1 when the period is not a clean one (the
 * limit reached in it, the bytes outside the allocator moved, a pair across
 * its end), or ALLOC_EOOM / ALLOC_ESYS from the replay (rc). */
static int emu_period_read(const struct mem_plan *p, int t, int64_t b, const struct mem_run *r, int c, int P,
			   struct emu_pos *q, int *rc)
{
	struct mem_emu *m = p->emu;
	struct emu_period *x = &m->per;
	struct alloc *a = &m->a;
	const struct mem_tape *tp = &p->tape[t];
	const int *of = m->cls[t].of;
	int first = r->start + c * r->len, end = first + P * r->len, i, k, rep, pop, j;
	int64_t R0 = a->reserved, retries = a->retries, out0 = q->outside;

	x->nmade = x->npush = 0;
	*rc = 0;
	while ((i = q->i) < end) {
		int64_t before = a->reserved, segs = a->segments;
		k = of[i];
		rep = k == -1 ? -1 : m->rep[k <= -2 ? -2 - k : k];
		pop = rep >= 0 && tp->ev[i].sign < 0 ? m->top[rep] : -1;
		if ((*rc = emu_loop(p, t, b, q, i + 1)))
			return -1;
		if (a->retries != retries)
			return -1;
		if (a->segments != segs) {
			if (emu_room((void **)&x->made, &x->capmade, x->nmade + 1, sizeof *x->made))
				return *rc = ALLOC_ESYS, -1;
			x->made[x->nmade++] = (struct emu_made){before - R0, a->reserved - before};
		}
		if (q->i != i + 1 || rep < 0)  /* a pair the cache served, or outside the allocator */
			continue;
		if (tp->ev[i].sign > 0) {
			if (emu_room((void **)&x->push, &x->cappush, x->npush + 1, sizeof *x->push))
				return *rc = ALLOC_ESYS, -1;
			x->push[x->npush++] = (struct emu_push){rep, m->top[rep], 1};
		} else if (pop >= 0) {
			for (j = x->npush - 1; j >= 0 && !(x->push[j].live && x->push[j].h == pop); j--)
				;
			if (j < 0)
				return -1;  /* a block from before the period: not closed */
			x->push[j].live = 0;
		}
	}
	return q->i == end && q->outside == out0 ? 0 : -1;
}

/* Room for n pieces in x. Returns 0 or -1. */
static int emu_pieces_room(struct emu_period *x, int n)
{
	if (n <= x->capp)
		return 0;
	if (emu_grow((void **)&x->psize, x->capp, n, sizeof *x->psize) ||
	    emu_grow((void **)&x->pused, x->capp, n, sizeof *x->pused) ||
	    emu_grow((void **)&x->ph, x->capp, n, sizeof *x->ph))
		return -1;
	x->capp = n;
	return 0;
}

/* Adds region (segment, i, small) to x: the blocks of a segment's chain
 * from h on while below hi (segment: to the segment's end). Returns 0, 1
 * when they do not fill lo .. hi - 1 exactly, or -1 (host memory). */
static int emu_region_add(struct alloc *a, struct emu_period *x, int segment, int i, int h, int64_t lo,
			  int64_t hi)
{
	int64_t end = lo;
	int first = x->np;

	while (a->b[h].prev >= 0 && a->b[a->b[h].prev].addr >= lo)  /* back to the region's first block */
		h = a->b[h].prev;
	if (a->b[h].addr != lo)
		return 1;
	for (; h >= 0 && (segment || a->b[h].addr < hi); h = a->b[h].next) {
		if (emu_pieces_room(x, x->np + 1))
			return -1;
		x->psize[x->np] = a->b[h].size;
		x->pused[x->np] = a->b[h].allocated;
		x->ph[x->np++] = h;
		end = a->b[h].addr + a->b[h].size;
	}
	if (!segment && end != hi)
		return 1;
	if (emu_room((void **)&x->reg, &x->capreg, x->nreg + 1, sizeof *x->reg))
		return -1;
	x->reg[x->nreg++] = (struct emu_region){segment, i, a->b[x->ph[first]].small, first, x->np - first, end};
	return 0;
}

/* The segment made that holds block h as a region of x (once; x->sego kept
 * in address order), its bytes added to *made. Returns 0, 1 or -1 as
 * emu_region_add. */
static int emu_segment_add(struct alloc *a, struct emu_period *x, int h, int64_t *made)
{
	int k, i, rc;

	while (a->b[h].prev >= 0)
		h = a->b[h].prev;
	for (k = 0; k < x->nseg && x->ph[x->reg[x->sego[k]].first] != h; k++)
		;
	if (k < x->nseg)
		return 0;
	k = x->nreg;
	if ((rc = emu_region_add(a, x, 1, -1, h, a->b[h].addr, 0)))
		return rc;
	*made += x->reg[k].end - a->b[h].addr;
	if (emu_room((void **)&x->sego, &x->capsego, x->nseg + 1, sizeof *x->sego))
		return -1;
	for (i = x->nseg++; i > 0 && a->b[x->ph[x->reg[x->sego[i - 1]].first]].addr > a->b[h].addr; i--)
		x->sego[i] = x->sego[i - 1];  /* in address order */
	x->sego[i] = k;
	return 0;
}

/* The pieces the period left (x->reg, psize, pused, ph) in the n free blocks
 * of its start (fb0, in address order) and in the segments it made (at
 * A0 and above), found from the blocks it left pushed (each allocated piece
 * is one: a free block of its start bounded by blocks that stay allocated,
 * its pieces lie between them), and the piece of each (pof); the free
 * blocks at its end (free1) must be the free pieces in address order.
 * Returns 0, 1 when they are not (no extension), or -1 (host memory). */
static int emu_layout(struct alloc *a, struct emu_period *x, int n, int64_t A0)
{
	int i, j, k, lo, hi, mid, used = 0, live = 0, rc;
	int64_t made = 0, addr;

	x->nreg = x->np = x->nseg = 0;
	if (emu_room((void **)&x->pof, &x->cappof, x->npush + 1, sizeof *x->pof))
		return -1;
	if (n + 1 > x->capcur) {
		if (emu_grow((void **)&x->cur, x->capcur, n + 1, sizeof *x->cur) ||
		    emu_grow((void **)&x->next, x->capcur, n + 1, sizeof *x->next) ||
		    emu_grow((void **)&x->rof, x->capcur, n + 1, sizeof *x->rof))
			return -1;
		x->capcur = n + 1;
	}
	for (i = 0; i < n; i++)
		x->rof[i] = -1;
	for (j = 0; j < x->npush; j++) {
		x->pof[j] = -1;
		if (!x->push[j].live)
			continue;
		live++;
		addr = a->b[x->push[j].h].addr;
		if (addr >= A0) {  /* in a segment made */
			if ((rc = emu_segment_add(a, x, x->push[j].h, &made)))
				return rc;
			continue;
		}
		for (lo = 0, hi = n; lo < hi;) {  /* the free block of the start it was cut from */
			mid = (lo + hi) / 2;
			if (x->fb0[mid].addr <= addr)
				lo = mid + 1;
			else
				hi = mid;
		}
		i = lo - 1;
		if (i < 0 || addr >= x->fb0[i].addr + x->fb0[i].size)
			return 1;  /* not cut from a free block of the start */
		if (x->rof[i] < 0) {
			x->rof[i] = x->nreg;
			if ((rc = emu_region_add(a, x, 0, i, x->push[j].h, x->fb0[i].addr,
						 x->fb0[i].addr + x->fb0[i].size)))
				return rc;
		}
	}
	for (k = 0; k < n; k++)  /* the segments made that it left free */
		if (a->b[x->free1[k]].addr >= A0 && (rc = emu_segment_add(a, x, x->free1[k], &made)))
			return rc;
	if (made != a->next_addr - A0)
		return 1;
	for (j = 0; j < x->npush; j++) {  /* each block pushed is a piece */
		if (!x->push[j].live)
			continue;
		for (k = 0; k < x->np && !(x->pused[k] && x->ph[k] == x->push[j].h); k++)
			;
		x->pof[j] = k;
	}
	for (k = 0; k < x->np; k++)
		used += x->pused[k];
	if (used != live)
		return 1;
	/* the free list at the end: per free block of the start its free
	 * pieces (or itself), then the segments' free pieces */
	for (i = 0, k = 0; i < n; i++) {
		if (x->rof[i] < 0) {
			if (k >= n || a->b[x->free1[k]].addr != x->fb0[i].addr)
				return 1;
			k++;
			continue;
		}
		{
			const struct emu_region *g = &x->reg[x->rof[i]];
			for (j = g->first; j < g->first + g->n; j++)
				if (!x->pused[j] && (k >= n || x->free1[k++] != x->ph[j]))
					return 1;
		}
	}
	for (i = 0; i < x->nseg; i++) {
		const struct emu_region *g = &x->reg[x->sego[i]];
		for (j = g->first; j < g->first + g->n; j++)
			if (!x->pused[j] && (k >= n || x->free1[k++] != x->ph[j]))
				return 1;
	}
	if (k != n)
		return 1;
	memcpy(x->cur, x->free1, (size_t)n * sizeof *x->cur);  /* the next period's start */
	return 0;
}

/* One more period made at once in m's allocator from the free blocks x->cur
 * (in address order, as emu_layout found them): each region's pieces cut
 * again from its free block (free block i of the period read is free block i
 * now: the same sizes in the same order), each segment made again, the
 * blocks pushed in the same order; x->cur becomes the next period's free
 * blocks. Returns 0 or ALLOC_ESYS. */
static int emu_make_period(struct mem_emu *m, struct emu_period *x, int n)
{
	struct alloc *a = &m->a;
	int i, j, k, h, rep, g;

	for (i = 0; i < n; i++)  /* the free blocks of the period's start cut */
		if ((g = x->rof[i]) >= 0 && alloc_carve(a, x->cur[i], x->reg[g].n, x->psize + x->reg[g].first,
							 x->pused + x->reg[g].first, x->ph + x->reg[g].first))
			return m->nomem = 1, ALLOC_ESYS;
	for (i = 0; i < x->nseg; i++) {  /* the segments made, in the order they were */
		const struct emu_region *y = &x->reg[x->sego[i]];
		if (alloc_segment_carved(a, y->small, y->n, x->psize + y->first, x->pused + y->first, x->ph + y->first))
			return m->nomem = 1, ALLOC_ESYS;
	}
	for (j = 0; j < x->npush; j++) {
		if (x->pof[j] < 0)
			continue;
		h = x->ph[x->pof[j]];
		rep = x->push[j].rep;
		if (h >= m->capb && emu_below(m, h))
			return ALLOC_ESYS;
		m->below[h] = m->top[rep];
		m->top[rep] = h;
	}
	/* the next start's free blocks, in address order (as emu_layout found them) */
	for (i = 0, k = 0; i < n; i++) {
		if ((g = x->rof[i]) < 0) {
			x->next[k++] = x->cur[i];
			continue;
		}
		for (j = x->reg[g].first; j < x->reg[g].first + x->reg[g].n; j++)
			if (!x->pused[j])
				x->next[k++] = x->ph[j];
	}
	for (i = 0; i < x->nseg; i++)
		for (j = x->reg[x->sego[i]].first; j < x->reg[x->sego[i]].first + x->reg[x->sego[i]].n; j++)
			if (!x->pused[j])
				x->next[k++] = x->ph[j];
	memcpy(x->cur, x->next, (size_t)k * sizeof *x->cur);
	return 0;
}

static void emu_period_free(struct emu_period *x)
{
	free(x->fb0);
	free(x->free1);
	free(x->made);
	free(x->push);
	free(x->reg);
	free(x->psize);
	free(x->pused);
	free(x->ph);
	free(x->pof);
	free(x->cur);
	free(x->next);
	free(x->rof);
	free(x->sego);
}

/* Extends a replay over a periodic run r of its tape t at b, from q at the
 * start of copy SKIP_WARM: when the allocator's state repeats with a period
 * of P copies, the periods but the last are made at once instead of replayed
 * (the free blocks of their start cut as the period read cut them, the
 * segments it made made again, its blocks pushed), and the replay goes on at
 * the last. Returns 0 (q where the replay goes on: it always can), or
 * ALLOC_EOOM / ALLOC_ESYS from the replay.
 *
 * Why it is exact. While every block live at a copy's start stays allocated
 * to the run's end (emu_closed), each free block of that moment is bounded
 * by allocated blocks or its segment's ends for the whole run: a copy's
 * requests are served by best fit over the free blocks in (size, address)
 * order and split by sizes, its frees merge only within the free blocks they
 * came from, and new segments lie above every block. So when the free blocks
 * at the start of a period of P copies are the same blocks at its end, every
 * block the period leaves allocated lies in the segments it made, and no
 * segment request was refused (the limit not reached, no cache emptied), each
 * later period makes the same moves: the same segments at the same events,
 * P copies higher, its blocks pushed in the same order; the reserved and
 * allocated bytes grow by the same amounts, so a peak of a period left out is
 * below the same event's in the last period (or equal with less allocated,
 * and equal in both only when nothing grows, when the first period read
 * holds it). A segment request of a later period q comes at reserved
 * R + q dR + r, refused above the limit (the cache emptied, a move the period
 * read did not make): periods are made only up to the first such, and
 * replayed from there. Garbage collection, expandable segments and
 * max_split_size move blocks otherwise: no extension there. The gain: the
 * forward pass of a checkpointed model, whose blocks each leave their input
 * allocated (bench/gpt3-175b-3072.ini: 152 of its search's 192 forward copies made, its
 * search 15,571 -> 10,251 events); the backward frees what the forward left,
 * a block from before each copy (emu_closed), and is replayed. */
static int emu_skip(const struct mem_plan *p, int t, int64_t b, const struct mem_run *r, struct emu_pos *q)
{
	struct mem_emu *m = p->emu;
	struct emu_period *x = &m->per;
	struct alloc *a = &m->a;
	struct emu_counts f[2 * SKIP_MAXP + 1];
	int64_t lim = alloc_limit(a), dR, R0, A0, qq, first_q = -1;
	int c0 = (q->i - r->start) / r->len, c, P = 0, n, i, j, k, w, times, rc;

	/* the counts at 2 SKIP_MAXP + 1 copy starts; the shortest lag P over
	 * which they all move alike (cheap: a guess the free blocks check) */
	for (k = 0; k <= 2 * SKIP_MAXP; k++) {
		c = c0 + k;
		if (c >= r->reps || q->i != r->start + c * r->len)
			return 0;
		f[k] = emu_counts_of(a);
		if (k < 2 * SKIP_MAXP && (rc = emu_loop(p, t, b, q, r->start + (c + 1) * r->len)))
			return rc;
	}
	for (n = 1; n <= SKIP_MAXP && P == 0; n++) {
		for (i = n + 1; i <= 2 * SKIP_MAXP; i++)
			if (f[i].reserved - f[i - n].reserved != f[n].reserved - f[0].reserved ||
			    f[i].allocated - f[i - n].allocated != f[n].allocated - f[0].allocated ||
			    f[i].segments - f[i - n].segments != f[n].segments - f[0].segments ||
			    f[i].nfree != f[i - n].nfree)
				break;
		if (i > 2 * SKIP_MAXP && f[n].nfree == f[0].nfree)
			P = n;
	}
	c = c0 + 2 * SKIP_MAXP;
	w = P ? (r->reps - c - P) / P : 0;  /* whole periods after the one read */
	if (w < 2)
		return 0;
	/* the period from copy c: its free blocks before and after, what it made */
	if ((n = emu_free_read(a, x)) < 0)
		return ALLOC_ESYS;
	R0 = a->reserved;
	A0 = a->next_addr;
	if (emu_period_read(p, t, b, r, c, P, q, &rc))
		return rc;
	dR = a->reserved - R0;
	/* the free blocks at the period's end: alike in size, pool and wholeness,
	 * in the pools' order (cheap), then in address order (sorted) */
	if (a->free_[0].count + a->free_[1].count != n)
		return 0;
	for (k = 0; k < 2; k++) {
		if (alloc_free_blocks(a, x->free1, n, k) != n)
			return ALLOC_ESYS;
		if (k)
			qsort(x->fb0, (size_t)n, sizeof *x->fb0, by_addr);
		for (i = 0; i < n; i++) {
			const struct alloc_block *y = &a->b[x->free1[i]];
			if (y->size != x->fb0[i].size || y->small != x->fb0[i].small ||
			    (y->prev < 0 && y->next < 0) != x->fb0[i].whole)
				return 0;
		}
	}
	/* what the period left in each free block of its start and in each
	 * segment it made: their pieces (emu_layout) */
	if ((rc = emu_layout(a, x, n, A0)))
		return rc < 0 ? ALLOC_ESYS : 0;
	/* the first segment request refused: in period qq >= 1 after the one read */
	for (j = 0; j < x->nmade && dR > 0; j++) {
		const struct emu_made *y = &x->made[j];
		qq = R0 + dR + y->r + y->seg > lim ? 1 : (lim - R0 - y->r - y->seg) / dR + 1;
		if (qq <= w && (first_q < 0 || qq < first_q))
			first_q = qq;
	}
	times = w - 1;  /* the last whole period is replayed */
	if (first_q >= 0 && first_q - 1 < times)
		times = (int)first_q - 1;  /* made up to the first segment refused; replayed from there */
	for (k = 0; k < times; k++)
		if ((rc = emu_make_period(m, x, n)))
			return rc;
	q->i += times * P * r->len;
	m->k.skipped += (long)times * P;
	return 0;
}

/* Replays tape t at b through the emulated allocator, cap bytes for its
 * requests. Returns 0, ALLOC_EOOM (it ran out) or ALLOC_ESYS (host memory); *peak = the
 * most it held plus what is outside it, *at = the event where it first held
 * that with the most allocated (-1 none). */
static int emu_replay(const struct mem_plan *p, int t, int64_t b, int64_t cap, int64_t *peak, int *at)
{
	struct mem_emu *m = p->emu;
	struct alloc_cfg c = p->acfg;
	struct emu_pos q = {0, -1, 0, 0, -1};
	int rc;

	c.capacity = cap;
	if (emu_prepare(m, &p->tape[t], t, b)) {
		*peak = 0;
		*at = -1;
		return ALLOC_ESYS;
	}
	alloc_reset(&m->a, &c);
	m->k.replays++;
	rc = 0;
	if (!p->whole_replays && c.max_split <= 0 && !c.expandable && !(c.gc_threshold > 0 && c.allowed > 0)) {
		const struct mem_tape *tp = &p->tape[t];
		int r;
		for (r = 0; r < tp->nrun && !rc; r++) {
			const struct mem_run *x = &tp->run[r];
			if (x->reps < SKIP_REPS || x->start + x->len * x->reps > m->cls[t].end || !emu_closed(p, t, x))
				continue;
			rc = emu_loop(p, t, b, &q, x->start + SKIP_WARM * x->len);
			if (!rc)
				rc = emu_skip(p, t, b, x, &q);
		}
	}
	if (!rc)
		rc = emu_loop(p, t, b, &q, m->cls[t].end);
	*peak = q.peak;
	*at = q.at;
	return rc;
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
