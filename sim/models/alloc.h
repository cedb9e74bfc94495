/*
 * alloc.h — PyTorch's CUDA caching allocator (the native backend), emulated.
 *
 * The rules of c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator),
 * followed for one device and one stream:
 *  - a request is rounded up to a multiple of 512 B (kMinBlockSize; round_size
 *    without roundup_power2_divisions);
 *  - requests <= 1 MiB (kSmallSize) use the small pool, larger ones the large
 *    pool; each pool keeps its free blocks ordered by (size, address);
 *  - get_free_block: best fit, the smallest free block of the pool at least as
 *    large; with max_split_size set, a request below it never takes a block of
 *    max_split_size or more, and a request at or above it takes a block only if
 *    the block is less than 20 MiB (kLargeBuffer) larger;
 *  - when no block fits, cudaMalloc a segment (get_allocation_size): 2 MiB
 *    (kSmallBuffer) for the small pool, 20 MiB (kLargeBuffer) for requests below
 *    10 MiB (kMinLargeAlloc), else the request rounded up to 2 MiB (kRoundLarge);
 *  - should_split: a small-pool block is split when >= 512 B remain; a large one
 *    when the request is below max_split_size and more than 1 MiB remains
 *    (with expandable segments, whenever >= 512 B remain). An unsplit block is
 *    handed out whole: memory_allocated() counts its full size;
 *  - a free block is merged with free neighbours of its segment (free_block,
 *    try_merge_blocks) and goes back to its pool; nothing is returned to CUDA;
 *  - cudaMalloc fails when the device's capacity would be exceeded, or with a
 *    memory fraction set (set_fraction) the allowed maximum; then, in order:
 *    garbage_collect_cached_blocks (only with a memory fraction set and
 *    garbage_collection_threshold > 0, before the first cudaMalloc attempt,
 *    once reserved memory exceeds the threshold x the allowed maximum: unsplit
 *    large-pool blocks older than the average age), release_available_cached_blocks (only with max_split_size: free
 *    oversize blocks, the smallest that suffices or the largest first) and
 *    retry, release_cached_blocks (every unsplit free block of both pools) and
 *    retry; a failure after that is CUDA out of memory;
 *  - expandable_segments: one segment per pool whose pages (2 MiB small,
 *    20 MiB large) are mapped on demand at its lowest free address
 *    (try_allocate_expandable_block, map_block); on a failure the free pages are
 *    unmapped (unmap_block) before the retry.
 * Not emulated: several streams (record_stream, cross-stream reuse), CUDA graph
 * pools, roundup_power2_divisions, the free-memory callbacks, events.
 *
 * Reserved bytes = what the emulator holds from CUDA (segments, or mapped
 * pages); allocated bytes = the sizes of the blocks handed out.
 */
#ifndef SHARDCAST_ALLOC_H
#define SHARDCAST_ALLOC_H

#include <stdint.h>

#define ALLOC_MIN_BLOCK 512              /* kMinBlockSize */
#define ALLOC_SMALL_SIZE 1048576         /* kSmallSize */
#define ALLOC_SMALL_BUFFER 2097152       /* kSmallBuffer */
#define ALLOC_MIN_LARGE 10485760         /* kMinLargeAlloc */
#define ALLOC_LARGE_BUFFER 20971520      /* kLargeBuffer */
#define ALLOC_ROUND_LARGE 2097152        /* kRoundLarge */

struct alloc_cfg {
	int64_t capacity;      /* bytes the allocator may take from the device */
	int64_t max_split;     /* bytes: max_split_size; <= 0 = unlimited (the default) */
	int expandable;        /* expandable_segments:True */
	double gc_threshold;   /* garbage_collection_threshold (0..1); 0 = off */
	int64_t allowed;       /* bytes: set_per_process_memory_fraction x the device's memory
				  (allowed_memory_maximum); 0 = not set: no limit but capacity,
				  and no garbage collection */
};

struct alloc_block {           /* 32 bytes: two to a cache line */
	int64_t addr, size;    /* bytes */
	int prev, next;        /* neighbours in the segment, -1 none; an unused
				  block's next: the next unused one */
	int8_t allocated, small, mapped;
};

struct alloc_key {             /* a set's entry: its block and the block's sort key */
	int64_t k;             /* size, or address (a set by address alone) */
	int64_t addr;          /* address: the tie-break of a set by size */
	int h;
};

