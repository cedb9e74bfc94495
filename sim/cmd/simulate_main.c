/*
 * simulate_main.c — `simulate SCENARIO.ini`: predict memory, max batch, step
 * time and (with [failures]) the job's wall time for one scenario.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "jobrun.h"
#include "predict.h"
#include "record.h"
#include "report.h"
#include "scenario.h"
#include "step.h"
#include "store.h"
#include "heap.h"

#define MAX_SETS 64

static void usage(FILE *f)
{
	fprintf(f,
		"usage: simulate SCENARIO.ini [options]\n"
		"\n"
		"Predicts, for the scenario's model, cluster and training settings: memory per GPU\n"
		"and its breakdown, the largest micro-batch that fits, step time, throughput and\n"
		"MFU, and with a [failures] section the job's wall time and goodput.\n"
		"\n"
		"Paths: a path in the scenario (a model, device or link file, the [failures] catalog,\n"
		"hf_config, accelerate_config, deepspeed_config) is relative to the scenario file's\n"
		"folder, a path inside an imported file to that file's folder; a path given with\n"
		"--set is relative to the working directory.\n"
		"\n"
		"options:\n"
		"  --json                 print the JSON object of the contract (docs/CONTRACT.md) instead of the report\n"
		"  --set SECTION.KEY=VAL  override a scenario key (repeatable), e.g. --set training.strategy=fsdp\n"
		"  --db FILE              record the run (scenario, outputs) in this SQLite database, and use\n"
		"                         the device's latest calibration in it (the report names it); without\n"
		"                         --db no database is read: the catalog's efficiencies\n"
		"  --no-calibration       with --db, record the run but keep the catalog's efficiencies\n"
		"  --trace FILE           write a Chrome/Perfetto trace of the simulated step\n"
		"  --memory-timeline FILE write the memory timeline of the most loaded GPU as CSV\n"
		"  --plot FILE.png        plot ETTR against checkpoint interval, sync and async (needs [failures])\n"
		"  --keys                 print the reference of every scenario key (Markdown) and exit\n"
		"  --version              print the version and exit\n"
		"  -h, --help             this help\n"
		"\n"
		"exit status: 0 success, 2 bad input (the message names file:line and the key), 1 internal error\n");
}

struct opts {
	const char *scenario, *db, *trace, *timeline, *plot;
	const char *sets[MAX_SETS];
	int nset, json, no_calib;
};

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{"json", no_argument, NULL, 'j'}, {"set", required_argument, NULL, 's'},
		{"db", required_argument, NULL, 'd'}, {"trace", required_argument, NULL, 't'},
		{"memory-timeline", required_argument, NULL, 'm'}, {"keys", no_argument, NULL, 'k'},
		{"plot", required_argument, NULL, 'p'}, {"no-calibration", no_argument, NULL, 'n'},
		{"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'j': o->json = 1; break;
		case 's':
			if (o->nset == MAX_SETS) {
				fprintf(stderr, "simulate: at most %d --set options\n", MAX_SETS);
				return 2;
			}
			o->sets[o->nset++] = optarg;
			break;
		case 'd': o->db = optarg; break;
		case 't': o->trace = optarg; break;
		case 'm': o->timeline = optarg; break;
		case 'p': o->plot = optarg; break;
		case 'n': o->no_calib = 1; break;
		case 'k':
			printf("### Scenario keys\n\n");
			cfg_write_reference(scenario_keys(), stdout);
			return -1;
		case 'V': printf("shardcast simulate %s\n", store_version()); return -1;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "simulate: expected one scenario file%s\n\n",
			optind < argc - 1 ? ", got several" : "");
		usage(stderr);
		return 2;
	}
	o->scenario = argv[optind];
	return 0;
}

static int record(const struct opts *o, const struct scenario *s, const char *json, struct err *e)
{
	return record_run(o->db, "simulate", s, o->sets, o->nset, s->gpu.name, json, NULL, json, e);
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	struct scenario s;
	struct prediction p;
	struct err e = {0};
	char *json = NULL;
	int rc;

	heap_keep();  /* the max-batch search's evaluations reuse one heap (heap.h) */
	rc = parse_args(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	rc = scenario_load(&s, o.scenario, o.sets, o.nset, &e);
	if (!rc)  /* the device's latest calibration in --db (validate --calibrate), if any */
		rc = calib_apply_latest(o.no_calib ? NULL : o.db, &s, &e);
	if (!rc)
		rc = predict_run(&s, &p, &e);
	if (!rc && o.timeline)
		rc = predict_memory_timeline(&s, p.micro_batch, o.timeline, &e);
	if (!rc && (o.json || o.db)) {
		json = report_json(&s, &p);
		if (!json)
			rc = err_set(&e, ERR_SYSTEM, NULL, 0, "out of memory writing JSON");
	}
	if (!rc && o.db)
		rc = record(&o, &s, json, &e);
	if (!rc && o.trace)
		rc = step_trace(&s, p.step.micro_batch, o.trace, &e);
	if (!rc && o.trace && s.s.training.grad_accum > STEP_ACCUM_FULL)
		fprintf(stderr, "simulate: the trace shows %d of the step's %lld micro-steps: the first %d "
			"and the last (the others repeat the period)\n", STEP_ACCUM_FULL,
			(long long)s.s.training.grad_accum, STEP_ACCUM_FULL - 1);
	if (!rc && o.plot)
		rc = jobrun_plot(&s, &p, o.plot, &e);
	if (!rc) {
		if (o.json)
			printf("%s\n", json);
		else
			report_text(stdout, &s, &p);
		if (o.plot)
			fprintf(o.json ? stderr : stdout, "\nplot: wrote %s\n", o.plot);
	}
	if (rc)
		fprintf(stderr, "simulate: error: %s\n", e.msg);
	free(json);
	scenario_free(&s);
	return rc;
}
