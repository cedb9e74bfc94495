/*
 * fuzz_common.c — the private folder of a harness (see fuzz.h).
 */
#include "fuzz.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[PATH_MAX];

static void cleanup(void)
{
	char cmd[PATH_MAX + 16];

	if (!dir[0])
		return;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", dir);
}

const char *fuzz_write(const char *name, const uint8_t *data, size_t size)
{
	static char path[PATH_MAX];
	FILE *f;

	if (!dir[0]) {
		const char *tmp = getenv("TMPDIR");
		snprintf(dir, sizeof dir, "%s/shardcast-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir)) {
			perror("fuzz: mkdtemp");
			abort();
		}
		atexit(cleanup);
	}
	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
		perror(path);
		abort();
	}
	return path;
}

const struct model *fuzz_gpt2(void)
{
	static struct model m;
	static int loaded;
	struct err e = {0};

	if (!loaded && model_load("gpt2", &m, NULL, 0, &e)) {
		fprintf(stderr, "fuzz: %s (set SHARDCAST_MODELS to the catalog)\n", e.msg);
		exit(1);
	}
	loaded = 1;
	return &m;
}
