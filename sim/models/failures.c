/*
 * failures.c — loading failure catalogs (see failures.h).
 *
 * The file is checked whole by cfg_parse_entry (unknown keys, bad values and
 * typos at their line), then each section is loaded as one component and the
 * combinations the table cannot express are checked: a rate or the counts it
 * comes from, a shape for a Weibull, a repair time for a part that is repaired.
 */
#include "failures.h"

#include <ini.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"

static const char *const pers[] = {"gpu", "node", "job", NULL};
static const char *const dists[] = {"exponential", "weibull", NULL};
static const char *const repairs[] = {"none", "swap", "repair", NULL};
static const char *const repair_dists[] = {"lognormal", NULL};
static const char *const detections[] = {"immediate", "timeout", NULL};

#define F(x) offsetof(struct fail_component, x)
static const struct cfg_key keys[] = {
	{NULL, "description", CFG_STR, 0, 0, 0, 0, "", F(description), NULL, "free text"},
	{NULL, "per", CFG_ENUM, 0, CFG_REQUIRED, 0, 0, NULL, F(per), pers, "what the rate counts: per GPU-hour, node-hour or job-hour"},
	{NULL, "rate", CFG_NUM, 0, CFG_AUTO, 0, 1e6, "auto", F(rate), NULL, "failures per unit-hour; auto = count_in_window / (window_hours x units_in_window)"},
	{NULL, "count_in_window", CFG_NUM, 0, 0, 0, 1e12, "0", F(count), NULL, "source data: failures seen in the window"},
	{NULL, "window_hours", CFG_NUM, 0, 0, 0, 1e9, "0", F(window_hours), NULL, "source data: length of the window (hours)"},
	{NULL, "units_in_window", CFG_NUM, 0, 0, 0, 1e9, "0", F(units), NULL, "source data: GPUs (per = gpu) or nodes (per = node) observed"},
	{NULL, "distribution", CFG_ENUM, 0, 0, 0, 0, "exponential", F(dist), dists, "time between failures"},
	{NULL, "shape", CFG_NUM, 0, 0, 0, 100, "0", F(shape), NULL, "Weibull shape k (< 1: decreasing hazard)"},
	{NULL, "repair", CFG_ENUM, 0, 0, 0, 0, "none", F(repair), repairs, "none: a restart is enough; swap: the node leaves (a spare replaces it); repair: the job waits for a repair in place"},
	{NULL, "repair_distribution", CFG_ENUM, 0, 0, 0, 0, "lognormal", F(repair_dist), repair_dists, "distribution of the repair time"},
	{NULL, "repair_median", CFG_NUM, UNIT_TIME, 0, 0, 1e9, "0", F(repair_median), NULL, "median repair time (lognormal e^mu), e.g. 24h"},
	{NULL, "repair_sigma", CFG_NUM, 0, 0, 0, 10, "0", F(repair_sigma), NULL, "lognormal sigma of ln(repair time)"},
	{NULL, "planned", CFG_BOOL, 0, 0, 0, 0, "false", F(planned), NULL, "a planned stop: the job checkpoints first and loses no work"},
	{NULL, "detection", CFG_ENUM, 0, 0, 0, 0, "immediate", F(detection), detections, "immediate, or timeout: a hang noticed only when the collective timeout fires"},
	{NULL, "source", CFG_STR, 0, 0, 0, 0, "", F(source), NULL, "where the figures come from"},
};
#undef F

static const struct cfg_table table = {keys, sizeof keys / sizeof keys[0]};

const struct cfg_table *fail_keys(void)
{
	return &table;
}

const char *fail_per_name(int per)
{
	return pers[per];
}

const char *fail_repair_name(int repair)
{
	return repairs[repair];
}

double fail_job_rate(const struct fail_component *c, int64_t gpus, int64_t nodes)
{
	double units = c->per == FAIL_PER_GPU ? (double)gpus : c->per == FAIL_PER_NODE ? (double)nodes : 1;
	return c->rate * units / 3600.0;
}

struct sections {
	char name[FAIL_MAX + 1][FAIL_NAME_MAX];
	int n;
	int too_long;
};

/* inih handler: records each section name once, in file order. */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct sections *s = user;
	int i;

	(void)name;
	(void)value;
	if (!*section)
		return 1;
	for (i = 0; i < s->n; i++)
		if (strcmp(s->name[i], section) == 0)
			return 1;
	if (strlen(section) >= FAIL_NAME_MAX) {
		s->too_long = 1;
		return 1;
	}
	if (s->n <= FAIL_MAX)
		snprintf(s->name[s->n++], FAIL_NAME_MAX, "%s", section);
	return 1;
}

/* Line of "[name]" in text, 0 if not found. */
static int section_line(const char *text, const char *name)
{
	const char *s = text;
	size_t l = strlen(name);
	int line = 1;

	while (*s) {
		const char *p = s;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '[' && strncmp(p + 1, name, l) == 0 && p[1 + l] == ']')
			return line;
		s = strchr(s, '\n');
		if (!s)
			break;
		s++;
		line++;
	}
	return 0;
}

