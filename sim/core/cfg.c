/*
 * cfg.c — table-driven INI loading on top of libinih (see cfg.h).
 *
 * libinih does the tokenising; we feed it through our own line reader so that
 * every handler call knows its line number, and so that binary junk, overlong
 * lines and unknown or repeated sections are caught at the line they occur.
 */
#include "cfg.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SECTIONS 256
#define SECTION_MAX 64

struct parse {
	const struct cfg_table *t;
	void *target;
	int *lines;           /* per key, may be NULL */
	int *seen;            /* per key, line of this section's setting (entry mode) */
	const char *file;
	const char *text;
	size_t len, pos;
	int lineno;
	int any;              /* number of keys set */
	struct cfg_entry *ents; /* entry mode: the sections to load (nents), else NULL */
	size_t nents;
	void *scratch;        /* entry mode: target for the other sections */
	char cur[SECTION_MAX];
	char names[MAX_SECTIONS][SECTION_MAX];
	int name_line[MAX_SECTIONS];
	int nnames;
	struct err *e;
};

int cfg_read_file(const char *path, char **text, size_t *len, struct err *e)
{
	FILE *f;
	char *buf = NULL;
	size_t n = 0, cap = 0, got, want;
	struct stat st;

	*text = NULL;
	*len = 0;
	f = fopen(path, "rb");
	if (!f)
		return err_set(e, ERR_INPUT, path, 0, "cannot open: %s", strerror(errno));
	/* a file's own size: the text, one byte more to meet its end, the NUL
	 * (a scenario keeps its text: 128 KiB for each was a twentieth of the
	 * heap of a simulate); else 128 KiB, doubled as it fills */
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 &&
	    (uintmax_t)st.st_size <= CFG_MAX_FILE)
		cap = (size_t)st.st_size + 2;
	for (;;) {
		if (!buf || n + 2 > cap) {
			char *nb;
			cap = buf ? cap * 2 : cap ? cap : 65536 * 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return err_set(e, ERR_SYSTEM, path, 0, "out of memory reading the file");
			}
			buf = nb;
		}
		want = cap - n - 1;
		got = fread(buf + n, 1, want, f);
		n += got;
		if (n > CFG_MAX_FILE) {
			free(buf);
			fclose(f);
			return err_set(e, ERR_INPUT, path, 0, "file is larger than %u MiB; "
				       "expected a small INI text file", CFG_MAX_FILE >> 20);
		}
		if (got < want)
			break;
	}
	if (ferror(f)) {
		free(buf);
		fclose(f);
		return err_set(e, ERR_INPUT, path, 0, "cannot read: %s (is it a directory?)",
			       strerror(errno ? errno : EIO));
	}
	fclose(f);
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

int cfg_index(const struct cfg_table *t, const char *section, const char *name)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		const struct cfg_key *k = &t->keys[i];
		if (k->name[0] == name[0] && strcmp(k->name, name) == 0 &&  /* the first letter rules out most */
		    (!k->section || (section && strcmp(k->section, section) == 0)))
			return (int)i;
	}
	return -1;
}

static int section_known(const struct cfg_table *t, const char *s)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (!t->keys[i].section || strcmp(t->keys[i].section, s) == 0)
			return 1;
	return 0;
}

/* What key k accepts, in words, written into buf (n bytes); returns buf.
 * Built only for an error message or the key reference: formatting it for
 * every stored value was a third of loading a scenario. */
static const char *expected(const struct cfg_key *k, char *buf, size_t n)
{
	size_t i, used;

	switch (k->type) {
	case CFG_BOOL:
		snprintf(buf, n, "true or false");
		return buf;
	case CFG_STR:
		snprintf(buf, n, "%s", k->help && strstr(k->help, "path") ? "a name or a path" : "a word");
		return buf;
	case CFG_ENUM:
		used = (size_t)snprintf(buf, n, "one of ");
		for (i = 0; k->choices[i] && used < n; i++)
			used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "|" : "", k->choices[i]);
		return buf;
	default:
		break;
	}
	used = (size_t)snprintf(buf, n, "%s", k->type == CFG_INT ? "an integer" : "a number");
	if (k->unit != UNIT_NONE && used < n)
		used += (size_t)snprintf(buf + used, n - used, " (%s)", units_expect(k->unit));
	if (used < n)
		used += (size_t)snprintf(buf + used, n - used, " from %g to %g", k->min, k->max);
	if ((k->flags & CFG_BOOLV) && used < n)
		used += (size_t)snprintf(buf + used, n - used, ", true, false");
	if ((k->flags & CFG_AUTO) && used < n)
		snprintf(buf + used, n - used, ", or auto");
	else if ((k->flags & CFG_DEFAULTV) && used < n)
		snprintf(buf + used, n - used, ", or default");
	return buf;
}

