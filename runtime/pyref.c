/*
 * pyref.c — `validate --backend pytorch` (see pyref.h): the spec the tracer
 * reads, the run of runtime/pytorch/pyref.py, the replay of its trace through
 * the caching-allocator emulator, and the comparison with the simulator.
 */
#include "pyref.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "graph.h"
#include "memory.h"
#include "model.h"
#include "predict.h"
#include "record.h"
#include "report.h"
#include "scenario.h"
#include "units.h"

/* The name of model field value v (an enum key of model files). */
static const char *model_enum(const char *key, int v)
{
	const struct cfg_table *t = model_keys();
	int k = cfg_index(t, "model", key);

	return k >= 0 && t->keys[k].choices ? t->keys[k].choices[v] : "?";
}

/* FSDP2's settings in the spec (runtime/pytorch/fsdp2.py maps them to
 * fully_shard's arguments): reshard_after_forward default, true, false or N. */
static void fsdp2_json(cJSON *x, const struct scenario *s)
{
	const struct scn_training *t = &s->s.training;
	int64_t r = t->fsdp_reshard_after_forward;

	cJSON_AddNumberToObject(x, "fsdp_version", (double)t->fsdp_version);
	if (r == -1)
		cJSON_AddStringToObject(x, "fsdp_reshard_after_forward", "default");
	else if (r == -2 || r == 0)
		cJSON_AddBoolToObject(x, "fsdp_reshard_after_forward", r == -2);
	else
		cJSON_AddNumberToObject(x, "fsdp_reshard_after_forward", (double)r);
	cJSON_AddStringToObject(x, "fsdp_reduce_dtype", scenario_enum_name("training", "fsdp_reduce_dtype", t->fsdp_reduce_dtype));
}

/* The tracer's spec: the resolved model and training settings. */
static char *spec_json(const struct scenario *s, const struct pyref_opts *o)
{
	const struct model *m = &s->model;
	const struct scn_training *t = &s->s.training;
	cJSON *r = cJSON_CreateObject(), *x = cJSON_AddObjectToObject(r, "model");
	char *out;

	cJSON_AddStringToObject(x, "family", model_enum("family", m->family));
	cJSON_AddStringToObject(x, "activation", model_enum("activation", m->activation));
	cJSON_AddStringToObject(x, "norm", model_enum("norm", m->norm));
	cJSON_AddStringToObject(x, "positions", model_enum("positions", m->positions));
	cJSON_AddNumberToObject(x, "vocab", (double)m->vocab);
	cJSON_AddNumberToObject(x, "hidden", (double)m->hidden);
	cJSON_AddNumberToObject(x, "layers", (double)m->layers);
	cJSON_AddNumberToObject(x, "encoder_layers", (double)m->encoder_layers);
	cJSON_AddNumberToObject(x, "heads", (double)m->heads);
	cJSON_AddNumberToObject(x, "kv_heads", (double)m->kv_heads);
	cJSON_AddNumberToObject(x, "head_dim", (double)m->head_dim);
	cJSON_AddNumberToObject(x, "ffn", (double)m->ffn);
	cJSON_AddNumberToObject(x, "max_positions", (double)m->max_positions);
	cJSON_AddNumberToObject(x, "relative_buckets", (double)m->relative_buckets);
	cJSON_AddNumberToObject(x, "type_vocab", (double)m->type_vocab);
	cJSON_AddNumberToObject(x, "qkv_bias", m->qkv_bias);
	cJSON_AddNumberToObject(x, "tied_embeddings", m->tied_embeddings);
	cJSON_AddNumberToObject(r, "dropout", s->dropout);
	cJSON_AddNumberToObject(r, "seq_len", (double)s->seq_len);
	cJSON_AddNumberToObject(r, "target_len", (double)s->target_len);
	cJSON_AddNumberToObject(r, "world", (double)s->world);
	cJSON_AddNumberToObject(r, "dp", (double)s->dp);
	cJSON_AddNumberToObject(r, "gpus_per_node", (double)s->s.cluster.gpus_per_node);
	cJSON_AddStringToObject(r, "attention", o->attention);
	x = cJSON_AddObjectToObject(r, "training");
	cJSON_AddStringToObject(x, "strategy", scenario_strategy_name(s->plan.strategy));
	cJSON_AddStringToObject(x, "precision", scenario_precision_name(t->precision));
	cJSON_AddStringToObject(x, "optimizer", scenario_enum_name("training", "optimizer", t->optimizer));
	cJSON_AddStringToObject(x, "recompute", scenario_enum_name("training", "activation_checkpointing", t->recompute));
	cJSON_AddStringToObject(x, "offload", scenario_enum_name("training", "offload", t->offload));
	cJSON_AddNumberToObject(x, "grad_accum", (double)t->grad_accum);
	cJSON_AddBoolToObject(x, "no_sync", s->plan.no_sync);  /* resolved: plan.h */
	cJSON_AddNumberToObject(x, "tensor_parallel", (double)t->tensor_parallel);
	cJSON_AddStringToObject(x, "fsdp_sharding_strategy",
				scenario_enum_name("training", "fsdp_sharding_strategy", t->fsdp_sharding));
	cJSON_AddStringToObject(x, "fsdp_auto_wrap_policy",
				scenario_enum_name("training", "fsdp_auto_wrap_policy", t->fsdp_wrap));
	cJSON_AddNumberToObject(x, "fsdp_min_num_params", t->fsdp_min_num_params);
	cJSON_AddStringToObject(x, "fsdp_backward_prefetch",
				scenario_enum_name("training", "fsdp_backward_prefetch", t->fsdp_backward_prefetch));
	cJSON_AddNumberToObject(x, "fsdp_forward_prefetch", t->fsdp_forward_prefetch);
	cJSON_AddNumberToObject(x, "fsdp_limit_all_gathers", t->fsdp_limit_all_gathers);
	cJSON_AddNumberToObject(x, "ddp_bucket_mb", t->ddp_bucket_mb);
	cJSON_AddNumberToObject(x, "ddp_gradient_as_bucket_view", t->ddp_gradient_as_bucket_view);
	fsdp2_json(x, s);
	out = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	return out;
}

