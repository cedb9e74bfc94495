/*
 * validate_main.c — `validate SCENARIO.ini`: run the scenario on the real
 * runtime, find the largest micro-batch that fits by trying, time steps, and
 * print (and store) measured beside predicted; `validate --calibrate` fits the
 * simulator's per-device parameters to every stored measurement of a device.
 *
 * Under mpirun every rank runs the same trials; rank 0 prints and stores.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "calib.h"
#include "predict.h"
#include "pyref.h"
#include "record.h"
#include "report.h"
#include "scenario.h"
#include "search.h"
#include "store.h"
#include "units.h"

#define MAX_SETS 64

static void usage(FILE *f)
{
	fprintf(f,
		"usage: validate SCENARIO.ini [options]\n"
		"       validate --calibrate [--device NAME] [--db FILE]\n"
		"\n"
		"Runs the scenario's model, strategy and batch on the real runtime: searches the\n"
		"largest micro-batch that fits (grow, bisect, confirm), measures the peak memory\n"
		"of the most loaded rank and the median step time, and prints them beside the\n"
		"simulator's predictions (framework = shardcast, the runtime's own profile).\n"
		"Several ranks: mpirun -np N validate ... (N = nodes x gpus_per_node).\n"
		"\n"
		"options:\n"
		"  --backend cpu|cuda|pytorch  the device backend (default cpu; cuda: one GPU per rank;\n"
		"                         pytorch: trace the scenario in real PyTorch on meta tensors and\n"
		"                         compare the framework = pytorch profile with it; make pyref-deps)\n"
		"  --attention eager|sdpa the attention PyTorch runs (--backend pytorch; default: the scenario's)\n"
		"  --batches A,B          the two micro-batches traced (--backend pytorch; default 1,2)\n"
		"  --prepare              (--backend pytorch) trace nothing: write the spec of a case whose\n"
		"                         result is not in the cache (build/pyref/cache) and print its line\n"
		"                         for runtime/pytorch/pyref.py --batch (STACK SPEC JSON CSV A,B)\n"
		"  --json                 print the validate JSON object of docs/CONTRACT.md\n"
		"  --db FILE              record the run (predicted and measured) in this SQLite database; the\n"
		"                         predictions use the device's latest calibration in it (named in the\n"
		"                         output); without --db no database is read\n"
		"  --no-calibration       predict with the catalog's efficiencies even with --db\n"
		"  --memory-limit SIZE    capacity per rank, e.g. 8MiB (default: the scenario's gpu_memory)\n"
		"  --set SECTION.KEY=VAL  override a scenario key (repeatable)\n"
		"  --emulate-world N      run rank 0 of an N-rank job alone (collectives become local\n"
		"                         copies of the same sizes): memory as one rank of N, not its time\n"
		"  --steps N              timed steps after warm-up (default 5; the median is reported)\n"
		"  --warmup N             untimed steps first (default 2)\n"
		"  --max-batch N          stop the search's growth at N (default 4096)\n"
		"  --calibrate            fit the simulator's parameters of --device to the stored runs of\n"
		"                         --db (default results/results.db): at most one parameter fewer\n"
		"                         than the runs, its error measured on runs held out of the fit\n"
		"  --device NAME          the device to calibrate (default cpu)\n"
		"  --version              print the version and exit\n"
		"  -h, --help             this help\n"
		"\n"
		"exit status: 0 success, 2 bad input (the message names file:line and the key), 1 internal error\n");
}

struct opts {
	const char *scenario, *db, *backend, *device, *attention;
	const char *sets[MAX_SETS];
	int nset, json, calibrate, emulate, steps, warmup, no_calib;
	double limit;          /* bytes, 0 = the scenario's */
	long max_batch;
	long batches[2];       /* --backend pytorch: micro-batches traced */
	int prepare;           /* --backend pytorch --prepare */
};

