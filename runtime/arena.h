/*
 * arena.h — the memory arena of one device (one per rank; dp keeps one per
 * device). Every device buffer of the runtime is allocated through it.
 *
 * What it counts is the contract the memory model predicts (framework =
 * shardcast): each allocation is rounded up to ARENA_ALIGN bytes and counted
 * from the moment it is allocated until it is freed; live and peak are exact
 * byte counts of those rounded sizes. A request that would take live above the
 * capacity fails with RT_EOOM and changes nothing, so a trial can unwind (free
 * what it holds, or arena_release_all) and the next trial starts clean.
 *
 * The arena is a real allocator: it obtains each block from the device's
 * allocator (malloc on the CPU backend, cudaMalloc on CUDA) and keeps a table
 * of the live blocks, so nothing leaks when a trial is abandoned.
 */
#ifndef SHARDCAST_ARENA_H
#define SHARDCAST_ARENA_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

enum { ARENA_ALIGN = 256 };    /* bytes: rounding of every allocation */
enum { RT_EOOM = 3 };          /* rc of an allocation beyond the capacity */

/* How the arena obtains device memory. */
struct arena_dev {
	int (*alloc)(void *ctx, void **p, size_t bytes);  /* 0, 1 = the device is full, -1 */
	void (*free)(void *ctx, void *p);
	void *ctx;
};

struct arena_block {
	void *p;
	size_t bytes;              /* rounded */
	const char *tag;           /* static string: what the block holds */
};

struct arena {
	struct arena_dev dev;
	size_t capacity;           /* bytes; 0 = unlimited */
	size_t live, peak;         /* bytes (rounded sizes) */
	size_t nallocs;            /* allocations since init */
	struct arena_block *blk;   /* live blocks */
	size_t nblk, capblk;
	char peak_tag[48];         /* the allocation that set the peak */
	FILE *trace;               /* optional: one line per event "+|- bytes live tag" */
	int id;                    /* device index, for messages */
};

/* Rounded size of a request: what live/peak count. */
static inline size_t arena_round(size_t bytes)
{
	return (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

void arena_init(struct arena *a, const struct arena_dev *dev, size_t capacity, int id);

/* Allocates bytes (rounded up) for tag. Returns 0, RT_EOOM when the capacity
 * would be exceeded (e says how much was asked and held), or ERR_SYSTEM when
 * the device itself refuses for another reason; RT_EOOM also when the device
 * is full before the capacity is reached (a real GPU's memory minus what the
 * process holds outside the arena), so a max-batch search survives either
 * limit. A request of 0 bytes gives *p = NULL. */
int arena_alloc(struct arena *a, void **p, size_t bytes, const char *tag, struct err *e);

/* arena_alloc of a tensor whose storage is emulated: bytes (rounded) are
 * counted, as a device of that dtype would hold them, while the device gives
 * max(bytes, phys) (a 16-bit tensor kept in fp32 on the CPU backend, its
 * values rounded to the 16-bit type after each write; backend.h round). */
int arena_alloc_as(struct arena *a, void **p, size_t bytes, size_t phys, const char *tag, struct err *e);

/* Frees a block of this arena (NULL is ignored). */
void arena_free(struct arena *a, void *p);

/* Frees every live block (unwinding a failed trial). */
void arena_release_all(struct arena *a);

/* Starts a new peak measurement at the current live bytes. */
void arena_reset_peak(struct arena *a);

/* Releases everything and the block table. */
void arena_destroy(struct arena *a);

/* The malloc-backed device of the CPU backend (64-byte aligned). */
extern const struct arena_dev arena_host_dev;

#endif
