/*
 * alloc.c — PyTorch's CUDA caching allocator, emulated (see alloc.h for the
 * rules and their source, c10/cuda/CUDACachingAllocator.cpp).
 *
 * Blocks live in one array and refer to each other by index (a segment is a
 * doubly linked list of blocks in address order). Each pool's free blocks are
 * a sorted array of indices: by (size, address) as the allocator's BlockPool
 * set orders them, so best fit is a binary search; expandable segments keep
 * their unmapped ranges by address. Addresses are virtual: segments never
 * touch, so only the links decide what merges.
 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

#include "vec.h"

#define EXP_SPACE ((int64_t)1 << 46)  /* address space of an expandable segment */

enum { LARGE = 0, SMALL = 1 };

int64_t alloc_round(int64_t size)
{
	if (size < ALLOC_MIN_BLOCK)
		return ALLOC_MIN_BLOCK;
	return (size + ALLOC_MIN_BLOCK - 1) / ALLOC_MIN_BLOCK * ALLOC_MIN_BLOCK;
}

/* get_allocation_size: the segment cudaMalloc'ed for a request of size. */
static int64_t segment_size(int64_t size)
{
	if (size <= ALLOC_SMALL_SIZE)
		return ALLOC_SMALL_BUFFER;
	if (size < ALLOC_MIN_LARGE)
		return ALLOC_LARGE_BUFFER;
	return (size + ALLOC_ROUND_LARGE - 1) / ALLOC_ROUND_LARGE * ALLOC_ROUND_LARGE;
}

static int64_t page_size(int pool)
{
	return pool == SMALL ? ALLOC_SMALL_BUFFER : ALLOC_LARGE_BUFFER;
}

/* ---- ordered sets of blocks ------------------------------------------------ */

/* x before y: by (size, address) or by address alone. */
static int before(const struct alloc *a, int x, int y, int by_size)
{
	const struct alloc_block *p = &a->b[x], *q = &a->b[y];

	if (by_size && p->size != q->size)
		return p->size < q->size;
	return p->addr < q->addr;
}