/* What the tracer cannot run, said before anything starts. */
static int check(const struct scenario *s, const struct pyref_opts *o, struct err *e)
{
	const struct scn_training *t = &s->s.training;

	if (s->plan.framework != FW_PYTORCH)
		return err_set(e, ERR_INPUT, s->file, 0, "[training] framework = %s: --backend pytorch measures "
			       "framework = pytorch", scenario_enum_name("training", "framework", s->plan.framework));
	if (s->plan.engine != FW_PYTORCH || (s->plan.mech != MECH_REPL && !(s->plan.mech == MECH_UNITS &&
	    s->plan.strategy == STRAT_FSDP)))
		return err_set(e, ERR_INPUT, s->file, 0, "[training] strategy = %s: the PyTorch reference runs "
			       "single, ddp and fsdp (DeepSpeed is not in its stacks and cannot run on meta "
			       "tensors; nn.DataParallel needs real devices)", s->plan.name);
	if (t->tensor_parallel > 1 || t->offload != OFFLOAD_NONE)
		return err_set(e, ERR_INPUT, s->file, 0, "[training] %s: not run by the PyTorch reference",
			       t->tensor_parallel > 1 ? "tensor_parallel > 1" : "offload");
	/* the tracer runs transformers' eager or SDPA attention, its SDPA choosing
	 * as CUDA would (cudasubst.py: flash for 16-bit without a mask, else the
	 * memory-efficient kernel); flash-attn's own kernels and cuDNN's run on
	 * CUDA only (flash_attn has no CPU or meta implementation), and naming
	 * one of SDPA's other kernels would compare a kernel the tracer did not run */
	if (t->attention > ATTN_SDPA_FLASH)
		return err_set(e, ERR_INPUT, s->file, 0, "[training] attention = %s: the PyTorch reference traces "
			       "eager, sdpa (its kernel chosen as CUDA would) and sdpa_flash; flash-attn and cuDNN "
			       "run on CUDA only: compare sdpa_flash, PyTorch's copy of the FlashAttention-2 "
			       "kernel",
			       scenario_enum_name("training", "attention", t->attention));
	if (strcmp(o->attention, "eager") && strcmp(o->attention, "sdpa"))
		return err_set(e, ERR_INPUT, NULL, 0, "--attention %s: expected eager or sdpa", o->attention);
	if (strcmp(o->attention, s->attn == AK_EAGER ? "eager" : "sdpa"))
		return err_set(e, ERR_INPUT, s->file, 0, "--attention %s, but the scenario's [training] attention "
			       "runs %s: set --set training.attention=%s so that the prediction compares",
			       o->attention, graph_attn_name(s->attn), o->attention);
	return 0;
}