static int parse_args(int argc, char **argv, struct opts *o, struct err *e)
{
	static const struct option longs[] = {
		{"json", no_argument, NULL, 'j'}, {"set", required_argument, NULL, 's'},
		{"db", required_argument, NULL, 'd'}, {"backend", required_argument, NULL, 'b'},
		{"memory-limit", required_argument, NULL, 'm'}, {"emulate-world", required_argument, NULL, 'w'},
		{"steps", required_argument, NULL, 'n'}, {"warmup", required_argument, NULL, 'u'},
		{"max-batch", required_argument, NULL, 'x'}, {"calibrate", no_argument, NULL, 'c'},
		{"device", required_argument, NULL, 'D'}, {"version", no_argument, NULL, 'V'},
		{"no-calibration", no_argument, NULL, 'N'}, {"attention", required_argument, NULL, 'A'},
		{"batches", required_argument, NULL, 'B'}, {"prepare", no_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	char *end;
	int c;

	o->backend = "cpu";
	o->attention = NULL;  /* the scenario's [training] attention */
	o->device = "cpu";
	o->steps = 5;
	o->warmup = 2;
	o->max_batch = 4096;
	o->batches[0] = 1;
	o->batches[1] = 2;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'j': o->json = 1; break;
		case 's':
			if (o->nset == MAX_SETS)
				return err_set(e, ERR_INPUT, NULL, 0, "at most %d --set options", MAX_SETS);
			o->sets[o->nset++] = optarg;
			break;
		case 'd': o->db = optarg; break;
		case 'b': o->backend = optarg; break;
		case 'D': o->device = optarg; break;
		case 'A': o->attention = optarg; break;
		case 'P': o->prepare = 1; break;
		case 'B':
			if (sscanf(optarg, "%ld,%ld%c", &o->batches[0], &o->batches[1], &(char){0}) != 2 ||
			    o->batches[0] < 1 || o->batches[1] <= o->batches[0] || o->batches[1] > 1000000)
				return err_set(e, ERR_INPUT, NULL, 0, "--batches %s: expected two micro-batches "
					       "A,B with 1 <= A < B, e.g. 1,2", optarg);
			break;
		case 'c': o->calibrate = 1; break;
		case 'N': o->no_calib = 1; break;
		case 'm':
			if (units_parse(optarg, UNIT_BYTES, &o->limit, NULL, 0) || o->limit < 1)
				return err_set(e, ERR_INPUT, NULL, 0, "--memory-limit %s: expected a size such as 64MiB", optarg);
			break;
		case 'w': case 'n': case 'u': case 'x': {
			long v = strtol(optarg, &end, 10);
			if (*end || v < (c == 'u' ? 0 : 1) || v > 1000000)
				return err_set(e, ERR_INPUT, NULL, 0, "--%s %s: expected a whole number",
					       c == 'w' ? "emulate-world" : c == 'n' ? "steps" : c == 'u' ? "warmup" : "max-batch",
					       optarg);
			if (c == 'w') o->emulate = (int)v;
			else if (c == 'n') o->steps = (int)v;
			else if (c == 'u') o->warmup = (int)v;
			else o->max_batch = v;
			break;
		}
		case 'V': printf("shardcast validate %s\n", store_version()); return -1;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return ERR_INPUT;
		}
	}
	if (o->calibrate) {
		if (optind != argc)
			return err_set(e, ERR_INPUT, NULL, 0, "--calibrate takes no scenario file");
		return 0;
	}
	if (optind != argc - 1)
		return err_set(e, ERR_INPUT, NULL, 0, "expected one scenario file%s", optind < argc - 1 ? ", got several" : "");
	o->scenario = argv[optind];
	return 0;
}

/* What the runtime can run, checked before any trial. */
static int check_runnable(const struct scenario *s, const struct opts *o, const struct backend *be,
			  const struct rt_comm *world, struct err *e)
{
	const struct scn_training *t = &s->s.training;

	if (strcmp(be->name, "cpu") == 0 && strcmp(s->gpu.name, "cpu") != 0)
		return err_set(e, ERR_INPUT, s->file, 0, "[cluster] gpu = %s: the cpu backend runs scenarios with "
			       "gpu = cpu (set gpu_memory for its capacity)", s->gpu.name);
	if (t->precision == PREC_TF32 || (s->plan.mixed && !be->round))
		return err_set(e, ERR_INPUT, s->file, 0, "[training] precision = %s: the %s backend runs %s",
			       scenario_precision_name(t->precision), be->name,
			       be->round ? "fp32, bf16 and fp16 (tf32 is a matmul mode of NVIDIA GPUs)" : "fp32 only");
	if (t->tensor_parallel > 1 || t->offload != OFFLOAD_NONE)
		return err_set(e, ERR_INPUT, s->file, 0, "[training] %s: not implemented by the runtime",
			       t->tensor_parallel > 1 ? "tensor_parallel > 1" : "offload");
	if (s->plan.mech == MECH_DP && world->size != 1)
		return err_set(e, ERR_INPUT, s->file, 0, "strategy = dp is one process driving %lld devices; "
			       "run it without mpirun", (long long)s->world);
	if (s->plan.mech != MECH_DP && !o->emulate && world->size != s->world)
		return err_set(e, ERR_INPUT, s->file, 0, "the scenario has %lld ranks (nodes x gpus_per_node) but "
			       "%d were started: use mpirun -np %lld, or --emulate-world %lld",
			       (long long)s->world, world->size, (long long)s->world, (long long)s->world);
	if (o->emulate && (o->emulate != s->world || world->size != 1))
		return err_set(e, ERR_INPUT, NULL, 0, "--emulate-world %d: expected the scenario's %lld ranks, "
			       "in one process", o->emulate, (long long)s->world);
	return 0;
}

