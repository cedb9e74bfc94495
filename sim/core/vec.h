/*
 * vec.h — growing an array by doubling (the one resizing helper of sim/).
 */
#ifndef SHARDCAST_VEC_H
#define SHARDCAST_VEC_H

#include <stdlib.h>

/* Makes *p (an array of *cap elements of sz bytes) hold at least need
 * elements, doubling from first. Returns 0, or -1 when out of memory (then *p
 * and *cap are unchanged). */
static inline int vec_grow_from(void **p, int *cap, int need, size_t sz, int first)
{
	void *np;
	int ncap;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : first;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, (size_t)ncap * sz);
	if (!np)
		return -1;
	*p = np;
	*cap = ncap;
	return 0;
}

/* Elements a growing array starts with (vec_grow). */
#define VEC_FIRST 256

/* vec_grow_from doubling from VEC_FIRST elements. */
static inline int vec_grow(void **p, int *cap, int need, size_t sz)
{
	return vec_grow_from(p, cap, need, sz, VEC_FIRST);
}

#endif