/* Writes text to a new temporary file; its path in path. */
static int write_temp(char *path, size_t n, const char *suffix, const char *text, struct err *e)
{
	const char *dir = getenv("TMPDIR");
	FILE *f;
	int fd;

	snprintf(path, n, "%s/shardcast-pyref-XXXXXX%s", dir && *dir ? dir : "/tmp", suffix);
	fd = mkstemps(path, (int)strlen(suffix));
	if (fd < 0)
		return err_set(e, ERR_SYSTEM, path, 0, "cannot create a temporary file: %s", strerror(errno));
	f = fdopen(fd, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		if (!f)
			close(fd);
		unlink(path);
		return err_set(e, ERR_SYSTEM, path, 0, "cannot write the tracer's spec: %s", strerror(errno));
	}
	return 0;
}

/* Runs the tracer; its stdout (JSON) in *out. Exit 2 of the tracer is bad
 * input (its message went to stderr). */
static int run_tracer(const struct pyref_opts *o, const char *python, const char *spec,
		      const char *csv, char **out, struct err *e)
{
	char cmd[4096], buf[65536];
	size_t len = 0, cap = 0, k;
	FILE *p;
	int st;

	if (snprintf(cmd, sizeof cmd, "'%s' '%s/runtime/pytorch/pyref.py' --spec '%s' --trace-csv '%s' "
		     "--batches %lld,%lld", python, o->root, spec, csv, (long long)o->batches[0],
		     (long long)o->batches[1]) >= (int)sizeof cmd)
		return err_set(e, ERR_INPUT, NULL, 0, "the checkout's path is too long: %s", o->root);
	p = popen(cmd, "r");
	if (!p)
		return err_set(e, ERR_SYSTEM, NULL, 0, "cannot start %s: %s", python, strerror(errno));
	*out = NULL;
	while ((k = fread(buf, 1, sizeof buf, p)) > 0) {
		if (len + k + 1 > cap) {
			char *nb = realloc(*out, cap = 2 * (len + k + 1));
			if (!nb)
				break;
			*out = nb;
		}
		memcpy(*out + len, buf, k);
		len += k;
		(*out)[len] = 0;
	}
	st = pclose(p);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || !*out) {
		int code = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		free(*out);
		*out = NULL;
		if (code == 2)
			return err_set(e, ERR_INPUT, o->scenario, 0, "the PyTorch reference cannot run this "
				       "scenario (its message is above)");
		return err_set(e, ERR_SYSTEM, NULL, 0, "the PyTorch tracer failed (exit status %d)", code);
	}
	return 0;
}

int pyref_replay_csv(const char *path, int64_t capacity, int64_t *allocated, int64_t *reserved,
		     struct err *e)
{
	struct alloc_cfg c = {.capacity = capacity};
	struct alloc a;
	FILE *f = fopen(path, "r");
	char line[1024], act[16];
	long long id, bytes;
	int *blk = NULL, nblk = 0, h, rc = 0;