struct measured {
	int64_t max_batch;
	double peak, step_time, tokens_per_s, mfu;
	double fixed;              /* bytes the device holds with no arena block live (cuda) */
	int trials;
};

static int predict_at(struct scenario *s, int64_t B, double capacity, struct prediction *p,
		      const char *db, struct err *e)
{
	char set[64];
	int rc;

	snprintf(set, sizeof set, "training.micro_batch=%s", B > 0 ? "" : "auto");
	if (B > 0)
		snprintf(set, sizeof set, "training.micro_batch=%lld", (long long)B);
	rc = scenario_set(s, set, e);
	if (!rc) {
		snprintf(set, sizeof set, "cluster.gpu_memory=%.0f", capacity);
		rc = scenario_set(s, set, e);
	}
	if (!rc)
		rc = calib_apply_latest(db, s, e);
	return rc ? rc : predict_run(s, p, e);
}

static double rel(double measured, double predicted)
{
	return predicted != 0 ? (measured - predicted) / predicted : 0;
}

static char *output_json(const struct scenario *s, const struct backend *be, int world, int emulated,
			 const struct prediction *p, const struct measured *m, char **pred_json, char **meas_json)
{
	cJSON *root = cJSON_CreateObject(), *o;
	char *out, *pj = report_json(s, p);

	cJSON_AddStringToObject(root, "scenario", s->file);
	cJSON_AddStringToObject(root, "backend", be->name);
	cJSON_AddStringToObject(root, "device", be->device);
	cJSON_AddNumberToObject(root, "world_size", world);
	cJSON_AddNumberToObject(root, "emulated_world_size", emulated ? emulated : world);
	cJSON_AddItemToObject(root, "predicted", pj ? cJSON_Parse(pj) : cJSON_CreateNull());
	o = cJSON_AddObjectToObject(root, "measured");
	cJSON_AddNumberToObject(o, "max_micro_batch", (double)m->max_batch);
	if (be->device_used)  /* the cpu backend has no device to ask: not measured */
		cJSON_AddNumberToObject(o, "fixed_overhead_bytes", m->fixed);
	else
		cJSON_AddNullToObject(o, "fixed_overhead_bytes");
	if (m->max_batch > 0) {
		cJSON_AddNumberToObject(o, "peak_bytes", m->peak);
		cJSON_AddNumberToObject(o, "step_time_s", m->step_time);
		cJSON_AddNumberToObject(o, "tokens_per_s", m->tokens_per_s);
		cJSON_AddNumberToObject(o, "mfu", m->mfu);
	} else {  /* not even one sample fits: nothing measured (null, not 0) */
		cJSON_AddNullToObject(o, "peak_bytes");
		cJSON_AddNullToObject(o, "step_time_s");
		cJSON_AddNullToObject(o, "tokens_per_s");
		cJSON_AddNullToObject(o, "mfu");
	}
	cJSON_AddNumberToObject(o, "micro_batch", (double)(m->max_batch > 0 ? m->max_batch : 0));
	cJSON_AddNumberToObject(o, "emulated_world", emulated);
	*meas_json = cJSON_PrintUnformatted(o);
	o = cJSON_AddObjectToObject(root, "error");
	cJSON_AddNumberToObject(o, "max_micro_batch", (double)(m->max_batch - p->max_micro_batch));
	if (m->max_batch > 0)
		cJSON_AddNumberToObject(o, "peak_bytes_rel", rel(m->peak, p->mem.peak));
	else
		cJSON_AddNullToObject(o, "peak_bytes_rel");
	if (p->step.valid && m->step_time > 0)
		cJSON_AddNumberToObject(o, "step_time_rel", rel(m->step_time, p->step.time));
	else  /* not computed: nothing timed */
		cJSON_AddNullToObject(o, "step_time_rel");
	*pred_json = pj;
	out = cJSON_Print(root);
	cJSON_Delete(root);
	return out;
}

