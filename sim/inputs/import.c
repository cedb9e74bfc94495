/*
 * import.c — the import result list and the JSON (cJSON) and YAML (libyaml)
 * field readers shared by the importers (see import.h, import_int.h).
 *
 * Every reader checks the field's type and range and names file:line and the
 * field's dotted path when it is wrong. libyaml gives each node its line; for
 * JSON (cJSON keeps no positions) the line is found by searching the text for
 * the path's keys in order, which is exact for the configs these files are.
 */
#include "import_int.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void imp_init(struct imp_result *r)
{
	memset(r, 0, sizeof *r);
	r->hash = 1469598103934665603ull;
}

int imp_add_file(struct imp_result *r, const char *path, const char *text, size_t len)
{
	size_t i;

	if (r->nfiles == IMP_MAX_FILES)
		return -1;
	snprintf(r->files[r->nfiles], sizeof r->files[0], "%s", path);
	for (i = 0; i < len; i++) {
		r->hash ^= (unsigned char)text[i];
		r->hash *= 1099511628211ull;
	}
	return r->nfiles++;
}

int imp_add(struct imp_result *r, int file, int line, const char *field, const char *section,
	    const char *key, struct err *e, const char *fmt, ...)
{
	struct imp_setting *s;
	va_list ap;

	if (r->nset == IMP_MAX_SETTINGS)
		return err_set(e, ERR_SYSTEM, r->files[file], line,
			       "internal: more than %d imported settings", IMP_MAX_SETTINGS);
	s = &r->set[r->nset++];
	memset(s, 0, sizeof *s);
	snprintf(s->section, sizeof s->section, "%s", section);
	snprintf(s->key, sizeof s->key, "%s", key);
	snprintf(s->field, sizeof s->field, "%s", field);
	s->file = file;
	s->line = line;
	va_start(ap, fmt);
	vsnprintf(s->value, sizeof s->value, fmt, ap);
	va_end(ap);
	return 0;
}

void imp_note(struct imp_result *r, const char *fmt, ...)
{
	va_list ap;

	if (r->nnotes == IMP_MAX_NOTES)
		return;
	va_start(ap, fmt);
	vsnprintf(r->notes[r->nnotes++], sizeof r->notes[0], fmt, ap);
	va_end(ap);
}

const char *imp_leaf(const char *path)
{
	const char *dot = strrchr(path, '.');
	return dot ? dot + 1 : path;
}

int imp_check_names(struct imp_result *r, const char *file, const char *prefix,
		    const char *const *names, const int *lines, size_t n,
		    const char *const *known, struct err *e)
{
	size_t i, j, nk = 0;
	const char *near;

	while (known[nk])
		nk++;
	for (i = 0; i < n; i++) {
		for (j = 0; j < nk; j++)
			if (strcmp(names[i], known[j]) == 0)
				break;
		if (j < nk)
			continue;
		near = err_nearest(names[i], known, nk);
		if (near)
			return err_set(e, ERR_INPUT, file, lines[i], "unknown field '%s%s%s'; did you mean '%s'?",
				       prefix, *prefix ? "." : "", names[i], near);
		imp_note(r, "%s:%d: %s%s%s is not read by shardcast (ignored)", file, lines[i],
			 prefix, *prefix ? "." : "", names[i]);
	}
	return 0;
}

/* The fields of one mapping or object, sorted by name (then line) so that a
 * duplicate is found in n log n (a 16 MiB file may hold a million keys). */
struct field {
	const char *name;
	int line;
	size_t at;               /* position in the mapping */
};

