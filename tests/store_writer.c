/*
 * store_writer.c — a results-store writer for tests/recommend.sh's crash and
 * concurrency tests (not installed).
 *
 *   store_writer DB RUNS ROWS [HOLD_FILE]
 *
 * Records RUNS runs (command 'test-writer', this process's id in the scenario
 * path), each with ROWS candidate rows written inside the run's transaction
 * (store_add_run's extra hook). With HOLD_FILE, after the first run's first
 * half of its rows it creates HOLD_FILE and sleeps inside the open transaction,
 * so that the test can kill it there with SIGKILL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "store.h"

struct ctx {
	int rows;
	const char *hold;
};

static int rows(sqlite3 *db, long long id, void *vctx)
{
	const struct ctx *c = vctx;
	sqlite3_stmt *q;
	int i, rc = 0;

	if (sqlite3_prepare_v2(db, "INSERT INTO candidates(run_id, cell, candidate, model, strategy, label, status)"
			       " VALUES (?, ?, 0, 'gpt2', 'ddp', 'ddp', 'ok')", -1, &q, NULL) != SQLITE_OK)
		return -1;
	for (i = 0; !rc && i < c->rows; i++) {
		if (c->hold && i == c->rows / 2) {
			FILE *f = fopen(c->hold, "w");
			if (f)
				fclose(f);
			for (;;)
				pause();  /* holding the transaction until killed */
		}
		sqlite3_reset(q);
		sqlite3_bind_int64(q, 1, id);
		sqlite3_bind_int(q, 2, i);
		rc = sqlite3_step(q) == SQLITE_DONE ? 0 : -1;
	}
	sqlite3_finalize(q);
	return rc;
}

int main(int argc, char **argv)
{
	struct store st;
	struct store_run r = {0};
	struct err e = {0};
	struct ctx c;
	char path[64];
	int i, n, rc;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: store_writer DB RUNS ROWS [HOLD_FILE]\n");
		return 2;
	}
	n = atoi(argv[2]);
	c.rows = atoi(argv[3]);
	c.hold = argc == 5 ? argv[4] : NULL;
	snprintf(path, sizeof path, "writer-%ld", (long)getpid());
	r.command = "test-writer";
	r.scenario_path = path;
	r.scenario_text = "[sweep]\n";
	r.device = "none";
	r.predicted_json = "{\"rows\": 1}";
	r.extra = rows;
	r.extra_ctx = &c;
	rc = store_open(&st, argv[1], &e);
	for (i = 0; !rc && i < n; i++) {
		r.scenario_hash = (unsigned long long)getpid() * 1000003ull + (unsigned)i;
		rc = store_add_run(&st, &r, NULL, &e);
	}
	store_close(&st);
	if (rc)
		fprintf(stderr, "store_writer: %s\n", e.msg);
	return rc;
}