/* Converts value for key k into target; on error fills e at file:line. */
static int store(const struct cfg_key *k, void *target, const char *value,
		 const char *file, int line, struct err *e)
{
	char why[160], exp[400];
	char *field = (char *)target + k->off;
	double v;
	size_t i;

	if (!*value)
		return err_set(e, ERR_INPUT, file, line, "[%s] %s is empty; expected %s",
			       k->section ? k->section : "entry", k->name, expected(k, exp, sizeof exp));
	if (((k->flags & CFG_AUTO) && strcmp(value, "auto") == 0) ||
	    ((k->flags & CFG_DEFAULTV) && strcmp(value, "default") == 0)) {
		if (k->type == CFG_INT)
			*(int64_t *)field = -1;
		else
			*(double *)field = -1;
		return 0;
	}
	if ((k->flags & CFG_BOOLV) && (!strcmp(value, "true") || !strcmp(value, "false"))) {
		*(int64_t *)field = value[0] == 't' ? -2 : 0;
		return 0;
	}
	switch (k->type) {
	case CFG_BOOL:
		if (!strcmp(value, "true") || !strcmp(value, "yes") || !strcmp(value, "on") || !strcmp(value, "1"))
			*(int *)field = 1;
		else if (!strcmp(value, "false") || !strcmp(value, "no") || !strcmp(value, "off") || !strcmp(value, "0"))
			*(int *)field = 0;
		else
			return err_set(e, ERR_INPUT, file, line, "%s = %s: expected true or false",
				       k->name, value);
		return 0;
	case CFG_ENUM:
		for (i = 0; k->choices[i]; i++)
			if (strcmp(value, k->choices[i]) == 0) {
				*(int *)field = (int)i;
				return 0;
			}
		{
			size_t nc = i;
			const char *near = err_nearest(value, k->choices, nc);
			if (near)
				return err_set(e, ERR_INPUT, file, line, "%s = %s: unknown value; did you mean '%s'? (expected %s)",
					       k->name, value, near, expected(k, exp, sizeof exp));
			return err_set(e, ERR_INPUT, file, line, "%s = %s: unknown value; expected %s",
				       k->name, value, expected(k, exp, sizeof exp));
		}
	case CFG_STR:
		if (strlen(value) >= CFG_STR_MAX)
			return err_set(e, ERR_INPUT, file, line, "%s: value is %zu characters long; at most %d",
				       k->name, strlen(value), CFG_STR_MAX - 1);
		strcpy(field, value);
		return 0;
	case CFG_INT:
	case CFG_NUM:
		if (units_parse(value, k->unit, &v, why, sizeof why))
			return err_set(e, ERR_INPUT, file, line, "%s = %s: %s; expected %s",
				       k->name, value, why, expected(k, exp, sizeof exp));
		if (!(v >= k->min && v <= k->max))  /* NaN fails too */
			return err_set(e, ERR_INPUT, file, line, "%s = %s: out of range; expected %s",
				       k->name, value, expected(k, exp, sizeof exp));
		if (k->type == CFG_INT) {
			if (v != floor(v))
				return err_set(e, ERR_INPUT, file, line, "%s = %s: not a whole number; expected %s",
					       k->name, value, expected(k, exp, sizeof exp));
			*(int64_t *)field = (int64_t)v;
		} else {
			*(double *)field = v;
		}
		return 0;
	}
	return err_set(e, ERR_SYSTEM, file, line, "internal: key %s has no type", k->name);
}

