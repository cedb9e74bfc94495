/*
 * catalog.c — locating catalog entries (see catalog.h).
 */
#include "catalog.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The real path of ../models beside the running binary into out (n bytes);
 * 0, or -1 when there is none. */
static int beside_binary(char *out, size_t n)
{
	char exe[PATH_MAX], joined[PATH_MAX + 16], real[PATH_MAX], *slash;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);

	if (len <= 0)
		return -1;
	exe[len] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';  /* .../bin */
	snprintf(joined, sizeof joined, "%s/../models", exe);
	if (!is_dir(joined) || !realpath(joined, real) || strlen(real) >= n)
		return -1;
	memcpy(out, real, strlen(real) + 1);
	return 0;
}

const char *catalog_dir(char *buf, size_t n)
{
	/* The one memo at file scope: the binary's folder is the process's, not
	 * a simulation's, and finding it (readlink, stat, realpath: a dozen
	 * system calls) was called for every catalog file a scenario reads. */
	static char beside[PATH_MAX];
	const char *env = getenv("SHARDCAST_MODELS");

	if (env && *env) {
		snprintf(buf, n, "%s", env);
		return buf;
	}
	if (!beside[0] && beside_binary(beside, sizeof beside))
		beside[0] = '\0';  /* not found: looked for again next time, as before */
	snprintf(buf, n, "%s", beside[0] ? beside : "models");
	return buf;
}

int catalog_is_path(const char *name)
{
	size_t l = strlen(name);
	return strchr(name, '/') != NULL || (l > 4 && strcmp(name + l - 4, ".ini") == 0);
}

static const char *nearest_entry(const char *dir, const char *name, char *best, size_t n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int bestd = 99;

	best[0] = '\0';
	if (!d)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		char stem[256];
		size_t l = strlen(de->d_name);
		int dist;
		if (l < 5 || l >= sizeof stem || strcmp(de->d_name + l - 4, ".ini"))
			continue;
		memcpy(stem, de->d_name, l - 4);
		stem[l - 4] = '\0';
		dist = err_distance(name, stem);
		if (dist < bestd || (dist == bestd && strcmp(stem, best) < 0)) {
			bestd = dist;
			snprintf(best, n, "%s", stem);
		}
	}
	closedir(d);
	return bestd <= ((int)strlen(name) / 3 > 2 ? (int)strlen(name) / 3 : 2) ? best : NULL;
}

int catalog_resolve(const char *sub, const char *name, char *path, size_t n,
		    const char *where_file, int where_line, const char *key, struct err *e)
{
	char dir[PATH_MAX], sdir[PATH_MAX + 64], best[256];
	struct stat st;

	if (catalog_is_path(name)) {
		snprintf(path, n, "%s", name);
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
			return err_set(e, ERR_INPUT, where_file, where_line,
				       "%s = %s: no such file", key, name);
		return 0;
	}
	catalog_dir(dir, sizeof dir);
	snprintf(sdir, sizeof sdir, "%s/%s", dir, sub);
	snprintf(path, n, "%s/%s.ini", sdir, name);
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
		return 0;
	if (nearest_entry(sdir, name, best, sizeof best))
		return err_set(e, ERR_INPUT, where_file, where_line,
			       "%s = %s: no such entry in %s; did you mean '%s'?", key, name, sdir, best);
	return err_set(e, ERR_INPUT, where_file, where_line,
		       "%s = %s: no such entry in %s (give a catalog name or a path to a .ini file)",
		       key, name, sdir);
}

void catalog_first_section(const char *text, char *out, size_t n)
{
	const char *s = text;

	out[0] = '\0';
	while (s && *s) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '[') {
			const char *close = strchr(s, ']');
			const char *nl = strchr(s, '\n');
			if (close && (!nl || close < nl)) {
				size_t l = (size_t)(close - s - 1);
				if (l >= n)
					l = n - 1;
				memcpy(out, s + 1, l);
				out[l] = '\0';
			}
			return;
		}
		s = strchr(s, '\n');
		if (s)
			s++;
	}
}