/* The first position whose block is not before h. */
static int position(const struct alloc *a, const struct alloc_set *s, int h, int by_size)
{
	int lo = 0, hi = s->n, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (before(a, s->v[mid], h, by_size))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int set_insert(struct alloc *a, struct alloc_set *s, int h, int by_size)
{
	int i;

	if (vec_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) {
		a->nomem = 1;
		return -1;
	}
	i = position(a, s, h, by_size);
	memmove(s->v + i + 1, s->v + i, (size_t)(s->n - i) * sizeof *s->v);
	s->v[i] = h;
	s->n++;
	return 0;
}

static void set_erase(const struct alloc *a, struct alloc_set *s, int h, int by_size)
{
	int i = position(a, s, h, by_size);

	if (i < s->n && s->v[i] == h) {
		memmove(s->v + i, s->v + i + 1, (size_t)(s->n - i - 1) * sizeof *s->v);
		s->n--;
	}
}

/* The first free block of the pool with size >= size. */
static int lower_bound(const struct alloc *a, int pool, int64_t size)
{
	const struct alloc_set *s = &a->free_[pool];
	int lo = 0, hi = s->n, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (a->b[s->v[mid]].size < size)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- blocks ------------------------------------------------------------------ */

static int new_block(struct alloc *a, int pool, int64_t addr, int64_t size, int mapped)
{
	int h;

	if (a->nspare > 0) {
		h = a->spare[--a->nspare];
	} else {
		if (vec_grow((void **)&a->b, &a->capb, a->nb + 1, sizeof *a->b)) {
			a->nomem = 1;
			return -1;
		}
		h = a->nb++;
	}
	a->b[h] = (struct alloc_block){.addr = addr, .size = size, .prev = -1, .next = -1,
		.small = (int8_t)pool, .mapped = (int8_t)mapped, .used = 1};
	return h;
}

static void drop_block(struct alloc *a, int h)
{
	a->b[h].used = 0;
	if (vec_grow((void **)&a->spare, &a->capspare, a->nspare + 1, sizeof *a->spare))
		a->nomem = 1;  /* the block is only lost */
	else
		a->spare[a->nspare++] = h;
}

static int is_split(const struct alloc *a, int h)
{
	return a->b[h].prev >= 0 || a->b[h].next >= 0;
}

/* try_merge_blocks: src (a neighbour of dst) joins dst if it is free and mapped
 * alike; src leaves its set. dst is in no set. */
static void try_merge(struct alloc *a, int dst, int src)
{
	struct alloc_block *d = &a->b[dst], *s;
	int pool = d->small;

	if (src < 0)
		return;
	s = &a->b[src];
	if (s->allocated || s->mapped != d->mapped)
		return;
	if (s->mapped)
		set_erase(a, &a->free_[pool], src, 1);
	else
		set_erase(a, &a->unmapped[pool], src, 0);
	if (d->prev == src) {
		d->addr = s->addr;
		d->prev = s->prev;
		if (d->prev >= 0)
			a->b[d->prev].next = dst;
	} else {
		d->next = s->next;
		if (d->next >= 0)
			a->b[d->next].prev = dst;
	}
	d->size += s->size;
	drop_block(a, src);
}

/* Inserts a new block r after h in h's segment. */
static void link_after(struct alloc *a, int h, int r)
{
	a->b[r].prev = h;
	a->b[r].next = a->b[h].next;
	if (a->b[r].next >= 0)
		a->b[a->b[r].next].prev = r;
	a->b[h].next = r;
}

/* Inserts a new block x before h in h's segment. */
static void link_before(struct alloc *a, int h, int x)
{
	a->b[x].next = h;
	a->b[x].prev = a->b[h].prev;
	if (a->b[x].prev >= 0)
		a->b[a->b[x].prev].next = x;
	a->b[h].prev = x;
}

/* release_block: an unsplit free block goes back to CUDA. */
static void release_block(struct alloc *a, int h)
{
	set_erase(a, &a->free_[a->b[h].small], h, 1);
	a->reserved -= a->b[h].size;
	drop_block(a, h);
}

/* ---- expandable segments ------------------------------------------------------- */

/* map_block: maps pages from the start of unmapped block h to cover size;
 * the mapped part joins free neighbours. Returns 0 when the device is full. */
static int map_block(struct alloc *a, int h, int64_t size)
{
	int pool = a->b[h].small, r;
	int64_t pg = page_size(pool), m = (size + pg - 1) / pg * pg;

	if (m > a->b[h].size)
		m = a->b[h].size;
	if (a->reserved + m > a->c.capacity)
		return 0;
	set_erase(a, &a->unmapped[pool], h, 0);
	if (m < a->b[h].size) {
		r = new_block(a, pool, a->b[h].addr + m, a->b[h].size - m, 0);
		if (r < 0 || set_insert(a, &a->unmapped[pool], r, 0))
			return 0;
		link_after(a, h, r);
		a->b[h].size = m;
	}
	a->b[h].mapped = 1;
	a->reserved += m;
	try_merge(a, h, a->b[h].prev);
	try_merge(a, h, a->b[h].next);
	return set_insert(a, &a->free_[pool], h, 1) == 0;
}

/* unmap_block: the whole pages inside free block h go back to CUDA. */
static void unmap_block(struct alloc *a, int h, int64_t base)
{
	int pool = a->b[h].small, x;
	int64_t pg = page_size(pool), addr = a->b[h].addr, end = addr + a->b[h].size;
	int64_t lo = base + (addr - base + pg - 1) / pg * pg, hi = base + (end - base) / pg * pg;

	if (lo >= hi)
		return;
	set_erase(a, &a->free_[pool], h, 1);
	if (lo > addr && (x = new_block(a, pool, addr, lo - addr, 1)) >= 0) {
		link_before(a, h, x);
		set_insert(a, &a->free_[pool], x, 1);
	}
	if (end > hi && (x = new_block(a, pool, hi, end - hi, 1)) >= 0) {
		link_after(a, h, x);
		set_insert(a, &a->free_[pool], x, 1);
	}
	a->b[h].addr = lo;
	a->b[h].size = hi - lo;
	a->b[h].mapped = 0;
	a->reserved -= hi - lo;
	try_merge(a, h, a->b[h].prev);
	try_merge(a, h, a->b[h].next);
	set_insert(a, &a->unmapped[pool], h, 0);
}

/* find_expandable_block: the lowest unmapped range (with the free block just
 * before it) that has size bytes of free address space. */
static int find_expandable(struct alloc *a, int pool, int64_t size)
{
	struct alloc_set *u = &a->unmapped[pool];
	int i, c, x;
	int64_t bytes;

	if (!a->has_seg[pool]) {
		x = new_block(a, pool, a->next_addr, EXP_SPACE, 0);
		if (x < 0 || set_insert(a, u, x, 0))
			return -1;
		a->seg_base[pool] = a->next_addr;
		a->next_addr += EXP_SPACE;
		a->has_seg[pool] = 1;
	}
	for (i = 0; i < u->n; i++) {
		c = u->v[i];
		if (a->b[c].prev >= 0 && !a->b[a->b[c].prev].allocated)
			c = a->b[c].prev;
		for (bytes = 0, x = c; bytes < size && x >= 0 && !a->b[x].allocated; x = a->b[x].next)
			bytes += a->b[x].size;
		if (bytes >= size)
			return c;
	}
	return -1;
}

/* try_allocate_expandable_block: maps what the request lacks. */
static int alloc_expandable(struct alloc *a, int pool, int64_t size)
{
	int c = find_expandable(a, pool, size), n;

	if (c < 0)
		return ALLOC_ESYS;
	if (!a->b[c].mapped) {
		if (!map_block(a, c, size < a->b[c].size ? size : a->b[c].size))
			return a->nomem ? ALLOC_ESYS : ALLOC_EOOM;
	}
	while (a->b[c].size < size) {
		n = a->b[c].next;
		if (!map_block(a, n, size - a->b[c].size))
			return a->nomem ? ALLOC_ESYS : ALLOC_EOOM;
		c = n;  /* the mapped range took c in */
	}
	set_erase(a, &a->free_[pool], c, 1);
	return c;
}

/* ---- the allocator's steps -------------------------------------------------------- */

static int64_t expandable_size(const struct alloc *a, int h)
{
	int n = a->b[h].next;

	return a->b[h].size + (n >= 0 && !a->b[n].mapped ? a->b[n].size : 0);
}

/* get_free_block: best fit under the max_split_size rules. */
static int get_free_block(struct alloc *a, int pool, int64_t size)
{
	struct alloc_set *s = &a->free_[pool];
	int i = lower_bound(a, pool, size), h;
	int64_t ms = a->c.max_split;

	if (a->c.gc_threshold > 0)
		a->gc_calls[pool]++;
	if (i == s->n)
		return -1;
	if (a->c.expandable)  /* a block that can grow counts at its grown size */
		while (i + 1 < s->n && expandable_size(a, s->v[i + 1]) < expandable_size(a, s->v[i]))
			i++;
	h = s->v[i];
	if (ms > 0 && size < ms && a->b[h].size >= ms)
		return -1;
	if (ms > 0 && size >= ms && a->b[h].size >= size + ALLOC_LARGE_BUFFER)
		return -1;
	set_erase(a, s, h, 1);
	return h;
}

/* alloc_block: a new segment (or mapped pages) for a request of size. */
static int alloc_block(struct alloc *a, int pool, int64_t size)
{
	int64_t seg = segment_size(size);
	int h;

	if (a->c.expandable)
		return alloc_expandable(a, pool, size);
	if (a->reserved + seg > a->c.capacity)
		return ALLOC_EOOM;
	h = new_block(a, pool, a->next_addr, seg, 1);
	if (h < 0)
		return ALLOC_ESYS;
	a->next_addr += seg;
	a->reserved += seg;
	a->segments++;
	return h;
}

/* release_available_cached_blocks (max_split_size only): oversize free blocks. */
static int release_available(struct alloc *a, int pool, int64_t size)
{
	struct alloc_set *s = &a->free_[pool];
	int64_t ms = a->c.max_split, key = size < ms ? ms : size, total = 0;
	int i;

	if (ms <= 0 || a->c.expandable)
		return 0;
	i = lower_bound(a, pool, key);
	if (i < s->n) {
		release_block(a, s->v[i]);
		return 1;
	}
	for (i = s->n - 1; i >= 0 && total < key && a->b[s->v[i]].size >= ms; i--) {
		total += a->b[s->v[i]].size;
		release_block(a, s->v[i]);
	}
	return total >= key;
}

/* release_cached_blocks: every unsplit free block (expandable: its pages). */
void alloc_empty_cache(struct alloc *a)
{
	struct alloc_set *s;
	int pool, i, n;

	for (pool = 0; pool < 2; pool++) {
		s = &a->free_[pool];
		if (!a->c.expandable) {
			for (i = 0; i < s->n;)
				if (!is_split(a, s->v[i]))
					release_block(a, s->v[i]);
				else
					i++;
			continue;
		}
		/* unmapping reshapes the set; a free block is never merged away
		 * (its neighbours are allocated or unmapped), so a copy is safe */
		if (vec_grow((void **)&a->scratch, &a->capscratch, s->n, sizeof *a->scratch)) {
			a->nomem = 1;
			return;
		}
		n = s->n;
		memcpy(a->scratch, s->v, (size_t)n * sizeof *s->v);
		for (i = 0; i < n; i++)
			unmap_block(a, a->scratch[i], a->seg_base[pool]);
	}
}

/* garbage_collect_cached_blocks: unsplit large-pool blocks at least as old as
 * the average, until reserved memory is back under the threshold. */
static void garbage_collect(struct alloc *a)
{
	struct alloc_set *s = &a->free_[LARGE];
	int64_t thr = (int64_t)(a->c.gc_threshold * (double)a->c.capacity), reclaimed = 0, age, target;
	double total_age = 0;
	int i, h, count = 0, freed = 1;

	if (a->c.expandable || a->reserved <= thr)
		return;
	target = a->reserved - thr;
	for (i = 0; i < s->n; i++)
		if (!is_split(a, s->v[i])) {
			total_age += (double)(a->gc_calls[LARGE] - a->b[s->v[i]].gc_base);
			count++;
		}
	while (reclaimed < target && freed && count > 0) {
		double avg = total_age / count;
		freed = 0;
		for (i = 0; i < s->n;) {
			h = s->v[i];
			age = a->gc_calls[LARGE] - a->b[h].gc_base;
			if (!is_split(a, h) && (double)age >= avg) {
				freed = 1;
				reclaimed += a->b[h].size;
				total_age -= (double)age;
				count--;
				release_block(a, h);
			} else {
				i++;
			}
		}
	}
}

static int should_split(const struct alloc *a, int h, int64_t size)
{
	int64_t remaining = a->b[h].size - size;

	if (a->b[h].small || a->c.expandable)
		return remaining >= ALLOC_MIN_BLOCK;
	return (a->c.max_split <= 0 || size < a->c.max_split) && remaining > ALLOC_SMALL_SIZE;
}

int alloc_malloc(struct alloc *a, int64_t request)
{
	int64_t size = alloc_round(request);
	int pool = size <= ALLOC_SMALL_SIZE ? SMALL : LARGE, h, r;

	if (a->nomem)
		return ALLOC_ESYS;
	h = get_free_block(a, pool, size);
	if (h < 0) {
		if (a->c.gc_threshold > 0)
			garbage_collect(a);
		h = alloc_block(a, pool, size);
		if (h == ALLOC_EOOM && release_available(a, pool, size))
			h = alloc_block(a, pool, size);
		if (h == ALLOC_EOOM) {
			a->retries++;
			alloc_empty_cache(a);
			h = alloc_block(a, pool, size);
		}
		if (h < 0) {
			a->ooms += h == ALLOC_EOOM;
			return h;
		}
	}
	if (should_split(a, h, size)) {
		r = new_block(a, pool, a->b[h].addr + size, a->b[h].size - size, 1);
		if (r < 0)
			return ALLOC_ESYS;
		link_after(a, h, r);
		a->b[h].size = size;
		if (set_insert(a, &a->free_[pool], r, 1))
			return ALLOC_ESYS;
	}
	if (a->nomem)
		return ALLOC_ESYS;
	a->b[h].allocated = 1;
	a->allocated += a->b[h].size;
	if (a->allocated > a->peak_allocated)
		a->peak_allocated = a->allocated;
	if (a->reserved > a->peak_reserved)
		a->peak_reserved = a->reserved;
	return h;
}

void alloc_free(struct alloc *a, int h)
{
	int pool = a->b[h].small;

	a->b[h].allocated = 0;
	a->allocated -= a->b[h].size;
	try_merge(a, h, a->b[h].prev);
	try_merge(a, h, a->b[h].next);
	a->b[h].gc_base = a->gc_calls[pool];
	set_insert(a, &a->free_[pool], h, 1);
}

/* ---- lifetime ------------------------------------------------------------------------ */

void alloc_reset(struct alloc *a, const struct alloc_cfg *c)
{
	int i;

	a->c = *c;
	a->nb = 0;
	a->nspare = 0;
	for (i = 0; i < 2; i++) {
		a->free_[i].n = 0;
		a->unmapped[i].n = 0;
		a->has_seg[i] = 0;
		a->gc_calls[i] = 0;
		a->seg_base[i] = 0;
	}
	a->next_addr = (int64_t)1 << 30;
	a->nomem = 0;
	a->allocated = a->reserved = a->peak_allocated = a->peak_reserved = 0;
	a->segments = a->retries = a->ooms = 0;
}

void alloc_init(struct alloc *a, const struct alloc_cfg *c)
{
	memset(a, 0, sizeof *a);
	alloc_reset(a, c);
}

void alloc_release(struct alloc *a)
{
	int i;

	free(a->b);
	free(a->spare);
	free(a->scratch);
	for (i = 0; i < 2; i++) {
		free(a->free_[i].v);
		free(a->unmapped[i].v);
	}
	memset(a, 0, sizeof *a);
}
