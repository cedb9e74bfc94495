/*
 * sweep.c — loading a sweep file (see sweep.h): the [sweep] lists, the models
 * they name, and the cluster and fixed settings of the scenario sections.
 *
 * The file is read once and split by section into two texts of the same lines
 * (the other sections' lines blanked), so every message keeps the file's line
 * numbers: the scenario sections go through the scenario loader, [sweep]
 * through its own key table.
 */
#include "sweep.h"

#include <ctype.h>
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "graph.h"
#include "import.h"

static const char *const objectives[] = {"throughput", "cost", "time_to_train", NULL};

#define S(x) offsetof(struct sweep_settings, x)
static const struct cfg_key keys[] = {
	{"sweep", "models", CFG_STR, 0, 0, 0, 0, "", S(models), NULL,
	 "models to sweep: catalog names or paths (relative to the sweep file), or GLOB:MIN..MAX (catalog names matching GLOB with MIN..MAX parameters, e.g. llama-*:5B..15B); required unless hf_configs"},
	{"sweep", "hf_configs", CFG_STR, 0, 0, 0, 0, "", S(hf_configs), NULL,
	 "Hugging Face config.json files (or model folders) to sweep after models, relative to the sweep file: a team's own models"},
	{"sweep", "global_batch", CFG_STR, 0, 0, 0, 0, "", S(global_batch), NULL,
	 "global batch sizes (samples per optimizer step); each candidate takes the largest micro-batch that fits and divides global / dp, and accumulates the rest"},
	{"sweep", "micro_batch", CFG_STR, 0, 0, 0, 0, "", S(micro_batch), NULL,
	 "instead of global_batch: micro-batches per GPU without accumulation, or auto = each candidate's largest (the default)"},
	{"sweep", "seq_len", CFG_STR, 0, 0, 0, 0, "1024", S(seq_len), NULL, "sequence lengths"},
	{"sweep", "strategies", CFG_STR, 0, 0, 0, 0, "ddp, zero1, zero2, zero3, fsdp:full_shard, fsdp:shard_grad_op",
	 S(strategies), NULL, "single, dp, ddp, zero1, zero2, zero3, fsdp (= fsdp:full_shard) or fsdp:SHARDING (full_shard, shard_grad_op, no_shard, hybrid_shard, hybrid_shard_zero2)"},
	{"sweep", "precision", CFG_STR, 0, 0, 0, 0, "fp32", S(precision), NULL, "fp32, tf32, fp16, bf16"},
	{"sweep", "activation_checkpointing", CFG_STR, 0, 0, 0, 0, "none", S(recompute), NULL, "none, full, selective"},
	{"sweep", "offload", CFG_STR, 0, 0, 0, 0, "none", S(offload), NULL, "none, optimizer, optimizer_and_params"},
	{"sweep", "tensor_parallel", CFG_STR, 0, 0, 0, 0, "1", S(tensor_parallel), NULL, "tensor-parallel degrees"},
	{"sweep", "nodes", CFG_STR, 0, 0, 0, 0, "", S(nodes), NULL, "node counts (default: [cluster] nodes)"},
	{"sweep", "objective", CFG_ENUM, 0, 0, 0, 0, "throughput", S(objective), objectives,
	 "rank by throughput (tokens/s), cost (GPU-hours per million tokens) or time_to_train ([job] train_tokens at that throughput)"},
	{"sweep", "gpu_hour_price", CFG_NUM, 0, 0, 0, 1e6, "0", S(gpu_hour_price), NULL,
	 "price of one GPU-hour, to print cost per million tokens (0: GPU-hours only)"},
};
#undef S

#define NKEYS (sizeof keys / sizeof keys[0])
_Static_assert(NKEYS <= 16, "raise struct sweep's line[]");
static const struct cfg_table table = {keys, NKEYS};

const struct cfg_table *sweep_keys(void)
{
	return &table;
}

