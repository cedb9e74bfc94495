/*
 * jobrun.h — the job model applied to a scenario: its [failures], [checkpoint]
 * and [job] sections, the step time and the model size turned into a job
 * (job.h), run, and reported in struct job_result; and the ETTR-against-
 * interval plot of `simulate --plot`.
 */
#ifndef SHARDCAST_JOBRUN_H
#define SHARDCAST_JOBRUN_H

#include "ckpt.h"
#include "err.h"
#include "job.h"
#include "predict.h"
#include "scenario.h"

/* The job of scenario s (which has [failures]) in checkpoint mode mode
 * (CKPT_SYNC | CKPT_ASYNC), its checkpoint cost into c and its step time (s)
 * into *step. The step time is [job] step_time, else the step model's
 * (pr->step); neither is an error. p->interval is the scenario's interval
 * rounded up to whole steps, or 0 when it is auto. */
int jobrun_params(const struct scenario *s, const struct prediction *pr, int mode,
		  struct job_params *p, struct ckpt_cost *c, double *step, struct err *e);

/* Runs the job model of s (the interval search when it is auto) into pr->job.
 *
 * The work is bounded before anything runs, from the expected interruptions
 * of one run (every component's rate, planned ones too, times the expected
 * wall time: Daly's T_w at the interval, or the window) and a trial's fixed
 * cost (JOBRUN_TRIAL_COST interruptions' worth: seeding its generators):
 *  - a job whose expected wall time is more than JOB_MAX_STRETCH times its
 *    work (ETTR below 0.1%) is an error: it would not finish in any useful
 *    sense (failures outpace restarts, or a step is far longer than the MTBF);
 *  - a run of more than JOBRUN_MAX_PER_RUN interruptions is an error naming
 *    the job's length ([job] train_tokens, steps or wall_days);
 *  - trials x (interruptions + cost) above JOBRUN_MAX_WORK (about a minute on
 *    one core) is an error naming [failures] trials and the most it may be;
 *  - the auto search evaluates each interval on at most JOBRUN_SEARCH_TRIALS
 *    trials and JOBRUN_SEARCH_WORK of work (common random numbers keep the
 *    comparison between intervals fair); the report says when that is fewer
 *    than [failures] trials.
 * A run that lasts more than a second shows its progress on stderr when it is
 * a terminal (progress.h). */
#define JOBRUN_TRIAL_COST 6.0
#define JOBRUN_MAX_PER_RUN 1e6
#define JOBRUN_MAX_WORK 6e7
#define JOBRUN_SEARCH_TRIALS 1000
#define JOBRUN_SEARCH_WORK 5e5
int jobrun_predict(const struct scenario *s, struct prediction *pr, struct err *e);

/* Writes png: ETTR against checkpoint interval for sync and async saves
 * (gnuplot, pngcairo). pr->job must be valid. */
int jobrun_plot(const struct scenario *s, const struct prediction *pr, const char *png,
		struct err *e);

#endif