static void print_text(const struct scenario *s, const struct backend *be, int world, int emulated,
		       const struct prediction *p, const struct measured *m, double capacity)
{
	char a[32], b[32], c[32], cal[CFG_STR_MAX + 300];

	printf("shardcast validate — %s\n\n", s->file);
	printf("Runtime   backend %s, %d rank%s%s, %s%s%s, micro-batch search: %d trials\n", be->name,
	       world, world > 1 ? "s" : "", emulated ? " (rank 0 alone, an emulated world)" : "",
	       scenario_strategy_name(s->plan.strategy), s->plan.strategy == STRAT_FSDP ? " " : "",
	       s->plan.strategy == STRAT_FSDP ?
	       scenario_enum_name("training", "fsdp_sharding_strategy", s->plan.sharding) : "", m->trials);
	printf("Model     %s, seq_len %lld, activation checkpointing %s, grad_accum %lld\n", s->model.name,
	       (long long)s->seq_len, scenario_enum_name("training", "activation_checkpointing", s->s.training.recompute),
	       (long long)s->s.training.grad_accum);
	printf("Capacity  %s per rank\n", units_format(a, sizeof a, capacity, UNIT_BYTES));
	printf("Calibration %s\n\n", calib_describe(&s->calib, cal, sizeof cal));
	printf("                        %16s %16s %10s\n", "measured", "predicted", "error");
	printf("  max micro-batch       %16lld %16lld %+10lld\n", (long long)m->max_batch,
	       (long long)p->max_micro_batch, (long long)(m->max_batch - p->max_micro_batch));
	if (m->max_batch <= 0) {
		printf("\nNot even one sample fits: nothing to time.\n");
		return;
	}
	printf("  peak bytes at %-6lld  %16.0f %16.0f %+9.2f%%\n", (long long)m->max_batch, m->peak,
	       p->mem.peak, 100 * rel(m->peak, p->mem.peak));
	printf("  (peak)                %16s %16s\n", units_format(a, sizeof a, m->peak, UNIT_BYTES),
	       units_format(b, sizeof b, p->mem.peak, UNIT_BYTES));
	if (p->step.valid)
		printf("  step time             %16s %16s %+9.1f%%\n", units_format(c, sizeof c, m->step_time, UNIT_TIME),
		       units_format(a, sizeof a, p->step.time, UNIT_TIME), 100 * rel(m->step_time, p->step.time));
	printf("  tokens/s              %16.0f %16.0f\n", m->tokens_per_s, p->step.tokens_per_s);
	if (m->fixed > 0)
		printf("  fixed overhead        %16s %16s\n", units_format(a, sizeof a, m->fixed, UNIT_BYTES),
		       "(context, cuBLASLt, NCCL)");
	printf("  MFU                   %15.2f%% %15.2f%%\n", 100 * m->mfu, 100 * p->step.mfu);
	if (emulated)
		printf("\nEmulated world: the step time is rank 0's with local collectives (no network).\n");
}

static int record(const struct opts *o, const struct scenario *s, const struct backend *be,
		  const char *pred, const char *meas, const char *out, struct err *e)
{
	return record_run(o->db, "validate", s, o->sets, o->nset, be->device, pred, meas, out, e);
}

