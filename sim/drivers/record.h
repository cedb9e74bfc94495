/*
 * record.h — recording a command's run of a scenario in the results store.
 */
#ifndef SHARDCAST_RECORD_H
#define SHARDCAST_RECORD_H

#include "err.h"
#include "scenario.h"

/* Writes one run of command on s (its text, hash and the nset --set overrides)
 * to the SQLite database at db, in one transaction: the predicted and measured
 * JSON objects (either may be NULL) flattened into rows, and out as the run's
 * output. Returns 0 or fills e. */
int record_run(const char *db, const char *command, const struct scenario *s,
	       const char *const *sets, int nset, const char *device, const char *predicted,
	       const char *measured, const char *out, struct err *e);

#endif
