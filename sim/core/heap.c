/*
 * heap.c — one process-wide heap kept across evaluations (heap.h).
 * Source: mallopt(3); glibc malloc/malloc.c (M_MMAP_THRESHOLD's maximum,
 * HEAP_MAX_SIZE / 2 = 32 MiB on 64-bit; M_TRIM_THRESHOLD).
 */
#include "heap.h"

#include <limits.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

/* Largest mmap threshold glibc accepts on 64-bit (mallopt(3)): bytes. */
#define HEAP_MMAP_MAX (32 * 1024 * 1024)

int heap_keep(void)
{
#ifdef __GLIBC__
	int ok = mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_MAX);

	ok &= mallopt(M_TRIM_THRESHOLD, INT_MAX);  /* trim the top only past 2 GiB free: keep what is freed */
	return ok ? 0 : -1;
#else
	return 0;
#endif
}
