/*
 * heap.h — one process-wide heap kept across evaluations.
 *
 * A simulate allocates and frees the same large arrays (task graphs, memory
 * tapes, the event queue) for every evaluation. glibc's malloc serves blocks
 * above its mmap threshold (128 KiB to start, raised as blocks are freed, at
 * most 32 MiB on 64-bit) with fresh mmap()s and returns them with munmap(),
 * and it trims the top of the heap back to the kernel when more than 128 KiB
 * is free there (mallopt(3), glibc malloc/malloc.c: DEFAULT_MMAP_THRESHOLD,
 * DEFAULT_TRIM_THRESHOLD). Each evaluation then touches fresh pages: a page
 * fault per 4 KiB, about a third of an in-process simulate of a 175B model on
 * 3,072 GPUs measured with perf on this project's bench (README, Speed).
 * heap_keep() makes the heap serve them (threshold at its maximum) and keep
 * what is freed (the top trimmed only past 2 GiB free), so the second
 * evaluation reuses the pages the first faulted in. It also starts the heap
 * on a 2 MiB boundary and asks the kernel for transparent huge pages over its
 * first 4 MiB (heap.c): the first evaluation then faults its heap in as one
 * or two huge pages, not hundreds of 4 KiB pages (a whole `bin/simulate`
 * process of the 175B bench: 620 page faults -> 240). It is the process's
 * choice: the programs' main() calls it, first, before anything allocates;
 * the library never does.
 */
#ifndef SHARDCAST_HEAP_H
#define SHARDCAST_HEAP_H

/* Sets the process's malloc to keep freed memory for reuse (above). Elsewhere
 * than glibc, does nothing. Returns 0, or -1 when malloc refused a setting. */
int heap_keep(void);

#endif
