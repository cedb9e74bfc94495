/*
 * search.h — trials of a scenario on the runtime: does micro-batch B fit, its
 * peak memory, the largest B that fits, and timed steps.
 *
 * Each trial starts from a clean state (strategy set up, steps run, all freed)
 * and every rank learns its outcome before the next one (strat_step agrees on
 * out-of-memory; the setup's outcome is agreed here).
 */
#ifndef SHARDCAST_SEARCH_H
#define SHARDCAST_SEARCH_H

#include <stdint.h>

#include "backend.h"
#include "scenario.h"

struct rt_trial {
	int fits;                  /* 1: the steps ran within the capacity */
	double peak;               /* bytes: the arena's peak on the most loaded rank/device */
	int peak_dev;              /* dp: the device that holds it */
	double loss;               /* mean loss of the last step */
};

/* Runs `steps` optimizer steps of s at micro-batch B (capacity = s->capacity,
 * or `capacity` when > 0). Returns 0 (fits says the outcome) or an error rc. */
int rt_trial(const struct scenario *s, struct backend *be, struct rt_comm *world, int64_t B,
	     int steps, double capacity, struct rt_trial *out, struct err *e);

/* The largest micro-batch that fits: grow (1, 2, 4, ...) until a trial fails,
 * bisect, then confirm that B fits and B + 1 does not. *best = 0 when not even
 * one sample fits; limit caps the growth. *trials counts the trials run. */
int rt_max_batch(const struct scenario *s, struct backend *be, struct rt_comm *world,
		 double capacity, int64_t limit, int64_t *best, int *trials, struct err *e);

/* Times steps at micro-batch B: `warmup` steps, then `n` timed ones (ranks
 * synchronised around each); *median gets the median step time (s). */
int rt_time_steps(const struct scenario *s, struct backend *be, struct rt_comm *world, int64_t B,
		  int warmup, int n, double *median, struct err *e);

#endif