int cfg_store(const struct cfg_table *t, size_t i, void *target, const char *value,
	      const char *file, int line, struct err *e)
{
	const struct cfg_key *k = &t->keys[i];

	if (k->type == CFG_STR && !*value) {  /* an empty text (a default) */
		((char *)target + k->off)[0] = '\0';
		return 0;
	}
	return store(k, target, value, file, line, e);
}

int cfg_defaults(const struct cfg_table *t, void *target, struct err *e)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		const struct cfg_key *k = &t->keys[i];
		if (k->def && k->type == CFG_STR && !*k->def)
			((char *)target + k->off)[0] = '\0';  /* an empty text default */
		else if (k->def && store(k, target, k->def, "(built-in default)", 0, e))
			return e->code;
	}
	return 0;
}

static void list_names(const struct cfg_table *t, const char *section, int sections,
		       const char **out, size_t *n, size_t cap)
{
	size_t i, j;

	*n = 0;
	for (i = 0; i < t->n && *n < cap; i++) {
		const char *s = sections ? t->keys[i].section : t->keys[i].name;
		if (!sections && section && t->keys[i].section && strcmp(t->keys[i].section, section))
			continue;
		if (!s)
			continue;
		for (j = 0; j < *n; j++)
			if (strcmp(out[j], s) == 0)
				break;
		if (j == *n)
			out[(*n)++] = s;
	}
}

static int unknown_key(const struct parse *p, const char *section, const char *name)
{
	const char *names[256];
	size_t n;
	const char *near;

	list_names(p->t, section, 0, names, &n, 256);
	near = err_nearest(name, names, n);
	if (near)
		return err_set(p->e, ERR_INPUT, p->file, p->lineno,
			       "unknown key '%s' in [%s]; did you mean '%s'?", name, section, near);
	return err_set(p->e, ERR_INPUT, p->file, p->lineno,
		       "unknown key '%s' in [%s] (run 'simulate --keys' for the list of keys)", name, section);
}

static int on_section(struct parse *p, const char *s, size_t n)
{
	char name[SECTION_MAX];
	int i;

	if (n >= SECTION_MAX)
		return err_set(p->e, ERR_INPUT, p->file, p->lineno,
			       "section name is %zu characters long; at most %d", n, SECTION_MAX - 1);
	memcpy(name, s, n);
	name[n] = '\0';
	for (i = 0; i < p->nnames; i++)
		if (strcmp(p->names[i], name) == 0)
			return err_set(p->e, ERR_INPUT, p->file, p->lineno,
				       "duplicate section [%s] (first at line %d)", name, p->name_line[i]);
	if (!p->ents && !section_known(p->t, name)) {
		const char *names[64];
		size_t k;
		const char *near;
		list_names(p->t, NULL, 1, names, &k, 64);
		near = err_nearest(name, names, k);
		if (near)
			return err_set(p->e, ERR_INPUT, p->file, p->lineno,
				       "unknown section [%s]; did you mean [%s]?", name, near);
		return err_set(p->e, ERR_INPUT, p->file, p->lineno, "unknown section [%s]", name);
	}
	if (p->nnames < MAX_SECTIONS) {
		strcpy(p->names[p->nnames], name);
		p->name_line[p->nnames++] = p->lineno;
	}
	if (p->seen)
		memset(p->seen, 0, p->t->n * sizeof *p->seen);
	return 0;
}

/* 1 when one of the 8 bytes at s is below 0x20 or is 0x7f (the bytes the
 * text check rejects, with tab, CR and LF); it may flag a word of good bytes,
 * never misses one (the zero-byte test of Hacker's Delight, 6-1). */
static int word_suspect(const char *s)
{
	const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
	uint64_t w, del;

	memcpy(&w, s, sizeof w);
	del = w ^ (ones * 0x7f);
	return ((((w - ones * 0x20) & ~w) | ((del - ones) & ~del)) & highs) != 0;
}

/* fgets-style reader over p->text (checked by text_check) that counts lines;
 * lines longer than num - 1 bytes lose their comment or are an error. */
