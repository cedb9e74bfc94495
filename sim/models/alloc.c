/*
 * alloc.c — PyTorch's CUDA caching allocator, emulated (see alloc.h for the
 * rules and their source, c10/cuda/CUDACachingAllocator.cpp).
 *
 * Blocks live in one array and refer to each other by index (a segment is a
 * doubly linked list of blocks in address order). Each pool's free blocks are
 * ordered by (size, address) as the allocator's BlockPool set orders them, in
 * size classes (below), so best fit is a binary search; expandable segments
 * keep their unmapped ranges by address. Addresses are virtual: segments never
 * touch, so only the links decide what merges.
 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

#include "vec.h"

#define EXP_SPACE ((int64_t)1 << 46)  /* address space of an expandable segment */

enum { LARGE = 0, SMALL = 1 };

/* Inlined wherever called, whatever the compiler's estimate: a set insertion
 * and a merge are a few loads and stores, run for nearly every malloc and free
 * of a replay, and as calls they cost about as much as their work (measured
 * with bench/sweep.ini: 6 % of a sweep). The other small steps are static
 * inline. */
#define HOT static inline __attribute__((always_inline))

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

/* The pool a request of (rounded) size goes to. */
static inline int pool_of(int64_t size)
{
	return size <= ALLOC_SMALL_SIZE ? SMALL : LARGE;
}

static int64_t page_size(int pool)
{
	return pool == SMALL ? ALLOC_SMALL_BUFFER : ALLOC_LARGE_BUFFER;
}

/* ---- ordered sets of blocks ------------------------------------------------ */

/* A set by address (expandable segments' unmapped ranges) is one sorted array.
 * A set by (size, address) (a pool's free blocks, the allocator's BlockPool)
 * is split into size classes, 8 per power of two, each a sorted array: sizes
 * of different classes never interleave, so the classes in order are the set
 * in order, and an insertion moves only its class's entries.
 *
 * A class's array runs from its largest (size, address) down to its smallest:
 * the large pool's classes fill with blocks of one size (a model's repeated
 * layers, each activation a segment of its own), which the backward pass
 * frees from the highest address down and the next forward takes back from
 * the lowest address up; kept descending, both happen at the array's end and
 * move nothing (kept ascending, each moved the whole class). */

static inline int size_class(int64_t size)
{
	int e = 63 - __builtin_clzll((unsigned long long)size);

	return e < 3 ? 0 : e * 8 + (int)((size >> (e - 3)) & 7);
}

/* Where (k, addr) goes in keys v[0..n) sorted ascending: the first entry not
 * before it. */