static int by_name(const void *a, const void *b)
{
	const struct field *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* The first field (in f's order after sorting) whose name repeats, or NULL. */
static const struct field *repeated(struct field *f, size_t n)
{
	size_t i;

	qsort(f, n, sizeof *f, by_name);
	for (i = 1; i < n; i++)
		if (strcmp(f[i - 1].name, f[i].name) == 0)
			return &f[i];
	return NULL;
}

static int too_many_fields(const char *file, int line, const char *prefix, size_t n, struct err *e)
{
	return err_set(e, ERR_INPUT, file, line, "%s has %zu fields; a config read here may have at most %d "
		       "per mapping", *prefix ? prefix : "the top level", n, IMP_MAX_FIELDS);
}

int imp_read(const char *path, char **text, size_t *len, struct err *e)
{
	struct stat st;

	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (unsigned long long)st.st_size > CFG_MAX_FILE)
		return err_set(e, ERR_INPUT, path, 0, "file is %lld bytes; a config file may be at most %u MiB",
			       (long long)st.st_size, CFG_MAX_FILE >> 20);
	return cfg_read_file(path, text, len, e);
}

void imp_relative(const char *base, const char *rel, char *out, size_t n)
{
	const char *slash = strrchr(base, '/');

	if (rel[0] == '/' || !slash)
		snprintf(out, n, "%s", rel);
	else
		snprintf(out, n, "%.*s/%s", (int)(slash - base), base, rel);
}

/* ---- JSON ---------------------------------------------------------------------- */

static int line_at(const char *text, size_t pos)
{
	int line = 1;
	size_t i;

	for (i = 0; i < pos && text[i]; i++)
		line += text[i] == '\n';
	return line;
}

/* Position just past "key" followed by ':' at or after from, or -1. */
static long find_key(const char *text, size_t len, size_t from, const char *key, size_t klen)
{
	size_t i, k;

	for (i = from; i + klen + 2 <= len; i++) {
		if (text[i] != '"' || strncmp(text + i + 1, key, klen) != 0 || text[i + 1 + klen] != '"')
			continue;
		for (k = i + klen + 2; k < len && isspace((unsigned char)text[k]); k++)
			;
		if (k < len && text[k] == ':')
			return (long)(k + 1);
	}
	return -1;
}

int imp_json_line(const struct imp_json *j, const char *path)
{
	size_t from = 0;
	long at = -1;
	const char *p = path, *dot;

	while (*p) {
		dot = strchr(p, '.');
		size_t klen = dot ? (size_t)(dot - p) : strlen(p);
		at = find_key(j->text, j->len, from, p, klen);
		if (at < 0)
			return 0;
		from = (size_t)at;
		p += klen + (dot ? 1 : 0);
	}
	return at < 0 ? 0 : line_at(j->text, (size_t)at);
}

/* Duplicate keys in object o (one level: only the objects the importers read
 * are checked, unknown keys' values are never walked). */
static int json_dups(const struct imp_json *j, const cJSON *o, const char *prefix, struct err *e)
{
	struct field *f;
	const struct field *d;
	const cJSON *a;
	char path[256];
	size_t n = 0;
	int rc = 0;

	cJSON_ArrayForEach(a, o)
		n++;
	if (n > IMP_MAX_FIELDS)
		return too_many_fields(j->file, imp_json_line(j, prefix), prefix, n, e);
	f = malloc((n ? n : 1) * sizeof *f);
	if (!f)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	n = 0;
	cJSON_ArrayForEach(a, o)
		if (a->string) {
			f[n].name = a->string;
			f[n].line = 0;
			f[n].at = n;
			n++;
		}
	d = repeated(f, n);
	if (d) {
		snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", d->name);
		rc = err_set(e, ERR_INPUT, j->file, imp_json_line(j, path), "duplicate field '%s'", path);
	}
	free(f);
	return rc;
}

/* The deepest nesting of objects and lists in text, and the line where it
 * passes IMP_MAX_DEPTH (strings skipped); cJSON's own limit is 1000. */
static int json_depth(const char *text, size_t len, int *line)
{
	size_t i;
	int depth = 0, in_str = 0, l = 1;

	for (i = 0; i < len; i++) {
		char c = text[i];
		if (c == '\n')
			l++;
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			if (++depth > IMP_MAX_DEPTH) {
				*line = l;
				return depth;
			}
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	return 0;
}

int imp_json_load(struct imp_json *j, const char *path, struct err *e)
{
	const char *end = NULL;

	int line = 0;

	memset(j, 0, sizeof *j);
	j->file = path;
	if (imp_read(path, &j->text, &j->len, e))
		return e->code;
	if (json_depth(j->text, j->len, &line))
		return err_set(e, ERR_INPUT, path, line, "objects and lists nested more than %d levels deep; "
			       "a config read here has a few", IMP_MAX_DEPTH);
	j->root = cJSON_ParseWithLengthOpts(j->text, j->len, &end, 0);
	if (j->root && end) {
		/* cJSON stops after the first value: anything but space after it is junk */
		const char *q = end;
		while (q < j->text + j->len && isspace((unsigned char)*q))
			q++;
		if (q < j->text + j->len) {
			cJSON_Delete(j->root);
			j->root = NULL;
			end = q;
		}
	}
	if (!j->root) {
		size_t pos = end && end >= j->text ? (size_t)(end - j->text) : 0, i, n = 0;
		char near[24];
		for (i = pos; i < j->len && isspace((unsigned char)j->text[i]); i++)
			;
		if (i >= j->len)
			return err_set(e, ERR_INPUT, path, line_at(j->text, pos),
				       "not valid JSON: the file ends inside an object or list "
				       "(a '}' or ']' missing?)");
		for (; i < j->len && n < sizeof near - 1 && j->text[i] != '\n'; i++)
			near[n++] = isprint((unsigned char)j->text[i]) ? j->text[i] : '?';
		near[n] = '\0';
		return err_set(e, ERR_INPUT, path, line_at(j->text, pos),
			       "not valid JSON near '%s'", near);
	}
	if (!cJSON_IsObject(j->root))
		return err_set(e, ERR_INPUT, path, 1, "expected a JSON object {...} at the top level");
	return json_dups(j, j->root, "", e);
}

void imp_json_free(struct imp_json *j)
{
	cJSON_Delete(j->root);
	free(j->text);
	j->root = NULL;
	j->text = NULL;
}

static const char *json_type(const cJSON *c)
{
	if (cJSON_IsString(c))
		return "a string";
	if (cJSON_IsNumber(c))
		return "a number";
	if (cJSON_IsBool(c))
		return "a boolean";
	if (cJSON_IsObject(c))
		return "an object";
	if (cJSON_IsArray(c))
		return "a list";
	return "null";
}

/* The item leaf(path) of o, NULL when absent or null; absent + required = error. */
static const cJSON *json_item(const struct imp_json *j, const cJSON *o, const char *path,
			      int flags, int *kind, struct err *e)
{
	const cJSON *c = o ? cJSON_GetObjectItemCaseSensitive(o, imp_leaf(path)) : NULL;

	*kind = IMP_ABSENT;
	if (c && cJSON_IsNull(c))
		c = NULL;
	if (!c && (flags & IMP_REQUIRED)) {
		/* located at the field if it is there as null, else at its parent */
		char parent[256];
		const char *dot = strrchr(path, '.');
		int line = imp_json_line(j, path);
		if (!line && dot) {
			snprintf(parent, sizeof parent, "%.*s", (int)(dot - path), path);
			line = imp_json_line(j, parent);
		}
		err_set(e, ERR_INPUT, j->file, line, "missing field '%s'", path);
	}
	return c;
}

int imp_json_num(const struct imp_json *j, const cJSON *o, const char *path, int flags,
		 double lo, double hi, double *out, int *kind, struct err *e)
{
	const cJSON *c = json_item(j, o, path, flags, kind, e);
	double v;

	if (!c)
		return e->code;
	if ((flags & IMP_ALLOW_AUTO) && cJSON_IsString(c) && strcmp(c->valuestring, "auto") == 0) {
		*kind = IMP_AUTO;
		return 0;
	}
	if (!cJSON_IsNumber(c))
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, path),
			       "%s is %s; expected %s%s", path, json_type(c),
			       (flags & IMP_INTEGER) ? "an integer" : "a number",
			       (flags & IMP_ALLOW_AUTO) ? " or \"auto\"" : "");
	v = c->valuedouble;
	if ((flags & IMP_INTEGER) && v != floor(v))
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, path),
			       "%s = %g: not a whole number", path, v);
	if (!(v >= lo && v <= hi))
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, path),
			       "%s = %g: out of range; expected %g to %g", path, v, lo, hi);
	*out = v;
	*kind = IMP_VALUE;
	return 0;
}