	if (!f)
		return err_set(e, ERR_SYSTEM, path, 0, "cannot read the trace: %s", strerror(errno));
	alloc_init(&a, &c);
	while (!rc && fgets(line, sizeof line, f)) {
		if (sscanf(line, "%15[a-z],%lld,%lld", act, &id, &bytes) != 3)
			continue;  /* the header */
		if (id >= nblk) {
			int n = (int)id * 2 + 16, *nb = realloc(blk, (size_t)n * sizeof *nb);
			if (!nb) {
				rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory replaying the trace");
				break;
			}
			blk = nb;
			nblk = n;
		}
		if (!strcmp(act, "alloc")) {
			h = alloc_malloc(&a, bytes);
			if (h < 0)
				rc = err_set(e, ERR_SYSTEM, path, 0, "the emulated allocator ran out of memory "
					     "(%lld bytes of capacity)", (long long)capacity);
			else
				blk[id] = h;
		} else {
			alloc_free(&a, blk[id]);
		}
	}
	*allocated = a.peak_allocated;
	*reserved = a.peak_reserved;
	alloc_release(&a);
	free(blk);
	fclose(f);
	return rc;
}

/* The measured run of micro-batch b in the tracer's output (NULL none). */
static const cJSON *run_of(const cJSON *root, int64_t b)
{
	const cJSON *r;

	cJSON_ArrayForEach(r, cJSON_GetObjectItem(root, "runs"))
		if ((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(r, "batch")) == b)
			return r;
	return NULL;
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *x = cJSON_GetObjectItem(o, k);

	return cJSON_IsNumber(x) ? x->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *k)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));

	return v ? v : "";
}

/* The phase of the predicted tensor peak, named as the tracer's are. */
static const char *predicted_phase(const struct prediction *p)
{
	return mem_phase_name(p->mem.tensor_phase);
}

/* The tracer's phases named as the simulator's (the inputs are made in forward,
 * zero_grad belongs to the optimizer step). */
static const char *measured_phase(const char *ph)
{
	if (!strcmp(ph, "input"))
		return "forward";
	if (!strcmp(ph, "zero_grad"))
		return "optimizer";
	return ph;
}

static int predict_at(struct scenario *s, int64_t b, struct prediction *p, struct err *e)
{
	char set[64];
	int rc;

	snprintf(set, sizeof set, "training.micro_batch=%lld", (long long)b);
	rc = scenario_set(s, set, e);
	return rc ? rc : predict_run(s, p, e);
}

/* The predicted tensor bytes at their peak: what the trace can see (no
 * context, workspaces, NCCL or allocator slack). */
static double predicted_tensors(const struct prediction *p)
{
	return p->mem.tensor_peak;
}

struct cmp {
	double meas[2], pred[2];       /* tensor bytes at the steady peak, per batch */
	double slope_m, slope_p, fixed_m;
	double reserved, emu_alloc;    /* the emulator replaying the trace of batch 2 */
	double capacity;               /* what the emulator may take (bytes) */
	int fits;                      /* the trace ran within it */
	const char *phase_m, *phase_p;
};

/* The trace of run r (the second micro-batch): its events, where its steady
 * peak is, and the live bytes per category there. */
static void trace_summary(cJSON *m, const cJSON *r)
{
	cJSON *t = cJSON_AddObjectToObject(m, "trace");

	cJSON_AddNumberToObject(t, "events", num(r, "events"));
	cJSON_AddStringToObject(t, "peak_op", str(r, "steady_peak_op"));
	cJSON_AddStringToObject(t, "peak_module", str(r, "steady_peak_module"));
	cJSON_AddNumberToObject(t, "end_of_forward_bytes", num(r, "end_of_forward_bytes"));
	cJSON_AddItemToObject(t, "at_peak", cJSON_Duplicate(cJSON_GetObjectItem(r, "at_peak"), 1));
}

