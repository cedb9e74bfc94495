/*
 * rtckpt.h — sharded checkpoints of a strategy's training state.
 *
 * Every rank writes its own file DIR/rank-NNNNN.bin holding what it keeps
 * between steps: its parameters (full or shard, as the strategy places them)
 * and optimizer states, plus the step counter (the data stream and dropout are
 * functions of the step, so nothing else is needed to continue bit for bit).
 * When all ranks are done, rank 0 writes DIR/manifest.txt; a checkpoint
 * without a manifest is incomplete and is not loaded. Files are written to a
 * temporary name and renamed, so a killed writer leaves no half file.
 *
 * sync: the step waits for the write. async: the state is copied to a host
 * buffer (the "staging" copy) and a background thread writes it; training
 * continues, and rtckpt_wait (or the next save) joins the writer.
 */
#ifndef SHARDCAST_RTCKPT_H
#define SHARDCAST_RTCKPT_H

#include <pthread.h>

#include "strategy.h"

struct rtckpt {
	char dir[512];
	pthread_t th;
	int active;                /* a writer thread runs */
	void *buf;                 /* host staging copy */
	size_t len;                /* bytes */
	char path[600];
	int rc;                    /* the writer's result */
	char msg[1024];
};

/* Saves s's state into dir (created if missing). async: returns after the
 * staging copy. Returns 0 or fills e. */
int rtckpt_save(struct rtckpt *c, struct strat *s, const char *dir, int async, struct err *e);

/* Waits for an async save to finish and completes it (manifest). */
int rtckpt_wait(struct rtckpt *c, struct strat *s, struct err *e);

/* Loads the checkpoint in dir into s (set up with the same strategy, model
 * and world). Returns 0 or fills e (ERR_INPUT when it does not match). */
int rtckpt_load(struct strat *s, const char *dir, struct err *e);

#endif