int imp_json_bool(const struct imp_json *j, const cJSON *o, const char *path, int flags,
		  int *out, int *kind, struct err *e)
{
	const cJSON *c = json_item(j, o, path, flags, kind, e);

	if (!c)
		return e->code;
	if ((flags & IMP_ALLOW_AUTO) && cJSON_IsString(c) && strcmp(c->valuestring, "auto") == 0) {
		*kind = IMP_AUTO;
		return 0;
	}
	if (!cJSON_IsBool(c))
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, path),
			       "%s is %s; expected true or false%s", path, json_type(c),
			       (flags & IMP_ALLOW_AUTO) ? " or \"auto\"" : "");
	*out = cJSON_IsTrue(c);
	*kind = IMP_VALUE;
	return 0;
}

int imp_json_str(const struct imp_json *j, const cJSON *o, const char *path, int flags,
		 char *out, size_t n, int *kind, struct err *e)
{
	const cJSON *c = json_item(j, o, path, flags, kind, e);

	if (!c)
		return e->code;
	if (!cJSON_IsString(c))
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, path),
			       "%s is %s; expected a string", path, json_type(c));
	if (strlen(c->valuestring) >= n)
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, path),
			       "%s: value is longer than %zu characters", path, n - 1);
	strcpy(out, c->valuestring);
	*kind = (flags & IMP_ALLOW_AUTO) && strcmp(out, "auto") == 0 ? IMP_AUTO : IMP_VALUE;
	return 0;
}

