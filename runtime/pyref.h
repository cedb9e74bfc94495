/*
 * pyref.h — `validate SCENARIO --backend pytorch`: the PyTorch reference.
 *
 * Writes the resolved scenario as JSON, runs runtime/pytorch/pyref.py (real
 * PyTorch + transformers on meta tensors, see its header) in the stack the
 * scenario's framework_version names (build/pyref/current or build/pyref/1.13,
 * made by `make pyref-deps`), replays the recorded allocation trace through
 * the caching-allocator emulator (sim/models/alloc.h), and prints and stores the
 * measurements beside the simulator's prediction for the same batches.
 */
#ifndef SHARDCAST_PYREF_H
#define SHARDCAST_PYREF_H

#include <stdint.h>

#include "err.h"

struct pyref_opts {
	const char *scenario;
	const char *const *sets;
	int nset;
	const char *db;         /* results database, NULL = none */
	const char *root;       /* the checkout (runtime/pytorch/pyref.py, build/pyref) */
	const char *attention;  /* eager | sdpa; NULL = the scenario's [training] attention */
	int json;
	int prepare;            /* only write the spec of a case not yet traced (pyref_cache.c)
				   and print its line for pyref.py --batch */
	int64_t batches[2];     /* micro-batches traced (the slope needs two) */
};

/* The cache entry of one tracer run (pyref_cache.c). */
struct pyref_cache {
	int on;                 /* 0: no cache (no directory, no sources to key on) */
	char dir[4096];
	char key[17];           /* 64-bit FNV-1a of the stack, spec, batches and tracer sources */
	char json[4200], csv[4200], spec[4200];
};

/* Fills c for a run of spec (JSON text) in stack at batches; makes the cache
 * directory. Returns c->on. */
int pyref_cache_open(struct pyref_cache *c, const char *root, const char *stack, const char *spec,
		     const int64_t batches[2]);

/* The cached tracer output (malloc'd, NUL-terminated) in *out: returns 1,
 * or 0 when the entry is not there. */
int pyref_cache_read(const struct pyref_cache *c, char **out);

/* Keeps out (the tracer's output) as the entry (its trace already written to
 * c->csv). Returns 0, or -1 when it cannot be written (the run goes on). */
int pyref_cache_store(const struct pyref_cache *c, const char *out);

/* Writes the entry's spec (for pyref.py --batch). Returns 0 or -1. */
int pyref_cache_spec(const struct pyref_cache *c, const char *spec);

/* Runs the reference for o; prints the comparison. Returns 0 or fills e
 * (ERR_INPUT: bad scenario, stack not installed, strategy the tracer cannot
 * run; nothing is stored then). */
int pyref_validate(const struct pyref_opts *o, struct err *e);

/* Replays a tracer CSV (action,id,bytes,...) through the emulated allocator
 * with capacity bytes; fills the peak allocated and reserved bytes. Returns 0
 * or fills e. */
int pyref_replay_csv(const char *path, int64_t capacity, int64_t *allocated, int64_t *reserved,
		     struct err *e);

#endif
