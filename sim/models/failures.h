/*
 * failures.h — failure catalogs (models/failures/<name>.ini): what fails in a
 * training cluster, how often, and what it takes to get going again.
 *
 * One section per component ([faulty-gpu], [nic], [software-bug], ...). Each
 * has a rate per GPU-hour, node-hour or job-hour, given directly (rate) or as
 * the source data it is derived from (count_in_window failures seen in
 * window_hours on units_in_window GPUs or nodes); a distribution of the time
 * between failures (exponential, or Weibull with a shape); what a failure
 * needs (nothing but a restart, a node swap, or a repair in place) and the
 * repair time's lognormal distribution; whether it is planned; and how it is
 * detected (at once, or only when the collective timeout fires, for hangs).
 *
 * A job of G GPUs on N nodes sees a component's failures at rate × G, × N or
 * × 1 per hour (fail_job_rate). A Weibull component describes the time between
 * that component's failures in the whole job (a renewal process with mean
 * 1 / job rate): a superposition of thousands of per-GPU renewal processes is
 * close to Poisson anyway (Palm–Khintchine), and HPC field data fit Weibull at
 * the system level (Schroeder & Gibson, DSN 2006).
 */
#ifndef SHARDCAST_FAILURES_H
#define SHARDCAST_FAILURES_H

#include <limits.h>
#include <stdint.h>

#include "cfg.h"
#include "err.h"

#define FAIL_MAX 32        /* components per catalog */
#define FAIL_NAME_MAX 64

enum fail_per { FAIL_PER_GPU, FAIL_PER_NODE, FAIL_PER_JOB };
enum fail_dist { FAIL_EXPONENTIAL, FAIL_WEIBULL };
enum fail_repair { FAIL_REPAIR_NONE, FAIL_REPAIR_SWAP, FAIL_REPAIR_IN_PLACE };
enum fail_detect { FAIL_DETECT_IMMEDIATE, FAIL_DETECT_TIMEOUT };

struct fail_component {
	char name[FAIL_NAME_MAX];      /* the section name */
	char description[CFG_STR_MAX];
	int per;                       /* enum fail_per */
	double rate;                   /* failures per unit-hour (unit: GPU, node or job) */
	double count;                  /* source: failures seen in the window (0 = not given) */
	double window_hours;           /* source: length of the window (h) */
	double units;                  /* source: GPUs or nodes observed (per = gpu | node) */
	int dist;                      /* enum fail_dist */
	double shape;                  /* Weibull shape k (0 = not given) */
	int repair;                    /* enum fail_repair */
	int repair_dist;               /* 0 = lognormal */
	double repair_median;          /* s; lognormal median e^mu */
	double repair_sigma;           /* lognormal sigma of ln(repair time) */
	int planned;                   /* a planned stop: checkpoint first, nothing lost */
	int detection;                 /* enum fail_detect */
	char source[CFG_STR_MAX];
	int line;                      /* line of the section header in the file */
};

struct fail_catalog {
	char name[CFG_STR_MAX];        /* as the scenario named it */
	char path[PATH_MAX];           /* the file it was read from */
	int n;
	struct fail_component c[FAIL_MAX];
};

/* Loads models/failures/<name>.ini (or a path). where/line locate the scenario
 * key that named it. Every section is a component; rates given as counts are
 * converted. Errors name the catalog file, the line of the section and the key. */
int fail_load(const char *name_or_path, struct fail_catalog *cat, const char *where, int line,
	      struct err *e);

/* The component's failures per second in a job of gpus GPUs on nodes nodes. */
double fail_job_rate(const struct fail_component *c, int64_t gpus, int64_t nodes);

/* "gpu", "node", "job", ... for reports. */
const char *fail_per_name(int per);
const char *fail_repair_name(int repair);

/* The key table of a catalog entry (for tests and documentation). */
const struct cfg_table *fail_keys(void);

#endif