static char *reader(char *buf, int num, void *stream)
{
	struct parse *p = stream;
	const char *start, *nl, *s;
	size_t n;

	if (p->e->code || p->pos >= p->len)
		return NULL;
	start = p->text + p->pos;
	nl = memchr(start, '\n', p->len - p->pos);
	n = nl ? (size_t)(nl - start) + 1 : p->len - p->pos;
	p->pos += n;
	p->lineno++;
	if (n + 1 > (size_t)num) {
		/* lines are read into num bytes: a long comment is dropped
		 * here, a long setting is an error */
		size_t c = 0;
		while (c < n && (start[c] == ' ' || start[c] == '\t'))
			c++;
		if (c == n || start[c] != ';') {
			for (c = 1; c < n; c++)
				if (start[c] == ';' && (start[c - 1] == ' ' || start[c - 1] == '\t'))
					break;
		}
		if (c + 2 > (size_t)num) {
			err_set(p->e, ERR_INPUT, p->file, p->lineno,
				"line is %zu bytes long; a setting may be at most %d", n, num - 2);
			return NULL;
		}
		n = c;
		memcpy(buf, start, n);
		buf[n++] = '\n';
		buf[n] = '\0';
	} else {
		memcpy(buf, start, n);
		buf[n] = '\0';
	}
	for (s = buf; *s == ' ' || *s == '\t'; s++)
		;
	if (p->lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
	    (unsigned char)s[2] == 0xBF)
		s += 3;
	if (*s == '[') {
		const char *close = strchr(s, ']');
		if (!close) {
			err_set(p->e, ERR_INPUT, p->file, p->lineno, "section header without ']'");
			return NULL;
		}
		if (on_section(p, s + 1, (size_t)(close - s - 1)))
			return NULL;
	}
	return buf;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse *p = user;
	void *target = p->target;
	int idx, *lines = p->lines;

	if (p->e->code)
		return 0;
	if (!*section) {
		err_set(p->e, ERR_INPUT, p->file, p->lineno,
			"key '%s' is outside any section; put it under a [section] header", name);
		return 0;
	}
	if (p->ents) {
		size_t j = 0;
		while (j < p->nents && strcmp(section, p->ents[j].section) != 0)
			j++;
		target = j < p->nents ? p->ents[j].target : p->scratch;  /* another entry: check it, keep nothing */
		if (j < p->nents)
			p->ents[j].found = 1;
		lines = NULL;
	}
	idx = cfg_index(p->t, section, name);
	if (idx < 0) {
		unknown_key(p, section, name);
		return 0;
	}
	if ((p->seen && p->seen[idx]) || (!p->seen && lines && lines[idx] > 0)) {
		err_set(p->e, ERR_INPUT, p->file, p->lineno,
			"duplicate key '%s' in [%s] (first set at line %d)", name, section,
			p->seen ? p->seen[idx] : lines[idx]);
		return 0;
	}
	if (store(&p->t->keys[idx], target, value, p->file, p->lineno, p->e))
		return 0;
	if (p->seen)
		p->seen[idx] = p->lineno;
	if (lines)
		lines[idx] = p->lineno;
	p->any++;
	return 1;
}

/* The whole text is checked before any line is parsed, so a binary file is
 * named one whatever its first line happens to hold: the first byte below
 * 0x20 other than tab, CR and LF, or 0x7f, with its line and column. */
static int text_check(const struct parse *p)
{
	const char *t = p->text, *line;
	size_t i = 0, n = p->len;
	unsigned char c;
	int lineno = 1;

	for (;;) {
		for (; i + 8 <= n && !word_suspect(t + i); i += 8)
			;  /* eight bytes at a time up to the first word that may hold junk */
		if (i >= n)
			return 0;
		c = (unsigned char)t[i];
		if (c == 0 || (c < 32 && c != '\t' && c != '\r' && c != '\n') || c == 127)
			break;
		i++;
	}
	line = t;
	for (const char *nl; (nl = memchr(line, '\n', (size_t)(t + i - line))); line = nl + 1)
		lineno++;
	return err_set(p->e, ERR_INPUT, p->file, lineno,
		       "binary data (byte 0x%02x at column %zu); expected a text INI file", c,
		       (size_t)(t + i - line) + 1);
}

