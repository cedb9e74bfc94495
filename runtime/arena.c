/*
 * arena.c — per-device memory arena (see arena.h).
 */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

static int host_alloc(void *ctx, void **p, size_t bytes)
{
	(void)ctx;
	return posix_memalign(p, 64, bytes) ? -1 : 0;
}

static void host_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

const struct arena_dev arena_host_dev = {host_alloc, host_free, NULL};

void arena_init(struct arena *a, const struct arena_dev *dev, size_t capacity, int id)
{
	memset(a, 0, sizeof *a);
	a->dev = *dev;
	a->capacity = capacity;
	a->id = id;
}

static int remember(struct arena *a, void *p, size_t bytes, const char *tag)
{
	if (a->nblk == a->capblk) {
		size_t n = a->capblk ? 2 * a->capblk : 64;
		struct arena_block *nb = realloc(a->blk, n * sizeof *nb);
		if (!nb)
			return -1;
		a->blk = nb;
		a->capblk = n;
	}
	a->blk[a->nblk++] = (struct arena_block){p, bytes, tag};
	return 0;
}

int arena_alloc(struct arena *a, void **p, size_t bytes, const char *tag, struct err *e)
{
	return arena_alloc_as(a, p, bytes, bytes, tag, e);
}

int arena_alloc_as(struct arena *a, void **p, size_t bytes, size_t phys, const char *tag, struct err *e)
{
	size_t r = arena_round(bytes);
	int rc;

	*p = NULL;
	if (r == 0)
		return 0;
	if (a->capacity && a->live + r > a->capacity)
		return err_set(e, RT_EOOM, NULL, 0,
			       "out of memory on device %d: %s needs %zu bytes, %zu of %zu in use",
			       a->id, tag, r, a->live, a->capacity);
	rc = a->dev.alloc(a->dev.ctx, p, phys > r ? arena_round(phys) : r);
	if (rc) {
		*p = NULL;
		if (rc == 1)
			return err_set(e, RT_EOOM, NULL, 0,
				       "out of memory on device %d: the device refused %zu bytes for %s "
				       "with %zu bytes in use in the arena", a->id, r, tag, a->live);
		return err_set(e, ERR_SYSTEM, NULL, 0, "device %d: allocating %zu bytes for %s failed",
			       a->id, r, tag);
	}
	if (remember(a, *p, r, tag)) {
		a->dev.free(a->dev.ctx, *p);
		*p = NULL;
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory tracking blocks");
	}
	a->live += r;
	a->nallocs++;
	if (a->live > a->peak) {
		a->peak = a->live;
		snprintf(a->peak_tag, sizeof a->peak_tag, "%s", tag);
	}
	if (a->trace)
		fprintf(a->trace, "+ %zu %zu %s\n", r, a->live, tag);
	return 0;
}

void arena_free(struct arena *a, void *p)
{
	size_t i;

	if (!p)
		return;
	/* recent blocks are freed first: search from the end */
	for (i = a->nblk; i-- > 0;) {
		if (a->blk[i].p != p)
			continue;
		a->live -= a->blk[i].bytes;
		if (a->trace)
			fprintf(a->trace, "- %zu %zu %s\n", a->blk[i].bytes, a->live, a->blk[i].tag);
		a->dev.free(a->dev.ctx, p);
		a->blk[i] = a->blk[--a->nblk];
		return;
	}
	abort();  /* not ours: a bug, never an input error */
}

void arena_release_all(struct arena *a)
{
	while (a->nblk)
		arena_free(a, a->blk[a->nblk - 1].p);
}

void arena_reset_peak(struct arena *a)
{
	a->peak = a->live;
	a->peak_tag[0] = '\0';
}

void arena_destroy(struct arena *a)
{
	arena_release_all(a);
	free(a->blk);
	a->blk = NULL;
	a->capblk = 0;
}
