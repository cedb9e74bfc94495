/*
 * heap.c — one process-wide heap kept across evaluations (heap.h).
 * Source: mallopt(3); glibc malloc/malloc.c (M_MMAP_THRESHOLD's maximum,
 * HEAP_MAX_SIZE / 2 = 32 MiB on 64-bit; M_TRIM_THRESHOLD, M_TOP_PAD; the
 * main arena grows with sbrk from the current break and copes with a break
 * moved by someone else, its "foreign sbrk"); madvise(2) MADV_HUGEPAGE and
 * the kernel's Documentation/admin-guide/mm/transhuge.rst (a 2 MiB page is
 * faulted in at once where an aligned 2 MiB range of a madvised area is
 * touched, when /sys/kernel/mm/transparent_hugepage/enabled is "madvise" or
 * "always").
 */
#include "heap.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __GLIBC__
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

/* Largest mmap threshold glibc accepts on 64-bit (mallopt(3)): bytes. */
#define HEAP_MMAP_MAX (32 * 1024 * 1024)
/* A transparent huge page on x86-64 and arm64 with 4 KiB pages: bytes. */
#define HEAP_HUGE ((uintptr_t)2 * 1024 * 1024)
/* What the heap's first growth reserves: bytes (two huge pages; the 175B
 * bench's simulate peaks at 1.8 MB of heap, valgrind massif: it touches one). */
#define HEAP_SPAN (2 * HEAP_HUGE)

#ifdef __GLIBC__
/* What heap_huge asks for to make the arena grow: bytes. Under a page, so the
 * header malloc writes after it (the new top's) stays in the page below the
 * boundary; above the small requests a free bin might hold. */
#define HEAP_PROBE 3072
/* What heap_huge leaves of a started arena's top: bytes (above glibc's
 * MINSIZE, 32 on 64-bit, below HEAP_PROBE). */
#define HEAP_TOP_LEFT 128

/* Puts the main arena's next growth just below a 2 MiB boundary and asks for
 * huge pages over the HEAP_SPAN bytes above it: a simulate's heap is then
 * faulted in as one or two huge pages instead of hundreds of 4 KiB pages
 * (each fault costs about as much as a 4 KiB page of simulation work; most
 * of a whole process's kernel time, measured with perf: README, Speed).
 * malloc writes a chunk header as it grows the heap, before the range can be
 * madvised; a 2 MiB range already holding a 4 KiB page is not given a huge
 * page, so the growth starts a page below the boundary and the request that
 * makes it (HEAP_PROBE) ends inside that page. The skipped gap below is
 * address space only, never touched. In a dynamically linked process nothing
 * has called malloc before main and the arena starts at the break; in a
 * statically linked one glibc's start-up has (its dlopen support's search
 * paths), so the arena's top is first used up to HEAP_TOP_LEFT bytes and the
 * growth past it starts where the break was moved (glibc's "foreign sbrk":
 * the rest of the old top goes to the free bins). Call it before the
 * program's first malloc. Returns 0, or -1 when the break could not be moved,
 * the growth did not land there, or the kernel has no transparent huge pages
 * (the heap then grows as usual). */
static int heap_huge(void)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), cur = (uintptr_t)sbrk(0), gap, base;
	struct mallinfo2 mi = mallinfo2();
	void *fill = NULL, *probe;
	int rc = 0;

	if (cur == (uintptr_t)-1 || !page || page >= HEAP_HUGE)
		return -1;
	base = (cur + page + HEAP_HUGE - 1) / HEAP_HUGE * HEAP_HUGE;  /* first boundary past cur's page */
	gap = base - page - cur;
	if (gap && sbrk((intptr_t)gap) == (void *)-1)
		return -1;
	if (!mallopt(M_TOP_PAD, (int)HEAP_SPAN))
		return -1;
	if (mi.arena && mi.keepcost > 2 * HEAP_TOP_LEFT)
		fill = malloc(mi.keepcost - HEAP_TOP_LEFT);  /* the started arena's top, but HEAP_TOP_LEFT */
	probe = malloc(HEAP_PROBE);  /* the arena grows: one page below base, HEAP_SPAN above */
	if (!probe || (uintptr_t)probe >= base || (uintptr_t)probe + HEAP_PROBE > base ||
	    (uintptr_t)sbrk(0) < base + HEAP_SPAN || madvise((void *)base, HEAP_SPAN, MADV_HUGEPAGE))
		rc = -1;  /* it grew elsewhere, or no THP in this kernel: plain pages */
	free(probe);
	free(fill);
	return rc;
}
#endif

int heap_keep(void)
{
#ifdef __GLIBC__
	int ok = mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_MAX);

	ok &= mallopt(M_TRIM_THRESHOLD, INT_MAX);  /* trim the top only past 2 GiB free: keep what is freed */
	heap_huge();
	return ok ? 0 : -1;
#else
	return 0;
#endif
}
