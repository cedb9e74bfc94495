/*
 * hw.c — loading devices and links from the hardware catalog (see hw.h).
 */
#include "hw.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"

#define G(x) offsetof(struct gpu, x)
static const struct cfg_key gpu_keys[] = {
	{NULL, "description", CFG_STR, 0, 0, 0, 0, "", G(description), NULL, "free text"},
	{NULL, "memory", CFG_NUM, UNIT_BYTES, CFG_REQUIRED, 0, 1e14, NULL, G(memory), NULL, "device memory capacity"},
	{NULL, "memory_bandwidth", CFG_NUM, UNIT_BW, CFG_REQUIRED, 1e6, 1e14, NULL, G(memory_bandwidth), NULL, "peak memory bandwidth"},
	{NULL, "peak_fp32", CFG_NUM, UNIT_FLOPS, CFG_REQUIRED, 1e6, 1e17, NULL, G(peak[PREC_FP32]), NULL, "dense fp32 rate"},
	{NULL, "peak_tf32", CFG_NUM, UNIT_FLOPS, CFG_REQUIRED, 0, 1e17, NULL, G(peak[PREC_TF32]), NULL, "dense tf32 tensor rate"},
	{NULL, "peak_fp16", CFG_NUM, UNIT_FLOPS, CFG_REQUIRED, 0, 1e17, NULL, G(peak[PREC_FP16]), NULL, "dense fp16 tensor rate"},
	{NULL, "peak_bf16", CFG_NUM, UNIT_FLOPS, CFG_REQUIRED, 0, 1e17, NULL, G(peak[PREC_BF16]), NULL, "dense bf16 tensor rate (0 = unsupported)"},
	{NULL, "sm_count", CFG_INT, 0, 0, 1, 1e5, "1", G(sm_count), NULL, "streaming multiprocessors"},
	{NULL, "compute_capability", CFG_NUM, 0, 0, 0, 100, "0", G(compute_capability), NULL, "CUDA compute capability (0 = not a CUDA device)"},
	{NULL, "source", CFG_STR, 0, 0, 0, 0, "", G(source), NULL, "where the figures come from"},
};
#undef G

static const char *const link_kinds[] = {"intra", "inter", NULL};

#define L(x) offsetof(struct link, x)
static const struct cfg_key link_keys[] = {
	{NULL, "kind", CFG_ENUM, 0, CFG_REQUIRED, 0, 0, NULL, L(kind), link_kinds, "inside a node or between nodes"},
	{NULL, "bandwidth", CFG_NUM, UNIT_BW, CFG_REQUIRED, 1e6, 1e14, NULL, L(bandwidth), NULL, "per GPU or per NIC, per direction"},
	{NULL, "efficiency", CFG_NUM, 0, 0, 0.01, 1, "1", L(efficiency), NULL, "achievable fraction of bandwidth"},
	{NULL, "latency", CFG_NUM, UNIT_TIME, CFG_REQUIRED, 0, 1, NULL, L(latency), NULL, "per-hop latency"},
	{NULL, "source", CFG_STR, 0, 0, 0, 0, "", L(source), NULL, "where the figures come from"},
};
#undef L

static const char *const storage_kinds[] = {"parallel_fs", "nfs", "object_fuse", "local", NULL};

#define S(x) offsetof(struct storage, x)
static const struct cfg_key storage_keys[] = {
	{NULL, "kind", CFG_ENUM, 0, CFG_REQUIRED, 0, 0, NULL, S(kind), storage_kinds, "parallel_fs, nfs, object_fuse or local"},
	{NULL, "write_client", CFG_NUM, UNIT_BW, CFG_REQUIRED, 0, 1e14, NULL, S(write_client), NULL, "what one node writes; 0 = its NICs"},
	{NULL, "write_aggregate", CFG_NUM, UNIT_BW, CFG_REQUIRED, 0, 1e16, NULL, S(write_aggregate), NULL, "what all nodes write together; 0 = no shared limit"},
	{NULL, "read_client", CFG_NUM, UNIT_BW, 0, 0, 1e14, "0", S(read_client), NULL, "what one node reads; 0 = write_client"},
	{NULL, "read_aggregate", CFG_NUM, UNIT_BW, 0, 0, 1e16, "0", S(read_aggregate), NULL, "what all nodes read; 0 = write_aggregate"},
	{NULL, "stream", CFG_NUM, UNIT_BW, 0, 0, 1e14, "0", S(stream), NULL, "one request stream; 0 = the client's rate"},
	{NULL, "request", CFG_NUM, UNIT_BYTES, CFG_REQUIRED, 512, 1e11, NULL, S(request), NULL, "bytes per request"},
	{NULL, "inflight", CFG_INT, 0, CFG_REQUIRED, 1, 1e6, NULL, S(inflight), NULL, "requests a writer keeps in flight"},
	{NULL, "latency", CFG_NUM, UNIT_TIME, CFG_REQUIRED, 0, 100, NULL, S(latency), NULL, "per request"},
	{NULL, "metadata_latency", CFG_NUM, UNIT_TIME, CFG_REQUIRED, 0, 100, NULL, S(metadata_latency), NULL, "per file create, fsync and close"},
	{NULL, "shared_network", CFG_BOOL, 0, CFG_REQUIRED, 0, 0, NULL, S(shared_network), NULL, "its traffic crosses the training's NICs"},
	{NULL, "source", CFG_STR, 0, 0, 0, 0, "", S(source), NULL, "where the figures come from"},
};
#undef S