int imp_json_obj(const struct imp_json *j, const cJSON *o, const char *path,
		 const cJSON **out, struct err *e)
{
	int kind;
	const cJSON *c = json_item(j, o, path, 0, &kind, e);

	*out = NULL;
	if (!c)
		return 0;
	if (!cJSON_IsObject(c))
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, path),
			       "%s is %s; expected an object {...}", path, json_type(c));
	if (json_dups(j, c, path, e))
		return e->code;
	*out = c;
	return 0;
}

int imp_json_names(struct imp_result *r, const struct imp_json *j, const cJSON *o,
		   const char *prefix, const char *const *known, struct err *e)
{
	const char *names[128];
	int lines[128];
	char path[256];
	size_t n = 0;
	const cJSON *c;

	cJSON_ArrayForEach(c, o) {
		if (n == 128 || !c->string)
			break;
		snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", c->string);
		names[n] = c->string;
		lines[n++] = imp_json_line(j, path);
	}
	return imp_check_names(r, j->file, prefix, names, lines, n, known, e);
}

/* ---- YAML ------------------------------------------------------------------------ */

enum { Y_NULL, Y_BOOL, Y_NUM, Y_STR, Y_MAP, Y_SEQ };

static const char *const yes_words[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", NULL};
static const char *const no_words[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", NULL};

static int in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(s, *list) == 0)
			return 1;
	return 0;
}

/* The YAML 1.1 type of node n (PyYAML's resolver for plain scalars; numbers
 * written as 1e8 count as numbers too); *b or *v get a bool or number. */
static int ytype(const yaml_node_t *n, int *b, double *v)
{
	const char *s;
	char *end;

	if (n->type == YAML_MAPPING_NODE)
		return Y_MAP;
	if (n->type == YAML_SEQUENCE_NODE)
		return Y_SEQ;
	s = (const char *)n->data.scalar.value;
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return Y_STR;
	if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
		return Y_NULL;
	if (in_list(s, yes_words) || in_list(s, no_words)) {
		*b = in_list(s, yes_words);
		return Y_BOOL;
	}
	if (isdigit((unsigned char)s[0]) || ((s[0] == '-' || s[0] == '+' || s[0] == '.') &&
					     isdigit((unsigned char)s[1]))) {
		*v = strtod(s, &end);
		if (!*end && isfinite(*v))
			return Y_NUM;
	}
	return Y_STR;
}

static const char *yname(int t)
{
	static const char *const names[] = {"null", "a boolean", "a number", "a string",
					    "a mapping", "a list"};
	return names[t];
}

/* Keys of mapping map: plain names, no duplicate (one level: only the mappings
 * the importer reads are checked, unknown keys' values are never walked). */
