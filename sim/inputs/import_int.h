/*
 * import_int.h — helpers shared by import.c, import_hf.c, import_accel.c and
 * import_ds.c (not part of the public API): JSON and YAML documents whose
 * fields are read with their type, range and line checked, and the result
 * list the importers append to.
 */
#ifndef SHARDCAST_IMPORT_INT_H
#define SHARDCAST_IMPORT_INT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "import.h"

/* Bounds on what an imported file may hold, so that no file within
 * CFG_MAX_FILE keeps the importers busy (the configs read here are a few dozen
 * fields, no alias and a few levels deep): fields in one mapping or object
 * that is read, YAML aliases (*name) per document, levels of nesting (YAML with
 * aliases expanded; JSON, where cJSON's own limit is 1000), and YAML nodes
 * with aliases expanded (a "billion laughs" of 670 bytes expands to 10^9).
 * Only the mappings the importers read are checked for duplicate keys; the
 * values of keys they do not read are never walked. */
#define IMP_MAX_FIELDS 1024
#define IMP_MAX_ALIASES 64
#define IMP_MAX_DEPTH 32
#define IMP_MAX_NODES 100000

/* How a field was found. */
enum { IMP_ABSENT, IMP_VALUE, IMP_AUTO };

/* Flags of the field readers. */
enum {
	IMP_REQUIRED = 1,  /* absent (or null) is an error */
	IMP_INTEGER = 2,   /* a whole number */
	IMP_ALLOW_AUTO = 4 /* the string "auto" is accepted (kind IMP_AUTO) */
};

/* ---- results --------------------------------------------------------------- */

/* Registers an opened file (its text folds into r->hash); returns its index
 * or -1 when IMP_MAX_FILES files are already registered. */
int imp_add_file(struct imp_result *r, const char *path, const char *text, size_t len);


/* Appends a note (an assumption or an ignored field) for the report. */
void imp_note(struct imp_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checks the keys of a mapping against known (NULL-terminated): an unknown
 * key close to a known one is an error ("did you mean"), another unknown key
 * becomes a note (newer framework versions add keys). prefix names the
 * mapping in messages ("" for the top level). */
int imp_check_names(struct imp_result *r, const char *file, const char *prefix,
		    const char *const *names, const int *lines, size_t n,
		    const char *const *known, struct err *e);

/* Reads path (a small text file) into a malloc'd NUL-terminated *text. */
int imp_read(const char *path, char **text, size_t *len, struct err *e);


/* ---- JSON (cJSON) ------------------------------------------------------------ */

struct imp_json {
	const char *file;      /* path, for messages */
	char *text;            /* owned */
	size_t len;
	cJSON *root;           /* an object */
};

/* Reads and parses path; the top level must be an object; duplicate keys in
 * any object are an error (Python's json keeps the last, cJSON the first). */
int imp_json_load(struct imp_json *j, const char *path, struct err *e);
void imp_json_free(struct imp_json *j);

/* The line of the dotted field path ("zero_optimization.stage"), found in the
 * text key by key; 0 when not found. */
int imp_json_line(const struct imp_json *j, const char *path);

/* Field leaf(path) of object o as a number within [lo, hi]; *kind gets
 * IMP_ABSENT, IMP_VALUE or IMP_AUTO. A JSON null counts as absent. */
int imp_json_num(const struct imp_json *j, const cJSON *o, const char *path, int flags,
		 double lo, double hi, double *out, int *kind, struct err *e);
int imp_json_bool(const struct imp_json *j, const cJSON *o, const char *path, int flags,
		  int *out, int *kind, struct err *e);
int imp_json_str(const struct imp_json *j, const cJSON *o, const char *path, int flags,
		 char *out, size_t n, int *kind, struct err *e);
/* A child object (NULL when absent). */
int imp_json_obj(const struct imp_json *j, const cJSON *o, const char *path,
		 const cJSON **out, struct err *e);
/* Checks o's keys as imp_check_names does. */
int imp_json_names(struct imp_result *r, const struct imp_json *j, const cJSON *o,
		   const char *prefix, const char *const *known, struct err *e);

/* ---- YAML (libyaml) ------------------------------------------------------------ */

struct imp_yaml {
	const char *file;
	char *text;            /* owned */
	size_t len;
	yaml_document_t doc;
	int loaded;
	yaml_node_t *root;     /* a mapping */
};

int imp_yaml_load(struct imp_yaml *y, const char *path, struct err *e);
void imp_yaml_free(struct imp_yaml *y);

/* Value of key in mapping map (NULL when absent); *line gets the key's line. */
yaml_node_t *imp_yaml_get(const struct imp_yaml *y, const yaml_node_t *map, const char *key,
			  int *line);
int imp_yaml_num(const struct imp_yaml *y, const yaml_node_t *map, const char *path, int flags,
		 double lo, double hi, double *out, int *kind, int *line, struct err *e);
int imp_yaml_bool(const struct imp_yaml *y, const yaml_node_t *map, const char *path, int flags,
		  int *out, int *kind, int *line, struct err *e);
/* A scalar as text, whatever its YAML type (a plain 1 gives "1"). */
int imp_yaml_str(const struct imp_yaml *y, const yaml_node_t *map, const char *path, int flags,
		 char *out, size_t n, int *kind, int *line, struct err *e);
int imp_yaml_map(const struct imp_yaml *y, const yaml_node_t *map, const char *path,
		 const yaml_node_t **out, struct err *e);
int imp_yaml_names(struct imp_result *r, const struct imp_yaml *y, const yaml_node_t *map,
		   const char *prefix, const char *const *known, struct err *e);

/* The last component of a dotted path. */
const char *imp_leaf(const char *path);

#endif
