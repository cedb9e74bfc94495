/*
 * emu.c — the caching allocator run over an allocation tape (see emu.h): the
 * tape's requests by class, a replay event by event, and a periodic run's
 * copies made at once where the allocator's state repeats (emu_skip).
 */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

#include "memrun.h"
#include "vec.h"

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

void emu_period_free(struct emu_period *x)
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
int emu_replay(const struct mem_plan *p, int t, int64_t b, int64_t cap, int64_t *peak, int *at)
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