static int yaml_dups(const struct imp_yaml *y, const yaml_node_t *map, const char *prefix, struct err *e)
{
	yaml_document_t *d = (yaml_document_t *)&y->doc;
	size_t n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start), i;
	struct field *f;
	const struct field *r;
	int rc = 0;

	if (n > IMP_MAX_FIELDS)
		return too_many_fields(y->file, (int)map->start_mark.line + 1, prefix, n, e);
	f = malloc((n ? n : 1) * sizeof *f);
	if (!f)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	for (i = 0; i < n && !rc; i++) {
		yaml_node_t *k = yaml_document_get_node(d, map->data.mapping.pairs.start[i].key);
		if (!k || k->type != YAML_SCALAR_NODE)
			rc = err_set(e, ERR_INPUT, y->file, k ? (int)k->start_mark.line + 1 : 0,
				     "a mapping key must be a plain name");
		else
			f[i] = (struct field){(const char *)k->data.scalar.value, (int)k->start_mark.line + 1, i};
	}
	if (!rc && (r = repeated(f, n)) != NULL)
		rc = err_set(e, ERR_INPUT, y->file, r->line, "duplicate key '%s%s%s' (first at line %d)", prefix,
			     *prefix ? "." : "", r->name, r[-1].line);
	free(f);
	return rc;
}

/* Before the document is built: at most IMP_MAX_ALIASES aliases (libyaml finds
 * each alias's anchor by a linear search, and a "billion laughs" needs only a
 * few dozen) and IMP_MAX_DEPTH levels of nesting, from the parser's events. */
static int yaml_prescan(const struct imp_yaml *y, struct err *e)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int depth = 0, aliases = 0, done = 0, rc = 0;

	if (!yaml_parser_initialize(&p))
		return err_set(e, ERR_SYSTEM, y->file, 0, "out of memory starting the YAML parser");
	yaml_parser_set_input_string(&p, (const unsigned char *)y->text, y->len);
	while (!done && !rc) {
		if (!yaml_parser_parse(&p, &ev))
			break;  /* yaml_parser_load reports it, with its place */
		if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
			if (++depth > IMP_MAX_DEPTH)
				rc = err_set(e, ERR_INPUT, y->file, (int)ev.start_mark.line + 1,
					     "mappings and lists nested more than %d levels deep; a config read "
					     "here has a few", IMP_MAX_DEPTH);
		} else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
			depth--;
		} else if (ev.type == YAML_ALIAS_EVENT && ++aliases > IMP_MAX_ALIASES) {
			rc = err_set(e, ERR_INPUT, y->file, (int)ev.start_mark.line + 1,
				     "more than %d aliases (*name); a config read here needs none (a file of "
				     "nested aliases can expand to billions of values)", IMP_MAX_ALIASES);
		}
		done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	return rc;
}

/* The tree below node id with its aliases expanded: its nodes (into *size,
 * saturating above IMP_MAX_NODES) and levels, memoised per node so a shared
 * node is counted once per use without being walked again; an alias to a node
 * that contains it is a cycle. st: 0 unvisited, 1 on the path, 2 done. */
struct expand {
	const struct imp_yaml *y;
	unsigned char *st;
	double *size;
	int *depth;
	struct err *e;
};

static int expand(struct expand *x, int id, int level)
{
	yaml_document_t *d = (yaml_document_t *)&x->y->doc;
	yaml_node_t *n = yaml_document_get_node(d, id);
	int i = id - 1, c, *kids, nk, k;
	yaml_node_pair_t *pr;

	if (!n || x->st[i] == 2)
		return 0;
	if (x->st[i] == 1)
		return err_set(x->e, ERR_INPUT, x->y->file, (int)n->start_mark.line + 1,
			       "an alias refers to a mapping or list that contains it (an endless document)");
	if (level > IMP_MAX_DEPTH)
		return err_set(x->e, ERR_INPUT, x->y->file, (int)n->start_mark.line + 1, "with its aliases "
			       "expanded, the document nests more than %d levels deep", IMP_MAX_DEPTH);
	x->st[i] = 1;
	x->size[i] = 1;
	x->depth[i] = 1;
	nk = n->type == YAML_SEQUENCE_NODE ? (int)(n->data.sequence.items.top - n->data.sequence.items.start)
		: n->type == YAML_MAPPING_NODE ? 2 * (int)(n->data.mapping.pairs.top - n->data.mapping.pairs.start) : 0;
	for (k = 0; k < nk; k++) {
		if (n->type == YAML_SEQUENCE_NODE) {
			kids = n->data.sequence.items.start;
			c = kids[k];
		} else {
			pr = n->data.mapping.pairs.start + k / 2;
			c = k % 2 ? pr->value : pr->key;
		}
		if (expand(x, c, level + 1))
			return x->e->code;
		x->size[i] += x->size[c - 1];
		if (x->size[i] > IMP_MAX_NODES)
			x->size[i] = IMP_MAX_NODES + 1.0;
		if (x->depth[c - 1] + 1 > x->depth[i])
			x->depth[i] = x->depth[c - 1] + 1;
	}
	x->st[i] = 2;
	return 0;
}

