/*
 * job.h — a training job over weeks, with failures: a discrete-event
 * simulation of one run (failures, detection, restart, checkpoints, spare
 * nodes and repairs) and a Monte Carlo over many runs.
 *
 * One run. Training needs `work` seconds of failure-free compute (or runs in a
 * fixed calendar `window`). Every `interval` seconds of training it saves a
 * checkpoint: training is blocked for `block` seconds (sync: the write; async:
 * the copy to host memory), and an async save then writes for `background`
 * seconds while training goes on; the next save waits for that write. A
 * checkpoint counts once it is complete (sync: the block ends; async: the
 * write ends); a final one is saved at the end of the work. The first save
 * after a start or a restart takes first_extra seconds longer (its plan is not
 * cached yet): blocked for a sync save, written longer for an async one.
 *
 * Failures come from the catalog's components, each a renewal process over
 * the job's hardware: exponential components are merged into one Poisson
 * process (the category of each failure drawn by rate), Weibull ones run their
 * own clocks. The clocks run while the hardware is busy — training,
 * checkpointing or restarting — and stop while the job is down (a failure not
 * yet detected, waiting for a node or a repair). A failure interrupts the
 * job: the work since the last complete
 * checkpoint is lost; the job is down until the failure is detected (at once,
 * or at the collective timeout for a hang); a failed node is swapped for a
 * free spare, or the job waits until a node comes back from repair (lognormal
 * repair times); a repair in place is waited for; then the restart takes
 * `restart` seconds (a failure during it starts it over). A planned stop saves
 * a checkpoint (block_sync) first and loses nothing.
 *
 * The failure history of a trial, on the axis of busy time, depends only on
 * the seed and the trial index (three GSL mt19937 streams: merged exponential
 * clock, Weibull clocks, and categories and repair times), not on the interval
 * or the mode: comparisons between intervals use common random numbers, and
 * trials can run in any order.
 *
 * Closed forms (for exponential failures, MTBF M, checkpoint cost δ, restart
 * R, solve time T_s): Young (1974) τ = √(2δM); Daly (2006, FGCS 22(3)) τ =
 * √(2δM)·[1 + ⅓√(δ/2M) + (1/9)(δ/2M)] − δ for δ < 2M, else M; and Daly's
 * expected wall time T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ.
 */
#ifndef SHARDCAST_JOB_H
#define SHARDCAST_JOB_H

#include <stdint.h>

#include "err.h"
#include "failures.h"

struct job_component {
	double rate;          /* failures per s in this job */
	int dist;             /* enum fail_dist */
	double shape;         /* Weibull shape k */
	double scale;         /* s, Weibull scale: the mean time between failures is 1 / rate */
	int repair;           /* enum fail_repair */
	double repair_mu;     /* ln s: lognormal location of the repair time */
	double repair_sigma;  /* lognormal sigma */
	int planned;
	double detect;        /* s from the failure until the job notices it */
};

struct job_params {
	double work;          /* s of failure-free training to complete; 0 = window mode */
	double window;        /* s of calendar time to simulate (window mode) */
	double interval;      /* s of training between checkpoints */
	double block;         /* s training is blocked per checkpoint */
	double background;    /* s an async save writes after the block; 0 = sync */
	double block_sync;    /* s of the save before a planned stop */
	double first_extra;   /* s the first save after a start or restart takes longer
				 (sync: blocked; async: written in the background) */
	double restart;       /* s from detection (and a node) to training again */
	int64_t spares;       /* hot spare nodes */
	int64_t trials;
	uint64_t seed;
	int no_skip;          /* 1: simulate every checkpoint as events (tests) */
	void (*tick)(void *ctx, int64_t trial); /* called before each trial (progress); NULL: none */
	void *tick_ctx;
	int n;
	struct job_component c[FAIL_MAX];
};

struct job_stats {
	int64_t trials;
	double wall;          /* s, mean over trials */
	double wall_sd;       /* s, standard deviation over trials */
	double wall_lo, wall_hi;     /* s, 95% interval of the mean */
	double wall_p025, wall_p975; /* s, 2.5% and 97.5% quantiles of the trials (when asked) */
	double useful;        /* s of training kept, mean */
	double useful_lo, useful_hi; /* 95% interval of the mean */
	double ettr;          /* useful / wall (ratio of the means) */
	double interruptions, unexpected, planned; /* per run */
	double lost;          /* s of training lost per run */
	double ckpt;          /* s blocked by checkpoints per run */
	double down;          /* s of detection, waiting and restarts per run */
	double checkpoints;   /* completed checkpoints per run */
	double waits;         /* times per run the job waited for a node or a repair */
	double by_comp[FAIL_MAX]; /* interruptions per run by component */
};

/* A run that lasts more than JOB_MAX_STRETCH times its failure-free work is
 * given up (ETTR below 0.1%): failures outpace restarts and checkpoints. */
#define JOB_MAX_STRETCH 1000.0

struct job_sim;

/* A workspace for p's trials (generators, repair queue, per-trial results):
 * everything a run needs is allocated here, none of it per trial. */
int job_sim_new(struct job_sim **w, const struct job_params *p, struct err *e);
void job_sim_free(struct job_sim *w);

/* Runs p->trials trials of p into st (quantiles: also the 2.5/97.5% ones).
 * Errors: a run past JOB_MAX_STRETCH times its work, more nodes in repair than
 * the queue holds. */
int job_sim_run(struct job_sim *w, const struct job_params *p, int quantiles, struct job_stats *st,
		struct err *e);

/* The interval that minimises the expected wall time per unit of training
 * kept (1 / ETTR), into *best (s). The Monte Carlo estimate is taken on a
 * log grid (13 points, x/4 to x4) around Daly's interval with common random
 * numbers, re-centred when the best point is at an edge; the 7 points around
 * the best are smoothed by a least-squares fit of A/τ + B + Cτ + D·q(τ),
 * q(τ) = (e^{τ/M} − 1 − τ/M − τ²/2M²)/τ (a form in which Daly's T_w is
 * exact, ≈ a quadratic for τ ≪ M), and the fit is minimised with GSL's
 * Brent minimiser within a grid step of the best point. An async save is
 * never searched below its write time: saving more often only waits for the
 * write. p->interval is left as it was. */
int job_optimize(struct job_sim *w, const struct job_params *p, double *best, struct err *e);

/* s: mean time between unexpected failures of the job (INFINITY: none). */
double job_mtbf(const struct job_params *p);

double job_young(double delta, double mtbf);
double job_daly(double delta, double mtbf);
double job_daly_wall(double work, double interval, double delta, double restart, double mtbf);

#endif
