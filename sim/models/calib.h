/*
 * calib.h — calibrating the simulator's per-device parameters against the
 * runtime's stored measurements (`validate --calibrate`), and using the latest
 * calibration of a device (`simulate`, `validate`, `recommend` with --db).
 *
 * Fitted: the compute model's gemm_efficiency, gemm_half_dim,
 * memory_efficiency, kernel_gap, dispatch_native and dispatch_collective
 * (compute.h), the host side of eager PyTorch (dispatch_eager,
 * dispatch_autograd, dispatch_op, dispatch_unit_fwd/bwd: informed by runs of
 * framework pytorch), and the intra-node link's latency α and bandwidth 1/β
 * (the collective cost α + β·bytes of coll.h), those of them the runs inform: a
 * parameter whose 10% change moves no run's simulated step time by more than
 * CALIB_INFORMS is kept at the catalog's value, and of the others, most
 * informative first, at most one fewer than the runs are fitted (a fit has
 * more measurements than parameters; one run is refused). The fit minimises
 * the squared log ratios of simulated to measured step times over the
 * device's stored validate runs (GSL's trust-region nonlinear least squares,
 * Levenberg-Marquardt, finite-difference Jacobian), in log parameters, with a
 * weak pull (weight 0.05) toward the catalog values. Runs in emulated worlds
 * (their collectives are local) are left out.
 *
 * Its error is measured on runs held out of the fit (cross-validation):
 * leave-one-out up to CALIB_LOO_MAX runs, else CALIB_FOLDS folds; each run is
 * predicted by a fit to the others. Stored: n_points (the runs), error_before
 * (median |error| at the catalog's values), error_after (the held-out median
 * |error|), and params_json with every parameter, "fitted" (the names fitted),
 * "heldout" (how) and "in_sample_error".
 */
#ifndef SHARDCAST_CALIB_H
#define SHARDCAST_CALIB_H

#include <stdio.h>

#include "err.h"
#include "scenario.h"

enum { CALIB_NPARAM = 13 };

#define CALIB_INFORMS 1e-4   /* relative step-time change of a 10% parameter change */
#define CALIB_LOO_MAX 10     /* leave-one-out up to this many runs */
#define CALIB_FOLDS 5        /* folds beyond */

struct calib {
	double v[CALIB_NPARAM];    /* in the order of calib_names() */
};

/* Names of the fitted parameters (JSON keys of calibrations.params_json). */
const char *calib_name(int k);

/* The current values of s (catalog or applied calibration). */
void calib_get(const struct scenario *s, struct calib *c);
void calib_set(struct scenario *s, const struct calib *c);

/* Applies the latest calibration of s's device from db and describes it in
 * s->calib. db NULL (no database named: none is read, so that the same
 * command prints the same numbers in any directory), a database not yet
 * written, or no calibration of the device: s is left as it is and
 * s->calib.applied is 0. */
int calib_apply_latest(const char *db, struct scenario *s, struct err *e);

/* One line for reports: "cpu, fitted 2025-01-01T00:00:00Z to 10 runs,
 * held-out error 5.2% (leave-one-out); #3 of results.db", or "none: ...". */
const char *calib_describe(const struct scn_calibration *c, char *buf, size_t n);

/* Fits the parameters of device to db's validate runs, measures the error on
 * held-out runs, stores the calibration and prints the runs' errors (catalog,
 * fitted, held out) to out. Fewer than 2 runs is ERR_INPUT. */
int calib_run(const char *db, const char *device, FILE *out, struct err *e);

#endif
