/*
 * results_main.c — `results list|show|export|merge`: read and combine the
 * SQLite results databases that simulate and validate write (--db).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results.h"
#include "store.h"

#define DEFAULT_DB "results/results.db"

static const char *const usage_main =
	"usage: results COMMAND [options]\n"
	"\n"
	"Reads and combines shardcast results databases (what simulate --db and validate --db write).\n"
	"\n"
	"commands:\n"
	"  list [--db FILE] [--limit N]          runs, newest first, with their key figures\n"
	"  show ID [--db FILE]                   one run: scenario text, predictions, measurements\n"
	"  export --csv FILE [--db FILE] [--measured-only]\n"
	"                                        predictions vs measurements per run and key, as CSV\n"
	"  merge OUT.db IN.db [IN.db...]         copy the runs and calibrations of the inputs into OUT\n"
	"\n"
	"'results COMMAND --help' says more. FILE defaults to " DEFAULT_DB ".\n"
	"exit status: 0 success, 2 bad input (missing, non-SQLite or corrupted file, unknown id),\n"
	"1 internal or system failure (a full disk, a read-only file system for a writer, ...)\n";

static const char *const usage_list =
	"usage: results list [--db FILE] [--limit N]\n"
	"\n"
	"One line per run, newest first: id, time (UTC), command, device, the predicted and measured\n"
	"largest micro-batch, step time and peak memory ('-' where a run has none), and the scenario.\n";

static const char *const usage_show =
	"usage: results show ID [--db FILE]\n"
	"\n"
	"Prints run ID: command, time, host, device, version, the scenario's path and hash, the run's\n"
	"own id (a UUID), --set overrides and text, and every stored prediction and measurement.\n";

static const char *const usage_export =
	"usage: results export --csv FILE [--db FILE] [--measured-only]\n"
	"\n"
	"Writes one CSV row per run and key: run_id, created_at, command, scenario, device, key,\n"
	"predicted, measured, rel_error = (predicted - measured) / |measured|. Measurements are\n"
	"paired with the prediction of the same meaning (step_time_s with step.time_s, peak_bytes\n"
	"with memory.peak_bytes, tokens_per_s and mfu with step.*). --measured-only keeps the rows\n"
	"that have a measurement. FILE '-' is standard output; otherwise the file is written whole\n"
	"or not at all.\n";

static const char *const usage_merge =
	"usage: results merge OUT.db IN.db [IN.db...]\n"
	"\n"
	"Copies every run of the inputs (with its predictions, measurements and outputs) and every\n"
	"calibration into OUT.db, creating it if needed. Runs get new row ids and keep their own id\n"
	"(a UUID; 'results show' prints it): a run whose id OUT.db already holds (or met in an earlier\n"
	"input) is skipped, so merging a database twice adds nothing. A corrupted input is refused.\n"
	"All in one transaction: on an error OUT.db is left as it was.\n";

struct opts {
	const char *db, *csv;
	long limit;
	int measured_only;
	int nargs;
	char **args;
};

/* Parses the options of command cmd; returns 0, -1 (help printed) or 2. */
static int parse(int argc, char **argv, const char *cmd, const char *usage, struct opts *o)
{
	static const struct option longs[] = {
		{"db", required_argument, NULL, 'd'}, {"limit", required_argument, NULL, 'l'},
		{"csv", required_argument, NULL, 'c'}, {"measured-only", no_argument, NULL, 'm'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	char *end;
	int c;

	o->db = DEFAULT_DB;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'd': o->db = optarg; break;
		case 'c': o->csv = optarg; break;
		case 'm': o->measured_only = 1; break;
		case 'l':
			o->limit = strtol(optarg, &end, 10);
			if (*end || o->limit < 1) {
				fprintf(stderr, "results %s: --limit %s: expected a whole number >= 1\n", cmd, optarg);
				return 2;
			}
			break;
		case 'h': fputs(usage, stdout); return -1;
		default: fputs(usage, stderr); return 2;
		}
	}
	o->nargs = argc - optind;
	o->args = argv + optind;
	return 0;
}