static int run(const struct opts *o, struct backend *be, struct rt_comm *mpiw, struct err *e)
{
	struct scenario s;
	struct prediction p, pmax;
	struct measured m = {0};
	struct rt_comm world = *mpiw;
	struct rt_trial t;
	char *out = NULL, *pj = NULL, *mj = NULL;
	double capacity, tokens;
	int rc;

	rc = scenario_load(&s, o->scenario, o->sets, o->nset, e);
	if (!rc && s.plan.engine != FW_SHARDCAST)  /* the runtime is shardcast's */
		rc = scenario_set(&s, "training.framework=shardcast", e);
	if (!rc)
		rc = check_runnable(&s, o, be, mpiw, e);
	if (rc)
		goto out;
	if (o->emulate)
		backend_emulated_world(&world, o->emulate);
	capacity = o->limit > 0 ? o->limit : s.capacity;
	rc = rt_max_batch(&s, be, &world, capacity, o->max_batch, &m.max_batch, &m.trials, e);
	if (!rc && m.max_batch > 0) {
		rc = rt_trial(&s, be, &world, m.max_batch, 2, capacity, &t, e);
		m.peak = t.peak;
	}
	if (!rc && m.max_batch > 0)
		rc = rt_time_steps(&s, be, &world, m.max_batch, o->warmup, o->steps, &m.step_time, e);
	/* after the steps every arena is empty: what the device still holds is the
	 * context, cuBLASLt's workspace and NCCL's buffers (lazily made by the
	 * steps' collectives) */
	if (!rc && be->device_used)
		m.fixed = (double)be->device_used(be);
	/* predictions: the max under the same capacity, then everything at the measured batch */
	if (!rc)
		rc = predict_at(&s, 0, capacity, &pmax, o->no_calib ? NULL : o->db, e);
	if (!rc)
		/* nothing fits: auto (0), so no micro-batch is invented and timed */
		rc = predict_at(&s, m.max_batch > 0 ? m.max_batch : 0, capacity, &p, o->no_calib ? NULL : o->db, e);
	if (rc)
		goto out;
	p.max_micro_batch = pmax.max_micro_batch;
	p.max_global_batch = pmax.max_global_batch;
	tokens = (double)m.max_batch * (double)s.dp * (double)s.s.training.grad_accum * (double)s.seq_len;
	if (m.step_time > 0) {
		m.tokens_per_s = tokens / m.step_time;
		m.mfu = p.flops_per_token * m.tokens_per_s / (s.gpu.peak[s.s.training.precision] * (double)s.world);
	}
	out = output_json(&s, be, mpiw->size, o->emulate, &p, &m, &pj, &mj);
	if (!out || !pj || !mj) {
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory writing JSON");
		goto out;
	}
	if (mpiw->rank == 0 && o->db)
		rc = record(o, &s, be, pj, mj, out, e);
	if (!rc && mpiw->rank == 0) {
		if (o->json)
			printf("%s\n", out);
		else
			print_text(&s, be, (int)s.world, o->emulate, &p, &m, capacity);
	}
out:
	free(out);
	free(pj);
	free(mj);
	scenario_free(&s);
	return rc;
}

/* --backend pytorch: the checkout is the folder above the binary's. */
static int run_pytorch(const struct opts *o, const char *argv0, struct err *e)
{
	struct pyref_opts po = {.scenario = o->scenario, .sets = o->sets, .nset = o->nset, .db = o->db,
		.attention = o->attention, .json = o->json, .prepare = o->prepare,
		.batches = {o->batches[0], o->batches[1]}};
	char root[4096];
	const char *slash = strrchr(argv0, '/');

	if (slash)
		snprintf(root, sizeof root, "%.*s/..", (int)(slash - argv0), argv0);
	else
		snprintf(root, sizeof root, "..");
	po.root = root;
	return pyref_validate(&po, e);
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	struct err e = {0};
	struct backend *be = NULL;
	struct rt_comm world = {0, 1, NULL, 0};
	int rc;

	rc = parse_args(argc, argv, &o, &e);
	if (rc < 0)
		return 0;
	if (!rc && o.calibrate) {
		rc = calib_run(o.db ? o.db : "results/results.db", o.device, stdout, &e);
	} else if (!rc && !strcmp(o.backend, "pytorch")) {
		rc = run_pytorch(&o, argv[0], &e);
	} else if (!rc && (o.prepare || o.batches[0] != 1 || o.batches[1] != 2)) {
		rc = err_set(&e, ERR_INPUT, NULL, 0, "--prepare and --batches go with --backend pytorch");
	} else if (!rc) {
		rc = backend_open(o.backend, &be, &world, &e);
		if (!rc)
			rc = run(&o, be, &world, &e);
	}
	if (rc && world.rank == 0)
		fprintf(stderr, "validate: error: %s\n", e.msg[0] ? e.msg : "failed");
	if (be)
		backend_close(be);
	return rc == RT_EOOM ? ERR_SYSTEM : rc;
}