/* At most IMP_MAX_NODES nodes with aliases expanded, no cycle. */
static int yaml_expansion(const struct imp_yaml *y, struct err *e)
{
	yaml_document_t *d = (yaml_document_t *)&y->doc;
	size_t n = (size_t)(d->nodes.top - d->nodes.start);
	struct expand x = {y, calloc(n + 1, 1), calloc(n + 1, sizeof(double)), calloc(n + 1, sizeof(int)), e};
	int rc;

	if (!x.st || !x.size || !x.depth)
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	else
		rc = expand(&x, 1, 1);
	if (!rc && x.depth[0] > IMP_MAX_DEPTH)  /* through a node shared at several depths */
		rc = err_set(e, ERR_INPUT, y->file, 1, "with its aliases expanded, the document nests more "
			     "than %d levels deep", IMP_MAX_DEPTH);
	if (!rc && x.size[0] > IMP_MAX_NODES)
		rc = err_set(e, ERR_INPUT, y->file, 1, "with its aliases expanded the document holds more than "
			     "%d values (a \"billion laughs\"); a config read here has a few dozen", IMP_MAX_NODES);
	free(x.st);
	free(x.size);
	free(x.depth);
	return rc;
}

int imp_yaml_load(struct imp_yaml *y, const char *path, struct err *e)
{
	yaml_parser_t p;
	int ok;

	memset(y, 0, sizeof *y);
	y->file = path;
	if (imp_read(path, &y->text, &y->len, e))
		return e->code;
	if (!yaml_parser_initialize(&p))
		return err_set(e, ERR_SYSTEM, path, 0, "out of memory starting the YAML parser");
	if (yaml_prescan(y, e)) {
		yaml_parser_delete(&p);
		return e->code;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)y->text, y->len);
	ok = yaml_parser_load(&p, &y->doc);
	if (!ok) {
		int line = (int)(p.problem_mark.line + 1);
		err_set(e, ERR_INPUT, path, line, "not valid YAML: %s%s%s",
			p.problem ? p.problem : "parse error", p.context ? " " : "",
			p.context ? p.context : "");
		yaml_parser_delete(&p);
		return e->code;
	}
	yaml_parser_delete(&p);
	y->loaded = 1;
	y->root = yaml_document_get_root_node(&y->doc);
	if (!y->root)
		return err_set(e, ERR_INPUT, path, 0, "empty YAML file; expected an accelerate config");
	if (y->root->type != YAML_MAPPING_NODE)
		return err_set(e, ERR_INPUT, path, (int)y->root->start_mark.line + 1,
			       "expected a mapping (key: value lines) at the top level");
	if (yaml_expansion(y, e))
		return e->code;
	return yaml_dups(y, y->root, "", e);
}

void imp_yaml_free(struct imp_yaml *y)
{
	if (y->loaded)
		yaml_document_delete(&y->doc);
	free(y->text);
	y->text = NULL;
	y->loaded = 0;
}

yaml_node_t *imp_yaml_get(const struct imp_yaml *y, const yaml_node_t *map, const char *key,
			  int *line)
{
	yaml_document_t *d = (yaml_document_t *)&y->doc;
	yaml_node_pair_t *p;

	*line = 0;
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		if (k && k->type == YAML_SCALAR_NODE && strcmp((char *)k->data.scalar.value, key) == 0) {
			*line = (int)k->start_mark.line + 1;
			return yaml_document_get_node(d, p->value);
		}
	}
	return NULL;
}

/* The node of leaf(path) in map with its type; NULL when absent or null. */
static yaml_node_t *yaml_item(const struct imp_yaml *y, const yaml_node_t *map, const char *path,
			      int flags, int *type, int *b, double *v, int *kind, int *line,
			      struct err *e)
{
	yaml_node_t *n = imp_yaml_get(y, map, imp_leaf(path), line);

	*kind = IMP_ABSENT;
	if (n) {
		*type = ytype(n, b, v);
		if (*type == Y_NULL)
			n = NULL;
	}
	if (!n && (flags & IMP_REQUIRED))
		err_set(e, ERR_INPUT, y->file, *line, "missing field '%s'", path);
	return n;
}