static char *measured_json(const cJSON *root, const struct cmp *c, const struct pyref_opts *o)
{
	cJSON *m = cJSON_CreateObject();
	const cJSON *st = cJSON_GetObjectItem(root, "stack");
	char *out;

	cJSON_AddNumberToObject(m, "micro_batch", (double)o->batches[1]);
	cJSON_AddNumberToObject(m, "peak_bytes", c->meas[1]);
	cJSON_AddNumberToObject(m, "peak_bytes_b1", c->meas[0]);
	cJSON_AddNumberToObject(m, "per_sample_bytes", c->slope_m);
	cJSON_AddNumberToObject(m, "fixed_bytes", c->fixed_m);
	cJSON_AddNumberToObject(m, "reserved_bytes_emulated", c->reserved);
	cJSON_AddNumberToObject(m, "allocator_capacity_bytes", c->capacity);
	cJSON_AddBoolToObject(m, "fits", c->fits);
	cJSON_AddNumberToObject(m, "allocated_bytes_emulated", c->emu_alloc);
	cJSON_AddStringToObject(m, "peak_phase", c->phase_m);
	cJSON_AddItemToObject(m, "stack", cJSON_Duplicate(st, 1));
	cJSON_AddStringToObject(m, "attention", o->attention);
	trace_summary(m, run_of(root, o->batches[1]));
	cJSON_AddNumberToObject(m, "substitutions",
				cJSON_GetArraySize(cJSON_GetObjectItem(root, "substitutions")));
	out = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	return out;
}

static void print_text(const struct scenario *s, const cJSON *root, const struct cmp *c,
		       const struct pyref_opts *o)
{
	const cJSON *st = cJSON_GetObjectItem(root, "stack");
	char a[32], b[32], d[32];
	int i;

	printf("shardcast validate — %s\n\n", s->file);
	printf("Reference PyTorch %s, transformers %s (meta tensors, %s attention), %d substitutions\n",
	       str(st, "torch"), str(st, "transformers"), o->attention,
	       cJSON_GetArraySize(cJSON_GetObjectItem(root, "substitutions")));
	printf("Model     %s, seq_len %lld, %s, activation checkpointing %s\n\n", s->model.name,
	       (long long)s->seq_len, scenario_precision_name(s->s.training.precision),
	       scenario_enum_name("training", "activation_checkpointing", s->s.training.recompute));
	printf("                            %16s %16s %9s\n", "measured", "predicted", "error");
	for (i = 0; i < 2; i++)
		printf("  tensor bytes at %-6lld    %16.0f %16.0f %+8.2f%%\n", (long long)o->batches[i],
		       c->meas[i], c->pred[i], c->pred[i] ? 100 * (c->meas[i] - c->pred[i]) / c->pred[i] : 0);
	printf("  per-sample bytes          %16.0f %16.0f %+8.2f%%\n", c->slope_m, c->slope_p,
	       c->slope_p ? 100 * (c->slope_m - c->slope_p) / c->slope_p : 0);
	printf("  peak phase                %16s %16s\n", c->phase_m, c->phase_p);
	printf("  reserved (emulated)       %16s    (allocated %s; %s %s for the allocator)\n",
	       units_format(a, sizeof a, c->reserved, UNIT_BYTES), units_format(b, sizeof b, c->emu_alloc, UNIT_BYTES),
	       c->fits ? "fits in the" : "does not fit in the", units_format(d, sizeof d, c->capacity, UNIT_BYTES));
}

static int compare(struct scenario *s, const cJSON *root, const char *csv, const struct pyref_opts *o,
		   struct cmp *c, struct prediction *p, struct err *e)
{
	int64_t al = 0, re = 0;
	int i, rc = 0;