const char *sweep_objective_name(int objective)
{
	return objective >= 0 && objective <= SWEEP_TIME_TO_TRAIN ? objectives[objective] : "?";
}

const char *sweep_status_name(int status)
{
	static const char *const names[] = {"ok", "no_fit", "indivisible", "invalid", "bounded"};
	return status >= 0 && status <= SWEEP_BOUNDED ? names[status] : "?";
}

static int line_of(const struct sweep *sw, const char *key)
{
	return sw->line[cfg_index(&table, "sweep", key)];
}

/* ---- splitting the file ------------------------------------------------------------ */

/* A copy of text in which the lines outside (want_sweep) or inside [sweep] are
 * blank; *any says whether a [sweep] header was seen. NULL when out of memory. */
static char *split(const char *text, size_t len, int want_sweep, int *any, size_t *out_len)
{
	char *o = malloc(len + 1);
	size_t i = 0, n = 0, j;
	int in_sweep = 0;

	if (!o)
		return NULL;
	while (i < len) {
		size_t end = i;
		while (end < len && text[end] != '\n')
			end++;
		for (j = i; j < end && (text[j] == ' ' || text[j] == '\t'); j++)
			;
		if (j < end && text[j] == '[') {
			size_t k = j + 1;
			while (k < end && (text[k] == ' ' || text[k] == '\t'))
				k++;
			in_sweep = end - k >= 5 && strncmp(text + k, "sweep", 5) == 0 &&
				   (k + 5 == end || text[k + 5] == ']' || text[k + 5] == ' ');
			*any |= in_sweep;
		}
		if (in_sweep == want_sweep) {
			memcpy(o + n, text + i, end - i);
			n += end - i;
		}
		if (end < len)
			o[n++] = '\n';
		i = end + 1;
	}
	o[n] = 0;
	*out_len = n;
	return o;
}

/* ---- lists ------------------------------------------------------------------------- */

/* Splits a comma-separated list into trimmed items (in place in buf). */
static int items(char *buf, char **out, int max)
{
	int n = 0;
	char *p = buf, *q;

	while (*p) {
		char *end = strchr(p, ',');
		if (end)
			*end = 0;
		while (isspace((unsigned char)*p))
			p++;
		q = p + strlen(p);
		while (q > p && isspace((unsigned char)q[-1]))
			*--q = 0;
		if (n == max)
			return -1;
		out[n++] = p;
		if (!end)
			break;
		p = end + 1;
	}
	return n;
}

/* Reads a list key into its items; an empty item or more than max is an error. */
static int list(const struct sweep *sw, const char *key, const char *value, char *buf, size_t nbuf,
		char **out, int max, int *n, struct err *e)
{
	int i;

	snprintf(buf, nbuf, "%s", value);
	*n = items(buf, out, max);
	if (*n < 0)
		return err_set(e, ERR_INPUT, sw->file, line_of(sw, key), "[sweep] %s: more than %d values", key, max);
	for (i = 0; i < *n; i++)
		if (!out[i][0])
			return err_set(e, ERR_INPUT, sw->file, line_of(sw, key),
				       "[sweep] %s: an empty value in '%s'; expected a comma-separated list", key, value);
	if (*n == 0)
		return err_set(e, ERR_INPUT, sw->file, line_of(sw, key), "[sweep] %s: no values", key);
	return 0;
}

/* A count such as 7e9, 7B, 350M, 1.5T, 125K. */
static int parse_count(const char *s, double *v)
{
	char *end;
	double x = strtod(s, &end), m = 1;

	if (end == s)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'K': m = 1e3; end++; break;
	case 'M': m = 1e6; end++; break;
	case 'B': case 'G': m = 1e9; end++; break;
	case 'T': m = 1e12; end++; break;
	default: break;
	}
	if (*end || !(x >= 0))
		return -1;
	*v = x * m;
	return 0;
}

