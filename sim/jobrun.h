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

/* Runs the job model of s (the interval search when it is auto) into pr->job. */
int jobrun_predict(const struct scenario *s, struct prediction *pr, struct err *e);

/* Writes png: ETTR against checkpoint interval for sync and async saves
 * (gnuplot, pngcairo). pr->job must be valid. */
int jobrun_plot(const struct scenario *s, const struct prediction *pr, const char *png,
		struct err *e);

#endif
