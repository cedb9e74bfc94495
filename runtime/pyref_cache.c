/*
 * pyref_cache.c — the PyTorch reference's results, kept (see pyref.h).
 *
 * A tracer run is a pure function of its spec (the resolved scenario), the
 * micro-batches, the stack and the tracer's own sources; most of its time is
 * Python importing torch and transformers. So each result is kept under a key
 * hashing all of these (64-bit FNV-1a), in build/pyref/cache of the checkout
 * (or $SHARDCAST_PYREF_CACHE): KEY.json (the tracer's output, or {"error": ...}
 * for a case it cannot run) and KEY.csv (its trace). A run whose key is there
 * reads them; `validate --prepare` instead writes KEY.spec.json for a case not
 * there yet, so that one tracer process (pyref.py --batch) can run many cases.
 */
#include "pyref.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= c[i];
		h *= 1099511628211ULL;
	}
	return h;
}

/* Hashes the file at path into *h; 0, or -1 when it cannot be read. */
static int hash_file(uint64_t *h, const char *path)
{
	char buf[65536];
	size_t k;
	FILE *f = fopen(path, "rb");

	if (!f)
		return -1;
	while ((k = fread(buf, 1, sizeof buf, f)) > 0)
		*h = fnv(*h, buf, k);
	fclose(f);
	return 0;
}

/* mkdir -p of dir (two levels are enough here: build/pyref/cache). */
static int make_dir(const char *dir)
{
	char tmp[4096];
	char *s;

	snprintf(tmp, sizeof tmp, "%s", dir);
	for (s = tmp + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(tmp, 0777) && errno != EEXIST)
				return -1;
			*s = '/';
		}
	return mkdir(tmp, 0777) && errno != EEXIST ? -1 : 0;
}

int pyref_cache_open(struct pyref_cache *c, const char *root, const char *stack, const char *spec,
		     const int64_t batches[2])
{
	static const char *const sources[] = {"pyref.py", "memtrace.py", "cudasubst.py", "hfmodels.py",
					      "dist.py", "fsdp2.py"};
	const char *env = getenv("SHARDCAST_PYREF_CACHE");
	char path[4096];
	uint64_t h = 14695981039346656037ULL;
	size_t i;

	memset(c, 0, sizeof *c);
	h = fnv(h, stack, strlen(stack) + 1);
	h = fnv(h, spec, strlen(spec) + 1);
	h = fnv(h, batches, 2 * sizeof *batches);
	for (i = 0; i < sizeof sources / sizeof *sources; i++) {
		snprintf(path, sizeof path, "%s/runtime/pytorch/%s", root, sources[i]);
		if (hash_file(&h, path))
			return 0;  /* no sources to key on: no cache */
	}
	if (env && *env)
		snprintf(c->dir, sizeof c->dir, "%s", env);
	else
		snprintf(c->dir, sizeof c->dir, "%s/build/pyref/cache", root);
	if (make_dir(c->dir) || !realpath(c->dir, path))  /* absolute: --prepare's lines are read elsewhere */
		return 0;
	snprintf(c->dir, sizeof c->dir, "%s", path);
	snprintf(c->key, sizeof c->key, "%016llx", (unsigned long long)h);
	if (snprintf(c->json, sizeof c->json, "%s/%s.json", c->dir, c->key) >= (int)sizeof c->json)
		return 0;
	snprintf(c->csv, sizeof c->csv, "%s/%s.csv", c->dir, c->key);
	snprintf(c->spec, sizeof c->spec, "%s/%s.spec.json", c->dir, c->key);
	c->on = 1;
	return 1;
}

int pyref_cache_read(const struct pyref_cache *c, char **out)
{
	FILE *f;
	long n;

	*out = NULL;
	if (!c->on || access(c->csv, R_OK) || !(f = fopen(c->json, "rb")))
		return 0;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) ||
	    !(*out = malloc((size_t)n + 1)) || fread(*out, 1, (size_t)n, f) != (size_t)n) {
		free(*out);
		*out = NULL;
		fclose(f);
		return 0;
	}
	(*out)[n] = 0;
	fclose(f);
	return 1;
}

int pyref_cache_store(const struct pyref_cache *c, const char *out)
{
	char tmp[4300];
	FILE *f;

	if (!c->on)
		return 0;
	snprintf(tmp, sizeof tmp, "%s.tmp", c->json);
	f = fopen(tmp, "wb");
	if (!f)
		return -1;
	if (fputs(out, f) < 0 || fclose(f) || rename(tmp, c->json)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

int pyref_cache_spec(const struct pyref_cache *c, const char *spec)
{
	FILE *f = c->on ? fopen(c->spec, "wb") : NULL;

	if (!f)
		return -1;
	if (fputs(spec, f) < 0) {
		fclose(f);
		return -1;
	}
	return fclose(f) ? -1 : 0;
}