static int run(struct parse *p)
{
	int rc;

	if (text_check(p))
		return p->e->code;
	ini_allow_multiline = 0;  /* an indented line is a key, not a continuation */
	rc = ini_parse_stream(reader, p, handler, p);
	if (p->e->code)
		return p->e->code;
	if (rc == -2)
		return err_set(p->e, ERR_SYSTEM, p->file, 0, "out of memory parsing");
	if (rc > 0)
		return err_set(p->e, ERR_INPUT, p->file, rc,
			       "syntax error; expected '[section]', 'key = value' or a ';' comment");
	return 0;
}

int cfg_parse(const struct cfg_table *t, void *target, struct cfg_origin *origin,
	      const char *file, const char *text, size_t len, struct err *e)
{
	struct parse *p = calloc(1, sizeof *p);
	int rc;

	if (!p)
		return err_set(e, ERR_SYSTEM, file, 0, "out of memory");
	p->t = t;
	p->target = target;
	p->lines = origin ? origin->line : NULL;
	p->file = file;
	p->text = text;
	p->len = len;
	p->e = e;
	if (origin)
		origin->file = file;
	rc = run(p);
	if (!rc && p->any == 0)
		rc = err_set(e, ERR_INPUT, file, 0, "no settings found (empty file?)");
	free(p);
	return rc;
}

int cfg_load_file(const struct cfg_table *t, void *target, const char *path, struct err *e)
{
	struct cfg_origin origin = {calloc(t->n, sizeof(int)), path};
	char *text = NULL;
	size_t len;
	int rc;

	if (!origin.line)
		return err_set(e, ERR_SYSTEM, path, 0, "out of memory");
	rc = cfg_read_file(path, &text, &len, e);
	if (!rc)
		rc = cfg_defaults(t, target, e);
	if (!rc)
		rc = cfg_parse(t, target, &origin, path, text, len, e);
	if (!rc)
		rc = cfg_check_required(t, &origin, path, e);
	free(text);
	free(origin.line);
	return rc;
}

int cfg_parse_entries(const struct cfg_table *t, struct cfg_entry *ents, size_t n, size_t target_size,
		      const char *file, const char *text, size_t len, struct err *e)
{
	struct parse *p = calloc(1, sizeof *p);
	int rc = 0, i;
	size_t j;

	if (!p)
		return err_set(e, ERR_SYSTEM, file, 0, "out of memory");
	p->t = t;
	p->file = file;
	p->text = text;
	p->len = len;
	p->ents = ents;
	p->nents = n;
	p->e = e;
	p->scratch = calloc(1, target_size);
	p->seen = calloc(t->n, sizeof *p->seen);
	if (!p->scratch || !p->seen) {
		rc = err_set(e, ERR_SYSTEM, file, 0, "out of memory");
		goto out;
	}
	for (j = 0; j < n && !rc; j++) {
		ents[j].found = 0;
		rc = cfg_defaults(t, ents[j].target, e);
	}
	if (!rc)
		rc = run(p);
	for (j = 0; j < n && !rc; j++) {
		const char *names[MAX_SECTIONS], *near;
		if (ents[j].found || ents[j].optional)
			continue;
		for (i = 0; i < p->nnames; i++)
			names[i] = p->names[i];
		near = err_nearest(ents[j].section, names, (size_t)p->nnames);
		if (near)
			rc = err_set(e, ERR_INPUT, file, 0, "no entry [%s]; did you mean '%s'?", ents[j].section, near);
		else
			rc = err_set(e, ERR_INPUT, file, 0, "no entry [%s] (%d entries in the file)",
				     ents[j].section, p->nnames);
	}
out:
	free(p->scratch);
	free(p->seen);
	free(p);
	return rc;
}

int cfg_parse_entry(const struct cfg_table *t, void *target, size_t target_size,
		    const char *section, const char *file, const char *text, size_t len,
		    struct err *e)
{
	struct cfg_entry ent = {section, target, 0, 0};

	return cfg_parse_entries(t, &ent, 1, target_size, file, text, len, e);
}