/* One whole number of a list item in lo..hi, or an error naming it. */
static int whole(struct sweep *sw, const char *key, const char *text, int64_t lo, int64_t hi,
		 int64_t *v, struct err *e)
{
	char *end;
	double x = strtod(text, &end);

	/* in range before the cast: a double outside int64_t does not convert */
	if (end == text || *end || !(x >= (double)lo && x <= (double)hi) || x != floor(x))
		return err_set(e, ERR_INPUT, sw->file, line_of(sw, key),
			       "[sweep] %s: '%s' is not a whole number in %lld..%lld", key, text,
			       (long long)lo, (long long)hi);
	*v = (int64_t)x;
	return 0;
}

/* A list of whole numbers in lo..hi; an item A..B stands for A, A + 1, ..., B. */
static int int_list(struct sweep *sw, const char *key, const char *value, int64_t lo, int64_t hi,
		    int64_t *out, int *n, struct err *e)
{
	char buf[CFG_STR_MAX], *it[SWEEP_MAX_AXIS], *dots;
	int64_t a, b, v;
	int i, j, m, k = 0;

	if (list(sw, key, value, buf, sizeof buf, it, SWEEP_MAX_AXIS, &m, e))
		return e->code;
	for (i = 0; i < m; i++) {
		dots = strstr(it[i], "..");
		if (dots)
			*dots = 0;
		if (whole(sw, key, it[i], lo, hi, &a, e) || whole(sw, key, dots ? dots + 2 : it[i], lo, hi, &b, e))
			return e->code;
		if (b < a)
			return err_set(e, ERR_INPUT, sw->file, line_of(sw, key),
				       "[sweep] %s: '%s..%s' is an empty range", key, it[i], dots + 2);
		for (v = a; v <= b; v++) {
			if (k == SWEEP_MAX_AXIS)
				return err_set(e, ERR_INPUT, sw->file, line_of(sw, key),
					       "[sweep] %s: more than %d values", key, SWEEP_MAX_AXIS);
			for (j = 0; j < k; j++)
				if (out[j] == v)
					return err_set(e, ERR_INPUT, sw->file, line_of(sw, key),
						       "[sweep] %s: %lld is listed twice", key, (long long)v);
			out[k++] = v;
		}
	}
	*n = k;
	return 0;
}