static int cmd_list(const struct opts *o, struct err *e)
{
	struct store st;
	int rc;

	if (o->nargs) {
		fprintf(stderr, "results list: unexpected argument '%s'\n%s", o->args[0], usage_list);
		return 2;
	}
	rc = store_open_readonly(&st, o->db, e);
	if (!rc)
		rc = results_list(&st, stdout, o->limit, e);
	store_close(&st);
	return rc;
}

static int cmd_show(const struct opts *o, struct err *e)
{
	struct store st;
	char *end;
	long long id;
	int rc;

	if (o->nargs != 1) {
		fprintf(stderr, "results show: expected one run id\n%s", usage_show);
		return 2;
	}
	id = strtoll(o->args[0], &end, 10);
	if (*end || !*o->args[0] || id < 1)
		return err_set(e, ERR_INPUT, NULL, 0, "run id '%s': expected a whole number >= 1", o->args[0]);
	rc = store_open_readonly(&st, o->db, e);
	if (!rc)
		rc = results_show(&st, id, stdout, e);
	store_close(&st);
	return rc;
}

static int cmd_export(const struct opts *o, struct err *e)
{
	struct store st;
	char tmp[1100];
	FILE *f = stdout;
	int rc;

	if (!o->csv || o->nargs) {
		fprintf(stderr, "results export: %s\n%s", o->csv ? "unexpected argument" : "--csv FILE is required",
			usage_export);
		return 2;
	}
	rc = store_open_readonly(&st, o->db, e);
	if (rc)
		return rc;
	if (strcmp(o->csv, "-") != 0) {   /* written whole, then renamed into place */
		snprintf(tmp, sizeof tmp, "%s.tmp%d", o->csv, (int)getpid());
		if (!(f = fopen(tmp, "w"))) {
			store_close(&st);
			return err_set(e, ERR_INPUT, o->csv, 0, "cannot write: %s", strerror(errno));
		}
	}
	rc = results_export_csv(&st, f, o->measured_only, e);
	store_close(&st);
	if (f == stdout)
		return rc;
	if (fclose(f) != 0 && !rc)
		rc = err_set(e, ERR_SYSTEM, o->csv, 0, "writing: %s", strerror(errno));
	if (!rc && rename(tmp, o->csv) != 0)
		rc = err_set(e, ERR_SYSTEM, o->csv, 0, "cannot write: %s", strerror(errno));
	if (rc)
		unlink(tmp);
	return rc;
}

static int cmd_merge(const struct opts *o, struct err *e)
{
	struct results_merged m;
	int rc;

	if (o->nargs < 2) {
		fprintf(stderr, "results merge: expected OUT.db and at least one IN.db\n%s", usage_merge);
		return 2;
	}
	rc = results_merge(o->args[0], (const char *const *)o->args + 1, o->nargs - 1, &m, e);
	if (!rc)
		printf("merged %d database%s into %s: %ld runs copied, %ld duplicates skipped, "
		       "%ld calibrations copied\n", o->nargs - 1, o->nargs > 2 ? "s" : "", o->args[0],
		       m.runs, m.duplicates, m.calibrations);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(const struct opts *, struct err *);
	} cmds[] = {{"list", cmd_list}, {"show", cmd_show}, {"export", cmd_export}, {"merge", cmd_merge}};
	const char *const usages[] = {usage_list, usage_show, usage_export, usage_merge};
	struct opts o = {0};
	struct err e = {0};
	size_t i;
	int rc;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_main, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (!strcmp(argv[1], cmds[i].name))
			break;
	if (i == sizeof cmds / sizeof cmds[0]) {
		fprintf(stderr, "results: unknown command '%s'\n\n%s", argv[1], usage_main);
		return 2;
	}
	rc = parse(argc - 1, argv + 1, cmds[i].name, usages[i], &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	rc = cmds[i].run(&o, &e);
	if (rc && e.code)
		fprintf(stderr, "results %s: error: %s\n", cmds[i].name, e.msg);
	return rc;
}
