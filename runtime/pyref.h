/*
 * pyref.h — `validate SCENARIO --backend pytorch`: the PyTorch reference.
 *
 * Writes the resolved scenario as JSON, runs runtime/pytorch/pyref.py (real
 * PyTorch + transformers on meta tensors, see its header) in the stack the
 * scenario's framework_version names (build/pyref/current or build/pyref/1.13,
 * made by `make pyref-deps`), replays the recorded allocation trace through
 * the caching-allocator emulator (sim/alloc.h), and prints and stores the
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
	int64_t batches[2];     /* micro-batches traced (the slope needs two) */
};

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