static int is_auto(const yaml_node_t *n, int type, int flags)
{
	return (flags & IMP_ALLOW_AUTO) && type == Y_STR &&
		strcmp((const char *)n->data.scalar.value, "auto") == 0;
}

int imp_yaml_num(const struct imp_yaml *y, const yaml_node_t *map, const char *path, int flags,
		 double lo, double hi, double *out, int *kind, int *line, struct err *e)
{
	int type = Y_NULL, b;
	double v = 0;
	yaml_node_t *n = yaml_item(y, map, path, flags, &type, &b, &v, kind, line, e);

	if (!n)
		return e->code;
	if (is_auto(n, type, flags)) {
		*kind = IMP_AUTO;
		return 0;
	}
	if (type != Y_NUM)
		return err_set(e, ERR_INPUT, y->file, *line, "%s is %s; expected %s", path, yname(type),
			       (flags & IMP_INTEGER) ? "an integer" : "a number");
	if ((flags & IMP_INTEGER) && v != floor(v))
		return err_set(e, ERR_INPUT, y->file, *line, "%s = %g: not a whole number", path, v);
	if (!(v >= lo && v <= hi))
		return err_set(e, ERR_INPUT, y->file, *line, "%s = %g: out of range; expected %g to %g",
			       path, v, lo, hi);
	*out = v;
	*kind = IMP_VALUE;
	return 0;
}

int imp_yaml_bool(const struct imp_yaml *y, const yaml_node_t *map, const char *path, int flags,
		  int *out, int *kind, int *line, struct err *e)
{
	int type = Y_NULL, b = 0;
	double v;
	yaml_node_t *n = yaml_item(y, map, path, flags, &type, &b, &v, kind, line, e);

	if (!n)
		return e->code;
	if (is_auto(n, type, flags)) {
		*kind = IMP_AUTO;
		return 0;
	}
	if (type != Y_BOOL)
		return err_set(e, ERR_INPUT, y->file, *line, "%s is %s; expected true or false",
			       path, yname(type));
	*out = b;
	*kind = IMP_VALUE;
	return 0;
}

int imp_yaml_str(const struct imp_yaml *y, const yaml_node_t *map, const char *path, int flags,
		 char *out, size_t n, int *kind, int *line, struct err *e)
{
	int type = Y_NULL, b;
	double v;
	yaml_node_t *node = yaml_item(y, map, path, flags, &type, &b, &v, kind, line, e);

	if (!node)
		return e->code;
	if (type == Y_MAP || type == Y_SEQ)
		return err_set(e, ERR_INPUT, y->file, *line, "%s is %s; expected a single value",
			       path, yname(type));
	if (strlen((const char *)node->data.scalar.value) >= n)
		return err_set(e, ERR_INPUT, y->file, *line, "%s: value is longer than %zu characters",
			       path, n - 1);
	strcpy(out, (const char *)node->data.scalar.value);
	*kind = is_auto(node, type, flags) ? IMP_AUTO : IMP_VALUE;
	return 0;
}

int imp_yaml_map(const struct imp_yaml *y, const yaml_node_t *map, const char *path,
		 const yaml_node_t **out, struct err *e)
{
	int type = Y_NULL, b, kind, line;
	double v;
	yaml_node_t *n = yaml_item(y, map, path, 0, &type, &b, &v, &kind, &line, e);

	*out = NULL;
	if (!n)
		return 0;
	if (type != Y_MAP)
		return err_set(e, ERR_INPUT, y->file, line, "%s is %s; expected a mapping", path,
			       yname(type));
	if (yaml_dups(y, n, path, e))
		return e->code;
	*out = n;
	return 0;
}

int imp_yaml_names(struct imp_result *r, const struct imp_yaml *y, const yaml_node_t *map,
		   const char *prefix, const char *const *known, struct err *e)
{
	yaml_document_t *d = (yaml_document_t *)&y->doc;
	const char *names[128];
	int lines[128];
	size_t n = 0;
	yaml_node_pair_t *p;

	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top && n < 128; p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		names[n] = (const char *)k->data.scalar.value;
		lines[n++] = (int)k->start_mark.line + 1;
	}
	return imp_check_names(r, y->file, prefix, names, lines, n, known, e);
}
