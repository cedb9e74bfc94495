/*
 * record.c — one place that turns a scenario run into a store_run (see record.h).
 */
#include "record.h"

#include <stdio.h>
#include <stdlib.h>

#include "store.h"

int record_run(const char *db, const char *command, const struct scenario *s,
	       const char *const *sets, int nset, const char *device, const char *predicted,
	       const char *measured, const char *out, struct err *e)
{
	struct store st;
	struct store_run r = {0};
	char overrides[8192] = "";
	size_t used = 0;
	int i, rc;

	for (i = 0; i < nset && used < sizeof overrides; i++)
		used += (size_t)snprintf(overrides + used, sizeof overrides - used, "%s\n", sets[i]);
	r.command = command;
	r.scenario_path = s->file;
	r.scenario_text = s->text;
	r.scenario_hash = s->hash;
	r.overrides = nset ? overrides : NULL;
	r.device = device;
	r.predicted_json = predicted;
	r.measured_json = measured;
	r.output_json = out;
	rc = store_open(&st, db, e);
	if (!rc)
		rc = store_add_run(&st, &r, NULL, e);
	store_close(&st);
	return rc;
}