/* An enum list against a scenario key's choices. */
static int enum_list(struct sweep *sw, const char *key, const char *section, const char *skey,
		     const char *value, int *out, int *n, struct err *e)
{
	const struct cfg_table *st = scenario_keys();
	const struct cfg_key *k = &st->keys[cfg_index(st, section, skey)];
	char buf[CFG_STR_MAX], *it[SWEEP_MAX_AXIS];
	size_t nch = 0;
	int i, j, c;

	while (k->choices[nch])
		nch++;
	if (list(sw, key, value, buf, sizeof buf, it, SWEEP_MAX_AXIS, n, e))
		return e->code;
	for (i = 0; i < *n; i++) {
		for (c = 0; k->choices[c] && strcmp(k->choices[c], it[i]); c++)
			;
		if (!k->choices[c]) {
			const char *near = err_nearest(it[i], k->choices, nch);
			return err_set(e, ERR_INPUT, sw->file, line_of(sw, key), "[sweep] %s: unknown value '%s'%s%s%s",
				       key, it[i], near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
		}
		out[i] = c;
		for (j = 0; j < i; j++)
			if (out[j] == c)
				return err_set(e, ERR_INPUT, sw->file, line_of(sw, key),
					       "[sweep] %s: %s is listed twice", key, it[i]);
	}
	return 0;
}

/* strategies: names of the strategy table (plan.h) */
static int strategy_list(struct sweep *sw, int *strat, int *shard, int *ver, int *n, struct err *e)
{
	char buf[CFG_STR_MAX], *it[SWEEP_MAX_AXIS];
	int i, j;

	if (list(sw, "strategies", sw->set.strategies, buf, sizeof buf, it, SWEEP_MAX_AXIS, n, e))
		return e->code;
	for (i = 0; i < *n; i++) {
		if (plan_parse_strategy(it[i], &strat[i], &shard[i], &ver[i])) {
			const char *near = plan_strategy_nearest(it[i]);
			return err_set(e, ERR_INPUT, sw->file, line_of(sw, "strategies"),
				       "[sweep] strategies: unknown strategy '%s'%s%s%s", it[i],
				       near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
		}
		for (j = 0; j < i; j++)
			if (strat[j] == strat[i] && shard[j] == shard[i] && ver[j] == ver[i])
				return err_set(e, ERR_INPUT, sw->file, line_of(sw, "strategies"),
					       "[sweep] strategies: %s is listed twice", it[i]);
	}
	return 0;
}

/* ---- models -------------------------------------------------------------------------- */

static int add_model(struct sweep *sw, const struct model *m, struct err *e)
{
	struct model *nm;
	double *np;
	int i;

	for (i = 0; i < sw->nmodels; i++)
		if (!strcmp(sw->models[i].name, m->name))
			return 0;  /* named twice (a glob and a name): keep the first */
	nm = realloc(sw->models, (size_t)(sw->nmodels + 1) * sizeof *nm);
	if (nm)
		sw->models = nm;
	np = realloc(sw->model_params, (size_t)(sw->nmodels + 1) * sizeof *np);
	if (np)
		sw->model_params = np;
	if (!nm || !np)
		return err_set(e, ERR_SYSTEM, sw->file, 0, "out of memory");
	sw->models[sw->nmodels] = *m;
	sw->model_params[sw->nmodels] = graph_param_count(m);
	sw->nmodels++;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The catalog names of models/nn (sorted, malloc'd array of malloc'd names). */
static int catalog_names(char ***out, int *n, const char *file, int line, struct err *e)
{
	char dir[4096], path[4200];
	struct dirent *d;
	char **v = NULL;
	int cap = 0;
	DIR *dp;

	*n = 0;
	snprintf(path, sizeof path, "%s/nn", catalog_dir(dir, sizeof dir));
	dp = opendir(path);
	if (!dp)
		return err_set(e, ERR_SYSTEM, file, line, "cannot list the model catalog %s", path);
	while ((d = readdir(dp))) {
		size_t l = strlen(d->d_name);
		if (l < 5 || strcmp(d->d_name + l - 4, ".ini") || d->d_name[0] == '.')
			continue;
		if (*n == cap) {
			char **nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 32) * sizeof *nv);
			if (!nv)
				break;
			v = nv;
		}
		v[*n] = strndup(d->d_name, l - 4);
		if (!v[*n])
			break;
		(*n)++;
	}
	closedir(dp);
	qsort(v, (size_t)*n, sizeof *v, by_name);
	*out = v;
	return 0;
}

struct match {
	struct model m;
	double params;
};

static int by_params(const void *a, const void *b)
{
	const struct match *x = a, *y = b;
	return x->params < y->params ? -1 : x->params > y->params ? 1 : strcmp(x->m.name, y->m.name);
}

/* GLOB or GLOB:MIN..MAX over the catalog, in order of parameter count. */
static int glob_models(struct sweep *sw, const char *item, struct err *e)
{
	int line = line_of(sw, "models"), n = 0, i, nm = 0, rc;
	char pat[CFG_STR_MAX], *colon, *dots;
	double lo = 0, hi = 1e300;
	struct match *mt = NULL;
	char **names = NULL;

	snprintf(pat, sizeof pat, "%s", item);
	colon = strrchr(pat, ':');
	if (colon) {
		*colon = 0;
		dots = strstr(colon + 1, "..");
		if (!dots)
			return err_set(e, ERR_INPUT, sw->file, line, "[sweep] models: '%s': expected GLOB:MIN..MAX, e.g. llama-*:5B..15B", item);
		*dots = 0;
		if ((colon[1] && parse_count(colon + 1, &lo)) || (dots[2] && parse_count(dots + 2, &hi)) || lo > hi)
			return err_set(e, ERR_INPUT, sw->file, line, "[sweep] models: '%s': bad parameter range; "
				       "expected MIN..MAX such as 1e9..2e10 or 100M..7B", item);
	}
	rc = catalog_names(&names, &n, sw->file, line, e);
	if (!rc)
		mt = calloc((size_t)n + 1, sizeof *mt);
	if (!rc && !mt)
		rc = err_set(e, ERR_SYSTEM, sw->file, line, "out of memory");
	for (i = 0; !rc && i < n; i++) {
		if (fnmatch(pat, names[i], 0))
			continue;
		rc = model_load(names[i], &mt[nm].m, sw->file, line, e);
		mt[nm].params = graph_param_count(&mt[nm].m);
		if (!rc && mt[nm].params >= lo && mt[nm].params <= hi)
			nm++;
	}
	if (!rc && nm == 0)
		rc = err_set(e, ERR_INPUT, sw->file, line, "[sweep] models: no catalog model matches '%s'", item);
	qsort(mt, (size_t)nm, sizeof *mt, by_params);
	if (!rc && nm > 0 && sw->nmodels == 0)
		snprintf(sw->base_model, sizeof sw->base_model, "%s", mt[0].m.name);
	for (i = 0; !rc && i < nm; i++)
		rc = add_model(sw, &mt[i].m, e);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(mt);
	return rc;
}

/* One model named by a [sweep] list: a catalog name, a model file or (hf) a
 * Hugging Face config; a path is relative to the sweep file (imp_relative, the
 * scenario loader's rule). The model is named as written. */
static int named_model(struct sweep *sw, const char *item, int hf, struct model *m, struct err *e)
{
	char path[sizeof sw->base_model];
	struct stat st;
	int rc;

	if (hf || catalog_is_path(item))
		imp_relative(sw->file, item, path, sizeof path);
	else
		snprintf(path, sizeof path, "%s", item);
	if (hf && stat(path, &st) != 0)
		return err_set(e, ERR_INPUT, sw->file, line_of(sw, "hf_configs"),
			       "[sweep] hf_configs: %s: no such file", path);
	rc = hf ? imp_hf_model(path, m, e) : model_load(path, m, sw->file, line_of(sw, "models"), e);
	if (rc)
		return rc;
	snprintf(m->name, sizeof m->name, "%s", item);
	if (sw->nmodels == 0)  /* the base scenario loads the first model (load_base) */
		snprintf(sw->base_model, sizeof sw->base_model, "%s", path);
	sw->base_hf |= sw->nmodels == 0 && hf;
	return add_model(sw, m, e);
}

static int load_models(struct sweep *sw, struct err *e)
{
	char buf[CFG_STR_MAX], *it[SWEEP_MAX_AXIS];
	struct model *m;
	int n = 0, nh = 0, i, rc = 0;

	if (!sw->set.models[0] && !sw->set.hf_configs[0])
		return err_set(e, ERR_INPUT, sw->file, 0, "[sweep]: give models (catalog names, model files "
			       "or GLOB:MIN..MAX) or hf_configs (Hugging Face config.json files)");
	if (sw->set.models[0] && list(sw, "models", sw->set.models, buf, sizeof buf, it, SWEEP_MAX_AXIS, &n, e))
		return e->code;
	m = malloc(sizeof *m);
	if (!m)
		return err_set(e, ERR_SYSTEM, sw->file, 0, "out of memory");
	for (i = 0; !rc && i < n; i++) {
		if (strpbrk(it[i], "*?[") || (strchr(it[i], ':') && strstr(it[i], "..")))
			rc = glob_models(sw, it[i], e);
		else
			rc = named_model(sw, it[i], 0, m, e);
	}
	if (!rc && sw->set.hf_configs[0] &&
	    list(sw, "hf_configs", sw->set.hf_configs, buf, sizeof buf, it, SWEEP_MAX_AXIS, &nh, e))
		rc = e->code;
	for (i = 0; !rc && i < nh; i++)
		rc = named_model(sw, it[i], 1, m, e);
	free(m);
	return rc;
}

/* ---- the scenario part ------------------------------------------------------------------ */

/* Keys a sweep sets itself: they may not appear in the scenario sections. */
static int forbidden(const struct sweep *sw, const int *lines, struct err *e)
{
	static const char *const fixed[][3] = {
		{"model", "name", "models"}, {"model", "hf_config", "hf_configs"},
		{"model", "seq_len", "seq_len"}, {"model", "target_len", "seq_len"},
		{"training", "strategy", "strategies"}, {"training", "fsdp_sharding_strategy", "strategies"},
		{"training", "fsdp_version", "strategies"},
		{"training", "precision", "precision"}, {"training", "activation_checkpointing", "activation_checkpointing"},
		{"training", "offload", "offload"}, {"training", "tensor_parallel", "tensor_parallel"},
		{"training", "micro_batch", "micro_batch or global_batch"}, {"training", "grad_accum", "global_batch"},
		{"training", "accelerate_config", NULL}, {"training", "deepspeed_config", NULL}};
	const struct cfg_table *st = scenario_keys();
	size_t i;
	int k;

	for (i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
		k = cfg_index(st, fixed[i][0], fixed[i][1]);
		if (k < 0 || lines[k] <= 0)
			continue;
		if (!fixed[i][2])
			return err_set(e, ERR_INPUT, sw->file, lines[k], "[%s] %s: imports are not supported in a sweep file",
				       fixed[i][0], fixed[i][1]);
		return err_set(e, ERR_INPUT, sw->file, lines[k], "[%s] %s: a sweep sets this from [sweep] %s "
			       "(a list of one or more values); remove it here", fixed[i][0], fixed[i][1], fixed[i][2]);
	}
	k = cfg_index(st, "cluster", "nodes");
	if (lines[k] > 0 && sw->set.nodes[0])
		return err_set(e, ERR_INPUT, sw->file, line_of(sw, "nodes"), "[sweep] nodes: [cluster] nodes is set "
			       "too (line %d); give one of them", lines[k]);
	return 0;
}

/* Loads the scenario sections into sw->base with the first model. */
static int load_base(struct sweep *sw, char *text, size_t len, struct err *e)
{
	struct scn_settings *tmp = malloc(sizeof *tmp);
	int lines[SCN_MAX_KEYS] = {0};
	struct cfg_origin origin = {lines, NULL};
	char set[sizeof sw->base_model + 16];
	const char *sets[1] = {set};
	int rc;

	if (!tmp) {
		free(text);
		return err_set(e, ERR_SYSTEM, sw->file, 0, "out of memory");
	}
	rc = cfg_defaults(scenario_keys(), tmp, e);
	if (!rc)
		rc = cfg_parse(scenario_keys(), tmp, &origin, sw->file, text, len, e);
	if (!rc)
		rc = forbidden(sw, lines, e);
	free(tmp);
	if (rc) {
		free(text);
		return rc;
	}
	/* the first model makes the base a complete scenario; the sweep replaces it */
	snprintf(set, sizeof set, "model.%s=%s", sw->base_hf ? "hf_config" : "name", sw->base_model);
	return scenario_load_text(&sw->base, sw->file, text, len, sets, 1, e);
}

/* ---- candidates ------------------------------------------------------------------------ */

static int build_cands(struct sweep *sw, struct err *e)
{
	int strat[SWEEP_MAX_AXIS], shard[SWEEP_MAX_AXIS], ver[SWEEP_MAX_AXIS], prec[SWEEP_MAX_AXIS],
	    rec[SWEEP_MAX_AXIS], off[SWEEP_MAX_AXIS];
	int64_t tp[SWEEP_MAX_AXIS], nodes[SWEEP_MAX_AXIS];
	int ns, np, nr, no, nt, nn, a, b, c, d, f, g;
	size_t total;

	if (strategy_list(sw, strat, shard, ver, &ns, e) ||
	    enum_list(sw, "precision", "training", "precision", sw->set.precision, prec, &np, e) ||
	    enum_list(sw, "activation_checkpointing", "training", "activation_checkpointing", sw->set.recompute, rec, &nr, e) ||
	    enum_list(sw, "offload", "training", "offload", sw->set.offload, off, &no, e) ||
	    int_list(sw, "tensor_parallel", sw->set.tensor_parallel, 1, 1024, tp, &nt, e))
		return e->code;
	if (sw->set.nodes[0]) {
		if (int_list(sw, "nodes", sw->set.nodes, 1, 100000, nodes, &nn, e))
			return e->code;
	} else {
		nodes[0] = sw->base.s.cluster.nodes;
		nn = 1;
	}
	total = (size_t)ns * np * nr * no * nt * nn;
	sw->cands = calloc(total, sizeof *sw->cands);
	if (!sw->cands)
		return err_set(e, ERR_SYSTEM, sw->file, 0, "out of memory");
	for (f = 0; f < nn; f++)
		for (g = 0; g < nt; g++)
			for (a = 0; a < ns; a++)
				for (b = 0; b < np; b++)
					for (c = 0; c < nr; c++)
						for (d = 0; d < no; d++) {
							struct sweep_cand *k = &sw->cands[sw->ncand++];
							size_t l;
							k->strategy = strat[a];
							k->sharding = shard[a];
							k->fsdp_version = ver[a];
							k->precision = prec[b];
							k->recompute = rec[c];
							k->offload = off[d];
							k->tp = tp[g];
							k->nodes = nodes[f];
							snprintf(k->strat, sizeof k->strat, "%s",
								 plan_strategy_name(k->strategy, k->sharding, k->fsdp_version));
							snprintf(k->label, sizeof k->label, "%s", k->strat);
							l = strlen(k->label);
							if (np > 1)
								l += (size_t)snprintf(k->label + l, sizeof k->label - l, " %s", scenario_precision_name(k->precision));
							if (nr > 1 && l < sizeof k->label)
								l += (size_t)snprintf(k->label + l, sizeof k->label - l, " ckpt=%s",
										      scenario_enum_name("training", "activation_checkpointing", k->recompute));
							if (no > 1 && l < sizeof k->label)
								l += (size_t)snprintf(k->label + l, sizeof k->label - l, " offload=%s",
										      scenario_enum_name("training", "offload", k->offload));
							if (nt > 1 && l < sizeof k->label)
								l += (size_t)snprintf(k->label + l, sizeof k->label - l, " tp=%lld", (long long)k->tp);
							if (nn > 1 && l < sizeof k->label)
								snprintf(k->label + l, sizeof k->label - l, " nodes=%lld", (long long)k->nodes);
						}
	return 0;
}

static int batches(struct sweep *sw, struct err *e)
{
	const char *g = sw->set.global_batch, *m = sw->set.micro_batch;

	if (g[0] && m[0])
		return err_set(e, ERR_INPUT, sw->file, line_of(sw, "micro_batch"),
			       "[sweep] micro_batch: global_batch is set too (line %d); give one of them",
			       line_of(sw, "global_batch"));
	if (g[0]) {
		sw->batch_mode = SWEEP_GLOBAL;
		return int_list(sw, "global_batch", g, 1, 100000000, sw->batches, &sw->nbatch, e);
	}
	if (!m[0] || !strcmp(m, "auto")) {
		sw->batch_mode = SWEEP_AUTO;
		sw->nbatch = 1;
		sw->batches[0] = 0;
		return 0;
	}
	sw->batch_mode = SWEEP_MICRO;
	return int_list(sw, "micro_batch", m, 1, 10000000, sw->batches, &sw->nbatch, e);
}

static uint64_t fnv1a(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* A file with a [cluster] and no [sweep] (recommend CLUSTER.ini): the
 * practitioners' question for that cluster, model sizes from 124M to 70B
 * parameters, global batches from 8 to 2048, every strategy family. */
static void default_sweep(struct sweep *sw)
{
	struct sweep_settings *t = &sw->set;

	sw->is_default = 1;
	snprintf(t->models, sizeof t->models, "gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama-2-7b, llama-2-13b, llama-2-70b");
	snprintf(t->global_batch, sizeof t->global_batch, "8, 32, 128, 512, 2048");
	snprintf(t->recompute, sizeof t->recompute, "none, full");
}

/* The default sweep's precision: bf16 where the device has it, else fp16,
 * else fp32; and hybrid sharding when the cluster has several nodes. */
static void default_precision(struct sweep *sw)
{
	const struct gpu *g = &sw->base.gpu;

	snprintf(sw->set.precision, sizeof sw->set.precision, "%s",
		 g->peak[PREC_BF16] > 0 ? "bf16" : g->peak[PREC_FP16] > 0 ? "fp16" : "fp32");
	if (sw->base.s.cluster.nodes > 1)
		snprintf(sw->set.strategies, sizeof sw->set.strategies, "%s",
			 "ddp, zero1, zero2, zero3, fsdp:full_shard, fsdp:shard_grad_op, fsdp:hybrid_shard");
}

int sweep_load(struct sweep *sw, const char *path, struct err *e)
{
	struct cfg_origin origin;
	char *stext = NULL, *ctext = NULL;
	size_t slen, clen;
	int rc, any = 0;

	memset(sw, 0, sizeof *sw);
	origin.line = sw->line;
	snprintf(sw->file, sizeof sw->file, "%s", path);
	rc = cfg_read_file(path, &sw->text, &sw->text_len, e);
	if (rc)
		return rc;
	sw->hash = fnv1a(sw->text, sw->text_len);
	stext = split(sw->text, sw->text_len, 1, &any, &slen);
	ctext = split(sw->text, sw->text_len, 0, &any, &clen);
	if (!stext || !ctext) {
		rc = err_set(e, ERR_SYSTEM, path, 0, "out of memory");
		goto out;
	}
	rc = cfg_defaults(&table, &sw->set, e);
	if (!rc && any)
		rc = cfg_parse(&table, &sw->set, &origin, path, stext, slen, e);
	if (!rc && any)
		rc = cfg_check_required(&table, &origin, path, e);
	if (!rc && !any)
		default_sweep(sw);
	if (!rc)
		rc = load_models(sw, e);
	if (!rc) {
		rc = load_base(sw, ctext, clen, e);  /* takes ctext */
		ctext = NULL;
	}
	if (!rc && !any)
		default_precision(sw);
	if (!rc)
		rc = int_list(sw, "seq_len", sw->set.seq_len, 1, 10000000, sw->seqs, &sw->nseq, e);
	if (!rc)
		rc = batches(sw, e);
	if (!rc)
		rc = build_cands(sw, e);
	if (rc)
		goto out;
	sw->ncell = sw->nmodels * sw->nseq * sw->nbatch;
	sw->train_tokens = sw->base.s.job.train_tokens;
	sw->train_steps = sw->base.s.job.steps;
	if (sw->set.objective == SWEEP_TIME_TO_TRAIN && !(sw->train_tokens > 0) && sw->train_steps <= 0)
		rc = err_set(e, ERR_INPUT, path, line_of(sw, "objective"),
			     "[sweep] objective: time_to_train needs [job] train_tokens (or steps)");
out:
	free(stext);
	free(ctext);
	return rc;
}

void sweep_free(struct sweep *sw)
{
	scenario_free(&sw->base);
	free(sw->text);
	free(sw->models);
	free(sw->model_params);
	free(sw->cands);
	memset(sw, 0, sizeof *sw);
}

void sweep_cell_axes(const struct sweep *sw, int cell, int *model, int *seq, int *batch)
{
	*batch = cell % sw->nbatch;
	cell /= sw->nbatch;
	*seq = cell % sw->nseq;
	*model = cell / sw->nseq;
}