int cfg_set(const struct cfg_table *t, void *target, struct cfg_origin *origin,
	    const char *assignment, struct err *e)
{
	char buf[CFG_STR_MAX * 2], *dot, *eq, *key, *val, *end;
	int idx;

	if (strlen(assignment) >= sizeof buf)
		return err_set(e, ERR_INPUT, "--set", 0, "'%.40s...' is too long", assignment);
	strcpy(buf, assignment);
	eq = strchr(buf, '=');
	dot = strchr(buf, '.');
	if (!eq || !dot || dot > eq)
		return err_set(e, ERR_INPUT, "--set", 0,
			       "'%s': expected section.key=value, e.g. training.strategy=fsdp", assignment);
	*dot = *eq = '\0';
	key = dot + 1;
	val = eq + 1;
	for (end = eq - 1; end > key && isspace((unsigned char)*end); end--)
		*end = '\0';
	while (isspace((unsigned char)*val))
		val++;
	if (!section_known(t, buf))
		return err_set(e, ERR_INPUT, "--set", 0, "unknown section [%s] in '%s'", buf, assignment);
	idx = cfg_index(t, buf, key);
	if (idx < 0) {
		const char *names[256], *near;
		size_t n;
		list_names(t, buf, 0, names, &n, 256);
		near = err_nearest(key, names, n);
		return err_set(e, ERR_INPUT, "--set", 0, "unknown key '%s' in [%s]%s%s%s", key, buf,
			       near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
	}
	if (store(&t->keys[idx], target, val, "--set", 0, e))
		return e->code;
	if (origin && origin->line)
		origin->line[idx] = -1;
	return 0;
}

int cfg_check_required(const struct cfg_table *t, const struct cfg_origin *origin,
		       const char *file, struct err *e)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if ((t->keys[i].flags & CFG_REQUIRED) && origin->line[i] == 0)
			return err_set(e, ERR_INPUT, file, 0, "missing required key '%s' in [%s]%s",
				       t->keys[i].name, t->keys[i].section ? t->keys[i].section : "entry",
				       t->keys[i].help ? "" : "");
	return 0;
}

const char *cfg_format_value(const struct cfg_table *t, size_t i, const void *target,
			     char *buf, size_t n)
{
	const struct cfg_key *k = &t->keys[i];
	const char *field = (const char *)target + k->off;

	switch (k->type) {
	case CFG_BOOL:
		snprintf(buf, n, "%s", *(const int *)field ? "true" : "false");
		break;
	case CFG_ENUM:
		snprintf(buf, n, "%s", k->choices[*(const int *)field]);
		break;
	case CFG_STR:
		snprintf(buf, n, "%s", field);
		break;
	case CFG_INT:
		if (*(const int64_t *)field == -1 && (k->flags & (CFG_AUTO | CFG_DEFAULTV)))
			snprintf(buf, n, "%s", (k->flags & CFG_AUTO) ? "auto" : "default");
		else if ((k->flags & CFG_BOOLV) && (*(const int64_t *)field == -2 || *(const int64_t *)field == 0))
			snprintf(buf, n, "%s", *(const int64_t *)field ? "true" : "false");
		else
			snprintf(buf, n, "%lld", (long long)*(const int64_t *)field);
		break;
	case CFG_NUM:
		if (*(const double *)field == -1 && (k->flags & (CFG_AUTO | CFG_DEFAULTV)))
			snprintf(buf, n, "%s", (k->flags & CFG_AUTO) ? "auto" : "default");
		else
			snprintf(buf, n, "%.10g", *(const double *)field);
		break;
	}
	return buf;
}

void cfg_write_reference(const struct cfg_table *t, void *stream)
{
	FILE *f = stream;
	size_t i;
	char exp[400];

	fprintf(f, "| section | key | default | accepts | meaning |\n|---|---|---|---|---|\n");
	for (i = 0; i < t->n; i++) {
		const struct cfg_key *k = &t->keys[i];
		fprintf(f, "| [%s] | `%s` | %s | %s | %s |\n", k->section ? k->section : "entry",
			k->name, k->def ? k->def : ((k->flags & CFG_REQUIRED) ? "(required)" : "—"),
			expected(k, exp, sizeof exp), k->help ? k->help : "");
	}
}