struct alloc_bucket {          /* the blocks of one size class, by (size, address) */
	struct alloc_key *v;
	int n, cap;
};

#define ALLOC_CLASSES 512      /* size classes: 8 per power of two */

struct alloc_set {             /* blocks, ordered (by size then address, or address) */
	struct alloc_key *v;   /* by address: the blocks, in order */
	int n, cap;
	struct alloc_bucket *bk;       /* by size: (ALLOC_CLASSES) buckets, ascending sizes */
	uint64_t used[ALLOC_CLASSES / 64];  /* by size: the non-empty buckets */
	int count;             /* by size: blocks in all buckets */
};

struct alloc {
	struct alloc_cfg c;
	struct alloc_block *b; /* (nb) every block ever made; unused ones are recycled */
	int nb, capb;
	int spare;             /* the latest unused block, -1 none (a stack through next) */
	int64_t *gc_base;      /* (capgc) per block, with garbage collection on: the pool's
				  get_free_block count when it was freed (0 never) */
	int capgc;
	struct alloc_set free_[2];     /* per pool (0 large, 1 small): free mapped blocks */
	struct alloc_set unmapped[2];  /* expandable segments: unmapped ranges, by address */
	int has_seg[2];        /* expandable: the pool's segment exists */
	int64_t seg_base[2];   /* expandable: where the pool's segment starts */
	int *scratch;          /* a copy of a free set while it is released */
	int capscratch;
	int nomem;             /* the host ran out of memory: every later call fails */
	int64_t next_addr;     /* where the next segment starts (virtual) */
	int64_t gc_calls[2];   /* get_free_block calls per pool (gc ages) */
	int64_t allocated, reserved;           /* bytes now */
	int64_t peak_allocated, peak_reserved; /* bytes */
	int64_t segments, retries, ooms;       /* cudaMalloc calls, retried mallocs, failures */
};

/* Starts an empty allocator under c. */
void alloc_init(struct alloc *a, const struct alloc_cfg *c);

/* Empties a (every block and segment forgotten), keeping its arrays. */
void alloc_reset(struct alloc *a, const struct alloc_cfg *c);

/* Frees a's arrays. */
void alloc_release(struct alloc *a);

/* The allocator's request size: size rounded up to 512 B (at least 512). */
int64_t alloc_round(int64_t size);

/* Allocates size bytes. Returns the block (>= 0), ALLOC_EOOM when the device
 * cannot provide it even after freeing the cache, or ALLOC_ESYS when the host is
 * out of memory. */
enum { ALLOC_EOOM = -1, ALLOC_ESYS = -2 };
int alloc_malloc(struct alloc *a, int64_t size);

/* Whether alloc_malloc(a, size) would take a cached block (*handed: the bytes
 * it would hand out), a left as it is; 0 when it would not, and with
 * expandable segments or garbage collection on (not known without the move).
 * A malloc so served and then freed leaves the allocator as it was: the
 * block comes back whole (its split-off rest merges back in) at its address,
 * in its place in the pool. */
int alloc_probe(const struct alloc *a, int64_t size, int64_t *handed);

/* Frees block h (from alloc_malloc). */
void alloc_free(struct alloc *a, int h);

/* Returns every unsplit free block to the device (torch.cuda.empty_cache()). */
void alloc_empty_cache(struct alloc *a);

/* What a's segments may hold in all: the capacity, or the fraction's maximum. */
int64_t alloc_limit(const struct alloc *a);

/* a's free blocks, their handles into h (room for cap), in the pools' (size,
 * address) order (small pool's first), or sorted by address (by_addr 1);
 * returns how many there are (more than cap: h holds the first cap), or -1
 * when the host has no memory to sort them. */
int alloc_free_blocks(struct alloc *a, int *h, int cap, int by_addr);

/* Free block h cut into n pieces of size[k] (summing to its size) from its
 * address on, used[k] allocated (as a malloc leaves a block) and the others
 * free; out[k] their handles. Returns 0 or -1 (host memory: a unusable). */
int alloc_carve(struct alloc *a, int h, int n, const int64_t *size, const int8_t *used, int *out);

/* A new segment (of the small pool: small 1) above every other, of the n
 * pieces' bytes, cut as alloc_carve cuts; reserved bytes and segments
 * counted. Returns 0 or -1 (host memory). */
int alloc_segment_carved(struct alloc *a, int small, int n, const int64_t *size, const int8_t *used, int *out);

#endif