/* The checks one row of the table cannot make, and the derived rate. */
static int check(struct fail_component *c, const char *path, struct err *e)
{
	const char *n = c->name;
	int l = c->line;

	if (c->rate < 0 && c->count <= 0)
		return err_set(e, ERR_INPUT, path, l, "[%s]: give rate, or count_in_window with window_hours%s",
			       n, c->per == FAIL_PER_JOB ? "" : " and units_in_window");
	if (c->rate >= 0 && c->count > 0)
		return err_set(e, ERR_INPUT, path, l, "[%s]: give rate or count_in_window, not both", n);
	if (c->rate < 0) {
		if (c->window_hours <= 0)
			return err_set(e, ERR_INPUT, path, l, "[%s]: count_in_window needs window_hours (> 0)", n);
		if (c->per != FAIL_PER_JOB && c->units <= 0)
			return err_set(e, ERR_INPUT, path, l, "[%s]: count_in_window per %s needs units_in_window (%ss observed)",
				       n, pers[c->per], pers[c->per]);
		c->rate = c->count / (c->window_hours * (c->per == FAIL_PER_JOB ? 1 : c->units));
	}
	if (c->dist == FAIL_WEIBULL && c->shape <= 0)
		return err_set(e, ERR_INPUT, path, l, "[%s]: distribution = weibull needs shape (e.g. shape = 0.7)", n);
	if (c->dist == FAIL_EXPONENTIAL && c->shape > 0)
		return err_set(e, ERR_INPUT, path, l, "[%s]: shape applies to distribution = weibull only", n);
	if (c->dist == FAIL_WEIBULL && c->shape < 0.05)
		return err_set(e, ERR_INPUT, path, l, "[%s]: shape = %g is too small (at least 0.05)", n, c->shape);
	if (c->repair != FAIL_REPAIR_NONE && c->repair_median <= 0)
		return err_set(e, ERR_INPUT, path, l, "[%s]: repair = %s needs repair_median (e.g. 24h)",
			       n, repairs[c->repair]);
	if (c->planned && c->repair != FAIL_REPAIR_NONE)
		return err_set(e, ERR_INPUT, path, l, "[%s]: a planned stop needs no repair (repair = none)", n);
	return 0;
}

int fail_load(const char *name_or_path, struct fail_catalog *cat, const char *where, int line,
	      struct err *e)
{
	char path[PATH_MAX], *text = NULL;
	struct sections *secs = NULL;
	size_t len;
	int rc, i;

	memset(cat, 0, sizeof *cat);
	rc = catalog_resolve("failures", name_or_path, path, sizeof path, where, line,
			     "[failures] catalog", e);
	if (!rc)
		rc = cfg_read_file(path, &text, &len, e);
	if (rc)
		return rc;
	snprintf(cat->name, sizeof cat->name, "%s", name_or_path);
	snprintf(cat->path, sizeof cat->path, "%s", path);
	secs = calloc(1, sizeof *secs);
	if (!secs) {
		rc = err_set(e, ERR_SYSTEM, path, 0, "out of memory");
		goto out;
	}
	ini_allow_multiline = 0;  /* as cfg reads it: an indented line is a key, not a continuation */
	ini_parse_string(text, on_key, secs);  /* errors are reported by cfg_parse_entry below */
	if (secs->n == 0) {
		/* junk or keys outside a section are reported as such; else it is empty */
		struct fail_component scratch;
		rc = cfg_parse_entry(&table, &scratch, sizeof scratch, "-", path, text, len, e);
		if (!rc || strstr(e->msg, "no entry [")) {
			err_clear(e);
			rc = err_set(e, ERR_INPUT, path, 0, "no components: expected one [section] per failing component");
		}
		goto out;
	}
	if (secs->too_long || secs->n > FAIL_MAX) {
		rc = err_set(e, ERR_INPUT, path, 0, secs->too_long ? "a section name is longer than %d characters"
			     : "more than %d components", secs->too_long ? FAIL_NAME_MAX - 1 : FAIL_MAX);
		goto out;
	}
	for (i = 0; i < secs->n && !rc; i++) {
		struct fail_component *c = &cat->c[i];
		c->per = -1;  /* required: no default */
		rc = cfg_parse_entry(&table, c, sizeof *c, secs->name[i], path, text, len, e);
		snprintf(c->name, sizeof c->name, "%s", secs->name[i]);
		c->line = section_line(text, c->name);
		if (!rc && c->per < 0)
			rc = err_set(e, ERR_INPUT, path, c->line, "[%s]: missing key 'per' (gpu, node or job)", c->name);
		if (!rc)
			rc = check(c, path, e);
	}
	if (!rc)
		cat->n = secs->n;
out:
	free(secs);
	free(text);
	return rc;
}
