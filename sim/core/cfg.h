/*
 * cfg.h — table-driven INI loading with located errors.
 *
 * Every file shardcast reads (scenarios, models/nn, models/hw, models/failures,
 * models/frameworks) is INI (libinih's grammar, cfg.c) checked against a table of
 * keys: section, name, type, unit, range, default and target field. Errors name
 * file:line and the key, say what was expected, and suggest the nearest valid key
 * for a typo. The same table generates the README's key reference
 * (`simulate --keys`), so documentation and loader cannot drift.
 */
#ifndef SHARDCAST_CFG_H
#define SHARDCAST_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "units.h"

enum cfg_type {
	CFG_INT,   /* int64_t; a number written as 1e9 is fine if integral */
	CFG_NUM,   /* double, SI units */
	CFG_BOOL,  /* int: true|false|yes|no|on|off|1|0 */
	CFG_ENUM,  /* int: index into choices */
	CFG_STR    /* char[CFG_STR_MAX] */
};

enum {
	CFG_AUTO = 1,     /* "auto" is accepted and stored as -1 */
	CFG_DEFAULTV = 2, /* "default" is accepted and stored as -1 */
	CFG_REQUIRED = 4, /* must be set (by the file or --set) */
	CFG_BOOLV = 8     /* CFG_INT: "true" is accepted and stored as -2, "false" as 0 */
};

#define CFG_STR_MAX 256
#define CFG_MAX_FILE (16u << 20)  /* bytes; larger files are rejected */

struct cfg_key {
	const char *section;          /* [section] */
	const char *name;
	enum cfg_type type;
	enum unit unit;               /* CFG_NUM / CFG_INT */
	unsigned flags;               /* CFG_AUTO | CFG_DEFAULTV | CFG_REQUIRED */
	double min, max;              /* inclusive range (SI) for CFG_INT / CFG_NUM */
	const char *def;              /* default, as written in a file; NULL = none */
	size_t off;                   /* offset of the field in the target struct */
	const char *const *choices;   /* CFG_ENUM: NULL-terminated names */
	const char *help;             /* one line for the key reference */
};

struct cfg_table {
	const struct cfg_key *keys;
	size_t n;
};

/* Where each key of a table got its value: line in file, 0 for the default,
 * -1 for a --set override. Sized by the caller (n entries). */
struct cfg_origin {
	int *line;
	const char *file;
};

/* Reads path whole into a NUL-terminated malloc'd buffer *text (caller frees),
 * *len its length. Errors: missing/unreadable file, larger than CFG_MAX_FILE. */
int cfg_read_file(const char *path, char **text, size_t *len, struct err *e);

/* Sets every key of t that has a default in target. */
int cfg_defaults(const struct cfg_table *t, void *target, struct err *e);

/* Parses text (len bytes; named file in messages) against t into target.
 * Every section must be one of t's. Defaults are NOT applied here. origin->line
 * (n ints, may be NULL) records each key's line. Rejects NUL bytes, control
 * characters, lines over 199 bytes, duplicate keys, keys outside a section. */
int cfg_parse(const struct cfg_table *t, void *target, struct cfg_origin *origin,
	      const char *file, const char *text, size_t len, struct err *e);

/* Reads path and loads it against t into target: defaults, then the file,
 * then the check of CFG_REQUIRED keys. The whole-file counterpart of
 * cfg_parse_entry, for files of one kind of section (models/nn, profiles). */
int cfg_load_file(const struct cfg_table *t, void *target, const char *path, struct err *e);

/* Catalog files hold one entry per section ([h100-sxm5-80gb] ...). Loads the
 * entry named section into target (defaults first). Every section of the file is
 * checked against t (keys without a section match any); scratch is a buffer of
 * target_size bytes used for that. A missing entry is an error that suggests
 * the nearest section name. */
int cfg_parse_entry(const struct cfg_table *t, void *target, size_t target_size,
		    const char *section, const char *file, const char *text, size_t len,
		    struct err *e);

/* One entry of a catalog file for cfg_parse_entries. */
struct cfg_entry {
	const char *section;  /* the section to load */
	void *target;         /* where its keys go (t's defaults applied first) */
	int optional;         /* 1: a file without it is no error (found says) */
	int found;            /* set by the parse: the section is in the file */
};

/* cfg_parse_entry for n entries of one file in one pass: each entry's keys go
 * to its target (two entries naming one section: the first gets it), every
 * section is checked once; a missing entry that is not optional is the error
 * of cfg_parse_entry (the first, in array order). */
int cfg_parse_entries(const struct cfg_table *t, struct cfg_entry *ents, size_t n, size_t target_size,
		      const char *file, const char *text, size_t len, struct err *e);

/* Applies one "section.key=value" override (from --set). */
int cfg_set(const struct cfg_table *t, void *target, struct cfg_origin *origin,
	    const char *assignment, struct err *e);

/* Stores value (as written in a file) into key i of target, with the key's
 * type, unit and range checked; errors are located at file:line. */
int cfg_store(const struct cfg_table *t, size_t i, void *target, const char *value,
	      const char *file, int line, struct err *e);

/* Checks that each CFG_REQUIRED key was set (origin line != 0). */
int cfg_check_required(const struct cfg_table *t, const struct cfg_origin *origin,
		       const char *file, struct err *e);

/* Writes a Markdown table of t's keys (section, key, default, accepted, meaning). */
void cfg_write_reference(const struct cfg_table *t, void *stream);

/* The index of key (section, name) in t, or -1. */
int cfg_index(const struct cfg_table *t, const char *section, const char *name);

/* The value of key index i of target as it would be written in a file. */
const char *cfg_format_value(const struct cfg_table *t, size_t i, const void *target,
			     char *buf, size_t n);

#endif