	for (i = 0; i < 2 && !rc; i++) {
		const cJSON *r = run_of(root, o->batches[i]);
		if (!r)
			return err_set(e, ERR_SYSTEM, NULL, 0, "the tracer's output has no run at micro-batch %lld",
				       (long long)o->batches[i]);
		c->meas[i] = num(r, "steady_peak_bytes");
		c->phase_m = measured_phase(str(r, "steady_peak_phase"));
		rc = predict_at(s, o->batches[i], p, e);
		c->pred[i] = predicted_tensors(p);
	}
	if (rc)
		return rc;
	c->phase_p = predicted_phase(p);
	c->slope_m = (c->meas[1] - c->meas[0]) / (double)(o->batches[1] - o->batches[0]);
	c->slope_p = (c->pred[1] - c->pred[0]) / (double)(o->batches[1] - o->batches[0]);
	c->fixed_m = c->meas[0] - c->slope_m * (double)o->batches[0];
	/* the trace through the emulated allocator with what the device leaves
	 * it: its capacity less the context, workspaces and NCCL the profile
	 * predicts (which the trace cannot see); out of memory there, what it
	 * would need */
	c->capacity = (double)s->capacity - p->mem.fixed_overhead;
	c->fits = 1;
	rc = pyref_replay_csv(csv, (int64_t)c->capacity, &al, &re, e);
	if (rc == ERR_SYSTEM && strstr(e->msg, "ran out of memory")) {
		c->fits = 0;
		memset(e, 0, sizeof *e);
		rc = pyref_replay_csv(csv, (int64_t)1 << 50, &al, &re, e);
	}
	c->reserved = (double)re;
	c->emu_alloc = (double)al;
	return rc;
}

static const char *stack_name(const struct scenario *s)
{
	return s->s.training.framework_version == FWV_1_13 ? "1.13" : "current";
}

static int find_python(const struct scenario *s, const struct pyref_opts *o, char *py, size_t n,
		       struct err *e)
{
	const char *stack = stack_name(s), *dir = getenv("SHARDCAST_PYREF_STACKS");

	/* the stacks of make pyref-deps, or those under $SHARDCAST_PYREF_STACKS */
	if (dir && *dir)
		snprintf(py, n, "%s/%s/bin/python", dir, stack);
	else
		snprintf(py, n, "%s/build/pyref/%s/bin/python", o->root, stack);
	if (access(py, X_OK))
		return err_set(e, ERR_INPUT, s->file, 0, "[training] framework_version = %s: that PyTorch stack "
			       "is not installed (%s is missing): run make pyref-deps", stack, py);
	return 0;
}

static char *output_json(const struct scenario *s, const cJSON *root, const struct prediction *p,
			 const char *meas, const struct cmp *c, char **pj)
{
	cJSON *r = cJSON_CreateObject(), *x;
	char *out;

	*pj = report_json(s, p);
	cJSON_AddStringToObject(r, "scenario", s->file);
	cJSON_AddStringToObject(r, "backend", "pytorch");
	cJSON_AddStringToObject(r, "device", str(root, "device"));
	cJSON_AddItemToObject(r, "predicted", *pj ? cJSON_Parse(*pj) : cJSON_CreateNull());
	cJSON_AddItemToObject(r, "measured", cJSON_Parse(meas));
	cJSON_AddItemToObject(r, "substitutions", cJSON_Duplicate(cJSON_GetObjectItem(root, "substitutions"), 1));
	x = cJSON_AddObjectToObject(r, "predicted_tensors");  /* the peak less what the tracer cannot see */
	cJSON_AddNumberToObject(x, "peak_bytes", c->pred[1]);
	cJSON_AddNumberToObject(x, "peak_bytes_b1", c->pred[0]);
	cJSON_AddNumberToObject(x, "per_sample_bytes", c->slope_p);
	cJSON_AddStringToObject(x, "peak_phase", c->phase_p);
	x = cJSON_AddObjectToObject(r, "error");
	cJSON_AddNumberToObject(x, "peak_bytes_rel", c->pred[1] ? (c->meas[1] - c->pred[1]) / c->pred[1] : 0);
	cJSON_AddNumberToObject(x, "per_sample_rel", c->slope_p ? (c->slope_m - c->slope_p) / c->slope_p : 0);
	cJSON_AddBoolToObject(x, "same_phase", !strcmp(c->phase_m, c->phase_p));
	out = cJSON_Print(r);
	cJSON_Delete(r);
	return out;
}

