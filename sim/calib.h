/*
 * calib.h — calibrating the simulator's per-device parameters against the
 * runtime's stored measurements (`validate --calibrate`), and using the latest
 * calibration of a device (`simulate`, `validate`).
 *
 * Fitted: the compute model's gemm_efficiency, gemm_half_dim,
 * memory_efficiency, kernel_gap, dispatch_native and dispatch_collective
 * (compute.h), the host side of eager PyTorch (dispatch_eager,
 * dispatch_autograd, dispatch_op, dispatch_unit_fwd/bwd: informed by runs of
 * framework pytorch, held at the catalog's by the others), and the intra-node link's latency α and bandwidth 1/β (the
 * collective cost α + β·bytes of coll.h). The fit minimises the squared log
 * ratios of simulated to measured step times over every stored validate run of
 * the device (GSL's trust-region nonlinear least squares, Levenberg-Marquardt,
 * finite-difference Jacobian), in log parameters, with a weak pull (weight
 * 0.05) toward the catalog values so parameters the runs do not inform stay put.
 * Runs in emulated worlds (their collectives are local) are left out.
 */
#ifndef SHARDCAST_CALIB_H
#define SHARDCAST_CALIB_H

#include <stdio.h>

#include "err.h"
#include "scenario.h"

enum { CALIB_NPARAM = 13 };

struct calib {
	double v[CALIB_NPARAM];    /* in the order of calib_names() */
};

/* Names of the fitted parameters (JSON keys of calibrations.params_json). */
const char *calib_name(int k);

/* The current values of s (catalog or applied calibration). */
void calib_get(const struct scenario *s, struct calib *c);
void calib_set(struct scenario *s, const struct calib *c);

/* Applies the latest calibration of s's device from db (NULL: results/results.db
 * when it exists). No database or no calibration: s is left as it is, 0. */
int calib_apply_latest(const char *db, struct scenario *s, struct err *e);

/* Fits the parameters of device to db's validate runs, stores the calibration
 * and prints the runs' errors before and after to out. */
int calib_run(const char *db, const char *device, FILE *out, struct err *e);

#endif