static inline int key_position(const struct alloc_key *v, int n, int64_t k, int64_t addr)
{
	int lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (v[mid].k < k || (v[mid].k == k && v[mid].addr < addr))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Where (size, addr) goes in a class's keys v[0..n), sorted descending: the
 * first entry not after it (not larger). The end is tried first: there go 85 %
 * of a sweep's insertions and the look-ups of a size all of whose class is at
 * least that large (bench/sweep.ini's tables, counted once with a temporary
 * counter). */
static inline int class_position(const struct alloc_key *v, int n, int64_t size, int64_t addr)
{
	int lo = 0, hi = n - 1, mid;

	if (n == 0 || v[hi].k > size || (v[hi].k == size && v[hi].addr > addr))
		return n;  /* every entry is larger */
	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (v[mid].k > size || (v[mid].k == size && v[mid].addr > addr))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Entries a size class's array starts with: most classes hold a few blocks.
 * bench/gpt3-175b-3072.ini's simulate has 120 classes in use over its two
 * allocators and their pools, which at VEC_FIRST (256) entries took 0.7 MB, a
 * fifth of its heap's peak (valgrind massif); with the search's class table
 * sized by the tape's first copies (emu.c emu_classes) the heap stays in
 * one 2 MiB huge page (heap.h). 64 is as fast as 256 in process (8 and 32
 * were 3 % slower, arrays being regrown per plan: bench_simulate side by
 * side). */
#define ALLOC_BUCKET_FIRST 64

/* Inserts block h's entry (k, its address) at v[i], moving v[i..n) up; an
 * array made here starts with room for first entries. */
static inline int keys_put(struct alloc *a, struct alloc_key **v, int *n, int *cap, int first, int i, int64_t k,
			   int h)
{
	if (vec_grow_from((void **)v, cap, *n + 1, sizeof **v, first)) {
		a->nomem = 1;
		return -1;
	}
	if (i < *n)
		memmove(*v + i + 1, *v + i, (size_t)(*n - i) * sizeof **v);
	(*v)[i] = (struct alloc_key){.k = k, .addr = a->b[h].addr, .h = h};
	(*n)++;
	return 0;
}

/* Removes v[i], moving v[i + 1..n) down. */
static inline void keys_cut(struct alloc_key *v, int *n, int i)
{
	if (i + 1 < *n)
		memmove(v + i, v + i + 1, (size_t)(*n - i - 1) * sizeof *v);
	(*n)--;
}

HOT int set_insert(struct alloc *a, struct alloc_set *s, int h, int by_size)
{
	struct alloc_bucket *bk;
	int c;

	if (!by_size)
		return keys_put(a, &s->v, &s->n, &s->cap, VEC_FIRST, key_position(s->v, s->n, a->b[h].addr, a->b[h].addr),
				a->b[h].addr, h);
	if (!s->bk && !(s->bk = calloc(ALLOC_CLASSES, sizeof *s->bk))) {
		a->nomem = 1;
		return -1;
	}
	c = size_class(a->b[h].size);
	bk = &s->bk[c];
	if (keys_put(a, &bk->v, &bk->n, &bk->cap, ALLOC_BUCKET_FIRST,
		     class_position(bk->v, bk->n, a->b[h].size, a->b[h].addr), a->b[h].size, h))
		return -1;
	s->used[c / 64] |= (uint64_t)1 << (c % 64);
	s->count++;
	return 0;
}

static inline void set_erase(const struct alloc *a, struct alloc_set *s, int h, int by_size)
{
	struct alloc_bucket *bk;
	int c, i;

	if (!by_size) {
		i = key_position(s->v, s->n, a->b[h].addr, a->b[h].addr);
		if (i < s->n && s->v[i].h == h)
			keys_cut(s->v, &s->n, i);
		return;
	}
	c = size_class(a->b[h].size);
	bk = s->bk ? &s->bk[c] : NULL;
	if (!bk)
		return;
	i = bk->n > 0 && bk->v[bk->n - 1].h == h ? bk->n - 1 :  /* the smallest: 75 % of erasures (counted alike) */
		class_position(bk->v, bk->n, a->b[h].size, a->b[h].addr);
	if (i == bk->n || bk->v[i].h != h)
		return;
	keys_cut(bk->v, &bk->n, i);
	s->count--;
	if (bk->n == 0)
		s->used[c / 64] &= ~((uint64_t)1 << (c % 64));
}

/* A place in a set by size: class c, entry i of its (descending) array;
 * c < 0 = past the end. */
struct pos {
	int c, i;
};

/* The first non-empty class at or above c (-1 none). */
static inline int next_class(const struct alloc_set *s, int c)
{
	int w;
	uint64_t m;

	for (w = c / 64; c >= 0 && w < ALLOC_CLASSES / 64; w++, c = w * 64) {
		m = s->used[w] & (~(uint64_t)0 << (c % 64));
		if (m)
			return w * 64 + __builtin_ctzll(m);
	}
	return -1;
}

/* The last non-empty class at or below c (-1 none). */
static int prev_class(const struct alloc_set *s, int c)
{
	int w;
	uint64_t m;

	for (w = c / 64; c >= 0 && w >= 0; w--, c = w * 64 + 63) {
		m = s->used[w] & (~(uint64_t)0 >> (63 - c % 64));
		if (m)
			return w * 64 + 63 - __builtin_clzll(m);
	}
	return -1;
}

static int at(const struct alloc_set *s, struct pos p)
{
	return s->bk[p.c].v[p.i].h;
}

/* The smallest entry of the first non-empty class at or above c. */
static inline struct pos class_first(const struct alloc_set *s, int c)
{
	struct pos p = {c < ALLOC_CLASSES ? next_class(s, c) : -1, 0};

	if (p.c >= 0)
		p.i = s->bk[p.c].n - 1;
	return p;
}

/* The entry after p in (size, address) order. */
static struct pos next_pos(const struct alloc_set *s, struct pos p)
{
	if (p.i > 0) {
		p.i--;
		return p;
	}
	return class_first(s, p.c + 1);
}

/* Erases the entry at p (as set_erase would). */
static inline void erase_at(struct alloc_set *s, struct pos p)
{
	struct alloc_bucket *bk = &s->bk[p.c];

	keys_cut(bk->v, &bk->n, p.i);
	s->count--;
	if (bk->n == 0)
		s->used[p.c / 64] &= ~((uint64_t)1 << (p.c % 64));
}

/* The first free block of the pool with size >= size (c < 0: none). */
static inline struct pos lower_bound(const struct alloc *a, int pool, int64_t size)
{
	const struct alloc_set *s = &a->free_[pool];
	int c = size_class(size), n;

	if (s->used[c / 64] >> (c % 64) & 1) {  /* the class's entries of at least size come first */
		n = class_position(s->bk[c].v, s->bk[c].n, size, INT64_MIN);
		if (n > 0)
			return (struct pos){c, n - 1};
	}
	return class_first(s, c + 1);
}

/* The largest free block of the pool (c < 0: none). */
static struct pos last_pos(const struct alloc_set *s)
{
	return (struct pos){prev_class(s, ALLOC_CLASSES - 1), 0};
}

/* Copies the blocks of set s (by size) to a->scratch, in order; their count, or -1. */
static int set_copy(struct alloc *a, const struct alloc_set *s)
{
	struct pos p;
	int n = 0;

	if (vec_grow((void **)&a->scratch, &a->capscratch, s->count + 1, sizeof *a->scratch)) {
		a->nomem = 1;
		return -1;
	}
	for (p = class_first(s, 0); p.c >= 0; p = next_pos(s, p))
		a->scratch[n++] = at(s, p);
	return n;
}

/* ---- blocks ------------------------------------------------------------------ */

/* garbage_collect_cached_blocks runs only under a memory fraction
 * (DeviceCachingAllocator::malloc: set_fraction && threshold > 0). */
static int gc_on(const struct alloc *a)
{
	return a->c.gc_threshold > 0 && a->c.allowed > 0;
}

static inline int new_block(struct alloc *a, int pool, int64_t addr, int64_t size, int mapped)
{
	int h;

	if (a->spare >= 0) {
		h = a->spare;
		a->spare = a->b[h].next;
	} else {
		if (vec_grow((void **)&a->b, &a->capb, a->nb + 1, sizeof *a->b)) {
			a->nomem = 1;
			return -1;
		}
		h = a->nb++;
	}
	a->b[h] = (struct alloc_block){.addr = addr, .size = size, .prev = -1, .next = -1,
		.small = (int8_t)pool, .mapped = (int8_t)mapped};
	if (gc_on(a)) {  /* ages only where they are read */
		if (vec_grow((void **)&a->gc_base, &a->capgc, h + 1, sizeof *a->gc_base)) {
			a->nomem = 1;
			return -1;
		}
		a->gc_base[h] = 0;
	}
	return h;
}

/* Block h is unused: on the spare stack (its next links the stack). */
static inline void drop_block(struct alloc *a, int h)
{
	a->b[h].next = a->spare;
	a->spare = h;
}

static int is_split(const struct alloc *a, int h)
{
	return a->b[h].prev >= 0 || a->b[h].next >= 0;
}

/* try_merge_blocks: src (a neighbour of dst) joins dst if it is free and mapped
 * alike; src leaves its set. dst is in no set. */
HOT void try_merge(struct alloc *a, int dst, int src)
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
static inline void link_after(struct alloc *a, int h, int r)
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

/* What cudaMalloc may hold: the capacity, or the fraction's maximum. */
static int64_t limit(const struct alloc *a)
{
	return a->c.allowed > 0 && a->c.allowed < a->c.capacity ? a->c.allowed : a->c.capacity;
}

int64_t alloc_limit(const struct alloc *a)
{
	return limit(a);
}


/* map_block: maps pages from the start of unmapped block h to cover size;
 * the mapped part joins free neighbours. Returns 0 when the device is full. */
static int map_block(struct alloc *a, int h, int64_t size)
{
	int pool = a->b[h].small, r;
	int64_t pg = page_size(pool), m = (size + pg - 1) / pg * pg;

	if (m > a->b[h].size)
		m = a->b[h].size;
	if (a->reserved + m > limit(a))
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
		c = u->v[i].h;
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

/* The free block get_free_block takes for size (best fit under the
 * max_split_size rules), at *p in its set; -1 none. Changes nothing. */
static inline int find_free(const struct alloc *a, int pool, int64_t size, struct pos *p)
{
	const struct alloc_set *s = &a->free_[pool];
	int64_t ms = a->c.max_split;
	struct pos q;
	int h;

	*p = lower_bound(a, pool, size);
	if (p->c < 0)
		return -1;
	if (a->c.expandable)  /* a block that can grow counts at its grown size */
		for (q = next_pos(s, *p); q.c >= 0 && expandable_size(a, at(s, q)) < expandable_size(a, at(s, *p));
		     q = next_pos(s, q))
			*p = q;
	h = at(s, *p);
	if (ms > 0 && size < ms && a->b[h].size >= ms)
		return -1;
	if (ms > 0 && size >= ms && a->b[h].size >= size + ALLOC_LARGE_BUFFER)
		return -1;
	return h;
}

/* get_free_block: that block, out of its set. */
static inline int get_free_block(struct alloc *a, int pool, int64_t size)
{
	struct pos p;
	int h;

	if (gc_on(a))
		a->gc_calls[pool]++;
	h = find_free(a, pool, size, &p);
	if (h >= 0)
		erase_at(&a->free_[pool], p);
	return h;
}

/* alloc_block: a new segment (or mapped pages) for a request of size. */
static int alloc_block(struct alloc *a, int pool, int64_t size)
{
	int64_t seg = segment_size(size);
	int h;

	if (a->c.expandable)
		return alloc_expandable(a, pool, size);
	if (a->reserved + seg > limit(a))
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
	struct pos p;

	if (ms <= 0 || a->c.expandable)
		return 0;
	p = lower_bound(a, pool, key);
	if (p.c >= 0) {
		release_block(a, at(s, p));
		return 1;
	}
	for (p = last_pos(s); p.c >= 0 && total < key && a->b[at(s, p)].size >= ms; p = last_pos(s)) {
		total += a->b[at(s, p)].size;
		release_block(a, at(s, p));
	}
	return total >= key;
}

/* release_cached_blocks: every unsplit free block (expandable: its pages). */
void alloc_empty_cache(struct alloc *a)
{
	int pool, i, n;

	for (pool = 0; pool < 2; pool++) {
		/* releasing and unmapping reshape the set: from a copy (a free
		 * block is never merged away: its neighbours are allocated or
		 * unmapped) */
		n = set_copy(a, &a->free_[pool]);
		for (i = 0; i < n; i++)
			if (a->c.expandable)
				unmap_block(a, a->scratch[i], a->seg_base[pool]);
			else if (!is_split(a, a->scratch[i]))
				release_block(a, a->scratch[i]);
	}
}

static int by_address(const void *x, const void *y, void *ctx)
{
	const struct alloc *a = ctx;
	int64_t u = a->b[*(const int *)x].addr, v = a->b[*(const int *)y].addr;

	return (u > v) - (u < v);
}

int alloc_free_blocks(struct alloc *a, int *h, int cap, int by_addr)
{
	const struct alloc_set *s;
	struct pos p;
	int pool, n = 0;

	if (!by_addr) {
		for (pool = 1; pool >= 0; pool--)
			for (s = &a->free_[pool], p = class_first(s, 0); p.c >= 0; p = next_pos(s, p), n++)
				if (n < cap)
					h[n] = at(s, p);
		return n;
	}
	if (vec_grow((void **)&a->scratch, &a->capscratch, a->free_[0].count + a->free_[1].count + 1,
		     sizeof *a->scratch))
		return -1;
	for (pool = 0; pool < 2; pool++)
		for (s = &a->free_[pool], p = class_first(s, 0); p.c >= 0; p = next_pos(s, p))
			a->scratch[n++] = at(s, p);
	qsort_r(a->scratch, (size_t)n, sizeof *a->scratch, by_address, a);
	if (cap > 0)
		memcpy(h, a->scratch, (size_t)(n < cap ? n : cap) * sizeof *h);
	return n;
}

/* Block h (of the pool, mapped, out of every set) cut into n pieces of
 * size[k] from its address on, used[k] allocated and the others free; their
 * handles into out. Returns 0 or -1 (host memory). */
static int pieces(struct alloc *a, int h, int n, const int64_t *size, const int8_t *used, int *out)
{
	int pool = a->b[h].small, k, x, prev = h;
	int64_t addr = a->b[h].addr;

	a->b[h].size = size[0];
	out[0] = h;
	for (k = 1; k < n; k++) {
		addr += size[k - 1];
		if ((x = new_block(a, pool, addr, size[k], 1)) < 0)
			return -1;
		link_after(a, prev, x);
		out[k] = prev = x;
	}
	for (k = 0; k < n; k++)
		if (used[k]) {
			a->b[out[k]].allocated = 1;
			a->allocated += size[k];
		} else if (set_insert(a, &a->free_[pool], out[k], 1)) {
			return -1;
		}
	if (a->allocated > a->peak_allocated)
		a->peak_allocated = a->allocated;
	if (a->reserved > a->peak_reserved)
		a->peak_reserved = a->reserved;
	return 0;
}

int alloc_carve(struct alloc *a, int h, int n, const int64_t *size, const int8_t *used, int *out)
{
	set_erase(a, &a->free_[a->b[h].small], h, 1);
	return pieces(a, h, n, size, used, out);
}

int alloc_segment_carved(struct alloc *a, int small, int n, const int64_t *size, const int8_t *used, int *out)
{
	int64_t total = 0;
	int k, h;

	for (k = 0; k < n; k++)
		total += size[k];
	if ((h = new_block(a, small, a->next_addr, total, 1)) < 0)
		return -1;
	a->next_addr += total;
	a->reserved += total;
	a->segments++;
	return pieces(a, h, n, size, used, out);
}

/* garbage_collect_cached_blocks: unsplit large-pool blocks at least as old as
 * the average, until reserved memory is back under the threshold. */
static void garbage_collect(struct alloc *a)
{
	int64_t thr = (int64_t)(a->c.gc_threshold * (double)a->c.allowed), reclaimed = 0, age, target;
	double total_age = 0;
	int i, h, n, count = 0, freed = 1;

	if (a->c.expandable || a->reserved <= thr || (n = set_copy(a, &a->free_[LARGE])) < 0)
		return;
	target = a->reserved - thr;
	for (i = 0; i < n; i++)
		if (!is_split(a, a->scratch[i])) {
			total_age += (double)(a->gc_calls[LARGE] - a->gc_base[a->scratch[i]]);
			count++;
		} else {
			a->scratch[i] = -1;  /* never a candidate */
		}
	while (reclaimed < target && freed && count > 0) {
		double avg = total_age / count;
		freed = 0;
		for (i = 0; i < n; i++) {  /* past the target too, as PyTorch does */
			h = a->scratch[i];
			if (h < 0)
				continue;
			age = a->gc_calls[LARGE] - a->gc_base[h];
			if ((double)age >= avg) {
				freed = 1;
				reclaimed += a->b[h].size;
				total_age -= (double)age;
				count--;
				release_block(a, h);
				a->scratch[i] = -1;
			}
		}
	}
}

static inline int should_split(const struct alloc *a, int h, int64_t size)
{
	int64_t remaining = a->b[h].size - size;

	if (a->b[h].small || a->c.expandable)
		return remaining >= ALLOC_MIN_BLOCK;
	return (a->c.max_split <= 0 || size < a->c.max_split) && remaining > ALLOC_SMALL_SIZE;
}

int alloc_malloc(struct alloc *a, int64_t request)
{
	int64_t size = alloc_round(request);
	int pool = pool_of(size), h, r;

	if (a->nomem)
		return ALLOC_ESYS;
	h = get_free_block(a, pool, size);
	if (h < 0) {
		if (gc_on(a))
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

int alloc_probe(const struct alloc *a, int64_t request, int64_t *handed)
{
	int64_t size = alloc_round(request);
	int pool = pool_of(size), h;
	struct pos p;

	if (a->nomem || a->c.expandable || gc_on(a) || (h = find_free(a, pool, size, &p)) < 0)
		return 0;
	*handed = should_split(a, h, size) ? size : a->b[h].size;
	return 1;
}

void alloc_free(struct alloc *a, int h)
{
	int pool = a->b[h].small;

	a->b[h].allocated = 0;
	a->allocated -= a->b[h].size;
	try_merge(a, h, a->b[h].prev);
	try_merge(a, h, a->b[h].next);
	if (gc_on(a))
		a->gc_base[h] = a->gc_calls[pool];
	set_insert(a, &a->free_[pool], h, 1);
}

/* ---- lifetime ------------------------------------------------------------------------ */

void alloc_reset(struct alloc *a, const struct alloc_cfg *c)
{
	int i;

	a->c = *c;
	a->nb = 0;
	a->spare = -1;
	for (i = 0; i < 2; i++) {
		struct alloc_set *f = &a->free_[i];
		int k;
		while ((k = next_class(f, 0)) >= 0) {  /* empty only the used buckets */
			f->bk[k].n = 0;
			f->used[k / 64] &= ~((uint64_t)1 << (k % 64));
		}
		f->count = 0;
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
	free(a->gc_base);
	free(a->scratch);
	for (i = 0; i < 2; i++) {
		int c;
		for (c = 0; a->free_[i].bk && c < ALLOC_CLASSES; c++)
			free(a->free_[i].bk[c].v);
		free(a->free_[i].bk);
		free(a->free_[i].v);
		free(a->unmapped[i].v);
	}
	memset(a, 0, sizeof *a);
}