/* The tracer's output for spec sj in *res: from the cache (pyref_cache.c),
 * or a run of the tracer, kept in the cache; with o->prepare, the spec of a
 * case not cached is written there and its --batch line printed instead (*res
 * stays NULL). spec and csv receive the temporary files made when there is
 * no cache. */
static int trace(const struct scenario *s, const struct pyref_opts *o, const char *py, const char *sj,
		 struct pyref_cache *cc, char *spec, char *csv, char **res, struct err *e)
{
	int rc;

	pyref_cache_open(cc, o->root, stack_name(s), sj, o->batches);
	if (pyref_cache_read(cc, res))
		return 0;
	if (o->prepare) {
		if (pyref_cache_spec(cc, sj))
			return err_set(e, ERR_SYSTEM, cc->spec, 0, "cannot write the tracer's spec: %s",
				       cc->on ? strerror(errno) : "no cache directory");
		printf("%s %s %s %s %lld,%lld\n", stack_name(s), cc->spec, cc->json, cc->csv,
		       (long long)o->batches[0], (long long)o->batches[1]);
		return 0;
	}
	rc = write_temp(spec, 512, ".json", sj, e);
	if (!rc && !cc->on)
		rc = write_temp(csv, 512, ".csv", "", e);
	if (!rc)
		rc = run_tracer(o, py, spec, cc->on ? cc->csv : csv, res, e);
	if (!rc)
		pyref_cache_store(cc, *res);
	return rc;
}

int pyref_validate(const struct pyref_opts *o, struct err *e)
{
	struct scenario s;
	struct prediction p;
	struct pyref_opts given;
	struct cmp c = {0};
	struct pyref_cache cc;
	char py[4096], spec[512] = "", csv[512] = "";
	char *sj = NULL, *res = NULL, *mj = NULL, *pj = NULL, *out = NULL;
	cJSON *root = NULL;
	int rc;

	memset(&p, 0, sizeof p);
	rc = scenario_load(&s, o->scenario, o->sets, o->nset, e);
	if (!rc && !o->attention) {  /* the scenario's kernel: eager, or SDPA's choice */
		given = *o;
		given.attention = s.attn == AK_EAGER ? "eager" : "sdpa";
		o = &given;
	}
	if (!rc)
		rc = check(&s, o, e);
	if (!rc)
		rc = find_python(&s, o, py, sizeof py, e);
	if (!rc && !(sj = spec_json(&s, o)))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory writing the spec");
	if (!rc)
		rc = trace(&s, o, py, sj, &cc, spec, csv, &res, e);
	if (!rc && o->prepare)
		goto out;
	if (!rc && !(root = cJSON_Parse(res)))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "the tracer's output is not JSON");
	if (!rc && cJSON_IsString(cJSON_GetObjectItem(root, "failed")))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "the PyTorch tracer failed: %s",
			     cJSON_GetStringValue(cJSON_GetObjectItem(root, "failed")));
	if (!rc && cJSON_IsString(cJSON_GetObjectItem(root, "error")))
		rc = err_set(e, ERR_INPUT, o->scenario, 0, "the PyTorch reference cannot run this scenario: %s",
			     cJSON_GetStringValue(cJSON_GetObjectItem(root, "error")));
	if (!rc)
		rc = compare(&s, root, cc.on ? cc.csv : csv, o, &c, &p, e);
	if (!rc && (!(mj = measured_json(root, &c, o)) || !(out = output_json(&s, root, &p, mj, &c, &pj)) || !pj))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory writing JSON");
	if (!rc && o->db)
		rc = record_run(o->db, "validate", &s, o->sets, o->nset, "pytorch-meta", pj, mj, out, e);
	if (!rc && o->json)
		printf("%s\n", out);
	else if (!rc)
		print_text(&s, root, &c, o);
out:
	if (*spec)
		unlink(spec);
	if (*csv)
		unlink(csv);
	cJSON_Delete(root);
	free(sj);
	free(res);
	free(mj);
	free(pj);
	free(out);
	scenario_free(&s);
	return rc;
}
