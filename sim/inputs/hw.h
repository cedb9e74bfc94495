/*
 * hw.h — devices (models/hw/gpus.ini), links (models/hw/links.ini) and
 * checkpoint storage (models/hw/storage.ini).
 */
#ifndef SHARDCAST_HW_H
#define SHARDCAST_HW_H

#include <stdint.h>

#include "cfg.h"
#include "err.h"

enum { PREC_FP32, PREC_TF32, PREC_FP16, PREC_BF16, PREC_COUNT };

struct gpu {
	char name[CFG_STR_MAX];         /* catalog section or path */
	char description[CFG_STR_MAX];
	double memory;                  /* bytes */
	double memory_bandwidth;        /* bytes/s */
	double peak[PREC_COUNT];        /* FLOP/s, dense; 0 = unsupported */
	int64_t sm_count;
	double compute_capability;       /* e.g. 9.0 for Hopper; 0 = not a CUDA device */
	char source[CFG_STR_MAX];
};

enum { LINK_INTRA, LINK_INTER };

struct link {
	char name[CFG_STR_MAX];
	int kind;                       /* LINK_INTRA | LINK_INTER */
	double bandwidth;               /* bytes/s per GPU (intra) or per NIC (inter), per direction */
	double efficiency;              /* achievable fraction of bandwidth for large collectives */
	double latency;                 /* s per hop */
	char source[CFG_STR_MAX];
};

enum { STORAGE_PARALLEL_FS, STORAGE_NFS, STORAGE_OBJECT_FUSE, STORAGE_LOCAL };

/* Where checkpoints go: rates per client (node) and for all clients, how a
 * writer's requests are issued, and what each request and file costs. */
struct storage {
	char name[CFG_STR_MAX];
	int kind;                       /* STORAGE_* */
	double write_client;            /* bytes/s one node writes; 0 = its NICs */
	double write_aggregate;         /* bytes/s all nodes together; 0 = no shared limit */
	double read_client;             /* bytes/s one node reads; 0 = write_client */
	double read_aggregate;          /* bytes/s all nodes read; 0 = write_aggregate */
	double stream;                  /* bytes/s one request stream; 0 = the client's */
	double request;                 /* bytes per request */
	int64_t inflight;               /* requests a writer keeps in flight */
	double latency;                 /* s per request */
	double metadata_latency;        /* s per file create, fsync and close */
	int shared_network;             /* its traffic crosses the training's NICs */
	char source[CFG_STR_MAX];
};

/* Loads a device: a section of models/hw/gpus.ini, or a path to a file whose
 * first section is the device. where/line/key locate the scenario key. */
int hw_gpu_load(const char *name_or_path, struct gpu *g, const char *where, int line,
		const char *key, struct err *e);

/* Loads a link from models/hw/links.ini (or a path), as hw_gpu_load. */
int hw_link_load(const char *name_or_path, struct link *l, const char *where, int line,
		 const char *key, struct err *e);

/* A link a scenario names: its catalog name or path, where it is loaded, and
 * the key and line that named it, for errors: of the file hw_links_load is
 * given, or of where (NULL: that one). */
struct hw_link_ref {
	const char *name;
	struct link *link;
	int line;
	const char *key;
	const char *where;
};

#define HW_LINKS_MAX 4

/* hw_link_load of each of refs[0..n) in order, with the same results and
 * errors; when all are catalog names, links.ini is read and checked once
 * for all of them instead of once each. */
int hw_links_load(const struct hw_link_ref *refs, size_t n, const char *where, struct err *e);

/* Loads checkpoint storage from models/hw/storage.ini (or a path), as hw_gpu_load. */
int hw_storage_load(const char *name_or_path, struct storage *st, const char *where, int line,
		    const char *key, struct err *e);

const struct cfg_table *hw_gpu_keys(void);
const struct cfg_table *hw_link_keys(void);
const struct cfg_table *hw_storage_keys(void);

#endif