static const struct cfg_table gpu_table = {gpu_keys, sizeof gpu_keys / sizeof gpu_keys[0]};
static const struct cfg_table link_table = {link_keys, sizeof link_keys / sizeof link_keys[0]};

const struct cfg_table *hw_gpu_keys(void) { return &gpu_table; }
static const struct cfg_table storage_table = {storage_keys, sizeof storage_keys / sizeof storage_keys[0]};

const struct cfg_table *hw_link_keys(void) { return &link_table; }
const struct cfg_table *hw_storage_keys(void) { return &storage_table; }

/* A missing catalog entry said at the scenario key that named it:
 * "where:line: key = name: no entry [...]". Returns e->code. */
static int at_key(struct err *e, const char *where, int line, const char *key, const char *name)
{
	char msg[sizeof e->msg];

	snprintf(msg, sizeof msg, "%s", e->msg);
	err_clear(e);
	return err_set(e, ERR_INPUT, where, line, "%s = %s: %s", key, name, msg);
}

/* Loads entry name from models/hw/<file> (or a path) into target. */
static int load_entry(const struct cfg_table *t, const char *file, const char *name, void *target,
		      size_t size, const char *where, int line, const char *key, struct err *e)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], section[CFG_STR_MAX], *text = NULL;
	size_t len;
	int rc;

	if (catalog_is_path(name)) {
		rc = catalog_resolve("hw", name, path, sizeof path, where, line, key, e);
		if (rc)
			return rc;
	} else {
		snprintf(path, sizeof path, "%s/hw/%s", catalog_dir(dir, sizeof dir), file);
	}
	rc = cfg_read_file(path, &text, &len, e);
	if (rc)
		return rc;
	if (catalog_is_path(name))
		catalog_first_section(text, section, sizeof section);
	else
		snprintf(section, sizeof section, "%s", name);
	rc = cfg_parse_entry(t, target, size, section, path, text, len, e);
	free(text);
	if (rc && !catalog_is_path(name) && strstr(e->msg, "no entry ["))
		return at_key(e, where, line, key, name);  /* say which scenario key named it */
	return rc;
}

int hw_gpu_load(const char *name_or_path, struct gpu *g, const char *where, int line,
		const char *key, struct err *e)
{
	int rc = load_entry(&gpu_table, "gpus.ini", name_or_path, g, sizeof *g, where, line, key, e);
	if (!rc)
		snprintf(g->name, sizeof g->name, "%s", name_or_path);
	return rc;
}

int hw_link_load(const char *name_or_path, struct link *l, const char *where, int line,
		 const char *key, struct err *e)
{
	int rc = load_entry(&link_table, "links.ini", name_or_path, l, sizeof *l, where, line, key, e);
	if (!rc)
		snprintf(l->name, sizeof l->name, "%s", name_or_path);
	return rc;
}

/* links.ini's entries of refs (all catalog names, at most HW_LINKS_MAX) in
 * one pass; a name given twice is read once and copied. */
static int links_one_pass(const struct hw_link_ref *refs, size_t n, const char *where, struct err *e)
{
	struct cfg_entry ents[HW_LINKS_MAX];
	size_t first[HW_LINKS_MAX], i, j, k = 0, len;
	char dir[PATH_MAX], path[PATH_MAX + 64], *text = NULL;
	int rc;

	for (i = 0; i < n; i++) {
		for (j = 0; j < i && strcmp(refs[j].name, refs[i].name); j++)
			;
		first[i] = j;  /* i itself, or the earlier ref of the same name */
		if (j == i)
			ents[k++] = (struct cfg_entry){refs[i].name, refs[i].link, 0, 0};
	}
	snprintf(path, sizeof path, "%s/hw/links.ini", catalog_dir(dir, sizeof dir));
	rc = cfg_read_file(path, &text, &len, e);
	if (!rc)
		rc = cfg_parse_entries(&link_table, ents, k, sizeof(struct link), path, text, len, e);
	free(text);
	for (i = 0, j = 0; rc && strstr(e->msg, "no entry [") && i < n; i++)
		if (first[i] == i && !ents[j++].found)  /* the first missing one: its key */
			return at_key(e, refs[i].where ? refs[i].where : where, refs[i].line, refs[i].key,
				      refs[i].name);
	for (i = 0; i < n && !rc; i++) {
		if (first[i] != i)
			*refs[i].link = *refs[first[i]].link;
		snprintf(refs[i].link->name, sizeof refs[i].link->name, "%s", refs[i].name);
	}
	return rc;
}

int hw_links_load(const struct hw_link_ref *refs, size_t n, const char *where, struct err *e)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < n && n <= HW_LINKS_MAX && !catalog_is_path(refs[i].name); i++)
		;
	if (i == n)
		return links_one_pass(refs, n, where, e);
	for (i = 0; i < n && !rc; i++)  /* a file among them: each from its own */
		rc = hw_link_load(refs[i].name, refs[i].link, refs[i].where ? refs[i].where : where, refs[i].line,
				  refs[i].key, e);
	return rc;
}

int hw_storage_load(const char *name_or_path, struct storage *st, const char *where, int line,
		    const char *key, struct err *e)
{
	int rc = load_entry(&storage_table, "storage.ini", name_or_path, st, sizeof *st, where, line, key, e);
	if (!rc)
		snprintf(st->name, sizeof st->name, "%s", name_or_path);
	return rc;
}
