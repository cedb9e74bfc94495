/*
 * catalog.h — where the data lives: models/nn, models/hw, models/failures,
 * models/frameworks.
 *
 * A scenario names catalog entries ("gpt2-xl", "h100-sxm5-80gb") or paths to
 * files of the same form. The models folder is $SHARDCAST_MODELS if set, else
 * ../models beside the running binary (bin/simulate -> models/), else ./models.
 */
#ifndef SHARDCAST_CATALOG_H
#define SHARDCAST_CATALOG_H

#include <stddef.h>

#include "err.h"

/* The models folder (see above) into buf; returns buf. $SHARDCAST_MODELS is
 * read on each call; the folder beside the binary is found once per process
 * (it cannot move while the process runs). */
const char *catalog_dir(char *buf, size_t n);

/* True when name is a path rather than a catalog name (has '/' or ends in .ini). */
int catalog_is_path(const char *name);

/* Resolves name in models/<sub>/<name>.ini, or name itself when it is a path, into
 * path. A missing entry is an error at where (file:line of the key that named it)
 * that suggests the nearest catalog name. */
int catalog_resolve(const char *sub, const char *name, char *path, size_t n,
		    const char *where_file, int where_line, const char *key, struct err *e);

/* Name of the first [section] in text into out ("" if none). */
void catalog_first_section(const char *text, char *out, size_t n);

#endif
