/*
 * ckpt.h — what one checkpoint holds and costs: the bytes each rank and node
 * writes, how long training is blocked for a save, how long it writes in the
 * background and how much it slows training meanwhile, and how long a restart
 * reads it back.
 *
 * What it holds (ckpt_layout, from the strategy's derived facts in struct
 * ckpt_in): per parameter, the weights as saved (fp32, or a 16-bit module),
 * fp32 master weights kept apart (DeepSpeed), the optimizer's states, the
 * gradients if asked (REFERENCE.md "Checkpoint size": 12-14 B/param for mixed
 * precision Adam). Sharded states are split over the shard group and held by
 * each replica; replicated state (DDP, a ZeRO-1/2 module) by every data-
 * parallel rank. Who writes a replicated tensor: one replica (HSDP replica 0
 * as IBM's fms-fsdp does, DeepSpeed's data-parallel rank 0) or all holders in
 * turn (DCP's dedup_save_plans gives each duplicate to the smallest plan). A
 * full state dict is gathered on rank 0 and written there.
 *
 * A synchronous save, its critical path (the busiest rank and node):
 *   state dict   building it: a per-tensor overhead
 *   gather       full state dict only: the other nodes' share through rank 0's
 *                NICs, then rank 0's copies to pageable host memory
 *   planning     DCP: the coordinator gathers every rank's plan, deduplicates
 *                and writes the global metadata — linear in ranks x tensors,
 *                paid in full by the first save and cached after it (PyTorch
 *                blog "6x faster async checkpointing", 2025)
 *   write        max(serialization, storage) + metadata:
 *                serialization per writer thread, each byte copied device to
 *                pageable host then serialized by torch.save (CRC-32, zip
 *                records, write(2)): 1 / (1/pageable + 1/serialize);
 *                storage per node: min(client rate, aggregate / writing nodes,
 *                threads x in-flight requests x request / (latency + request /
 *                stream rate)); metadata: a create, fsync and close per file,
 *                and the coordinator's metadata file.
 * An asynchronous save blocks for the state dict and the staging copy of each
 * rank's whole local state to host memory (pageable memory allocated per save
 * at the pageable rate, or pinned buffers at the pinned rate, allocated once or
 * per save), per-GPU and per-node copy limits; then plans, serializes and
 * writes in the background (at most one in flight: the next save waits) while
 * training slows by a fraction: the trainer's host CPU (GIL) contention of the
 * executor, and storage traffic taking its share of the NICs the collectives
 * use. The training time lost is that fraction of the background time.
 * A restart reads each rank's local state (every replica reads its copy),
 * possibly into another number of GPUs (resharding reads from the files of
 * several writers), deserializes it and copies it to the device, after planning
 * the load anew.
 *
 * Sources of the constants: ckpt.c and the key table (scenario.c).
 */
#ifndef SHARDCAST_CKPT_H
#define SHARDCAST_CKPT_H

#include <stdint.h>

#include "scenario.h"

#define CKPT_MAX_WARN 4

/* The facts of the strategy a checkpoint's layout needs (a plan feeds them). */
struct ckpt_in {
	double params;           /* trained parameters */
	double tensors;          /* parameter tensors of the model (state-dict entries) */
	int64_t nodes, gpus_per_node;
	int64_t mp;              /* model-parallel ranks (tensor x pipeline) splitting each tensor set */
	int64_t shard;           /* data-parallel ranks the sharded state is split across */
	int64_t replicas;        /* copies of each shard: data-parallel = shard x replicas */
	int module_replicated;   /* the module's weights are not sharded (ZeRO-1/2: only master + optimizer) */
	int writer;              /* enum ckpt_writer, resolved (not AUTO) */
	int state_dict;          /* CKPT_SHARDED | CKPT_FULL */
	int replica_writers;     /* CKPT_REPLICAS_FIRST | CKPT_REPLICAS_BALANCED */
	double weight_bytes;     /* B/param of the module's weights as saved */
	double master_bytes;     /* B/param of fp32 master weights kept by the optimizer; 0 = none */
	double optim_bytes;      /* B/param of optimizer states */
	double grad_bytes;       /* B/param of gradients saved; 0 = none */
	double optim_tensors;    /* optimizer state tensors per parameter tensor (Adam: m, v, step) */
};

/* What a checkpoint holds and where it goes. */
struct ckpt_layout {
	double bytes_per_param;  /* B saved per parameter */
	double bytes;            /* B, the whole checkpoint */
	double local;            /* B of checkpointed state each rank holds (what it stages) */
	double rank;             /* B the busiest writing rank writes */
	double node;             /* B the busiest node writes */
	int64_t writers;         /* ranks that write */
	int64_t writer_nodes;    /* nodes with a writing rank */
	int64_t node_writers;    /* writing ranks on the busiest node */
	double files;            /* files the busiest rank creates */
	double items;            /* state-dict entries per rank */
};

/* Storage, host and options: everything besides the layout. */
struct ckpt_env {
	double client;           /* B/s one node writes */
	double aggregate;        /* B/s all nodes write; 0 = no shared limit */
	double read_client, read_aggregate; /* B/s at a restart; aggregate 0 = none */
	double stream;           /* B/s one request stream */
	double request;          /* B per request */
	double inflight;         /* requests a writer thread keeps in flight */
	double latency;          /* s per request */
	double meta_latency;     /* s per file create, fsync and close */
	int shared_network;      /* storage traffic crosses the training NICs */
	double nic;              /* B/s of a node's NICs (effective) */
	double intra;            /* B/s per GPU inside a node (effective) */
	double coll_latency;     /* s of one small collective (planning gather, scatter) */
	double pageable;         /* B/s device -> fresh pageable host memory, per process */
	double pinned;           /* B/s device -> pinned host memory, per GPU */
	double node_copy;        /* B/s device -> host, a whole node */
	double pin;              /* B/s of allocating pinned memory */
	double serialize;        /* B/s torch.save of host tensors, per thread */
	int64_t threads;         /* writer threads per rank */
	int staging;             /* enum ckpt_staging */
	int executor;            /* enum ckpt_executor */
	int plan_cache;
	int64_t load_world;      /* GPUs a restart loads into */
	double comm_share;       /* share of a step spent in exposed communication */
	double timeout;          /* s, the collective timeout */
	double host_memory;      /* B per node; <= 0 = not checked */
};

struct ckpt_cost {
	struct ckpt_layout l;
	double bytes_per_param;  /* = l.bytes_per_param */
	double bytes;            /* = l.bytes */
	double shard;            /* B each GPU stages = l.local */
	double node_bw;          /* B/s the busiest node writes at */
	double write_bw;         /* B/s the whole save is written at (bytes / storage time) */
	double state_dict;       /* s building the state dict */
	double plan;             /* s planning a save with a cached plan */
	double plan_first;       /* s planning the first save of a (re)started job */
	double gather;           /* s gathering a full state dict on rank 0 */
	double serialize;        /* s the busiest rank serializes (sync: with its device copies) */
	double store;            /* s the busiest node's storage transfer */
	double meta;             /* s of file operations on the critical path */
	double write;            /* s max(serialize, store) + meta of a synchronous save */
	double stage;            /* s of the async staging copy */
	double copy;             /* = stage */
	double block;            /* s training is blocked per save (this mode) */
	double block_sync;       /* s a synchronous save blocks (planned stops) */
	double background;       /* s written after training resumes (async; 0 for sync) */
	double background_first; /* s the first save's background (uncached plan) */
	double slowdown;         /* fraction training slows while the background write runs */
	double interfere;        /* s of training lost per save to that slowdown */
	double load;             /* s to read it at a restart */
	double host;             /* B of host memory a node needs for it (async staging, full gather) */
	int nwarn;
	char warn[CKPT_MAX_WARN][256];
};

/* What the checkpoint of in holds (no storage or host involved). */
void ckpt_layout(const struct ckpt_in *in, struct ckpt_layout *l);

/* The whole model of a save in mode (CKPT_SYNC | CKPT_ASYNC) and its restart. */
void ckpt_model(const struct ckpt_in *in, const struct ckpt_env *env, int mode, struct ckpt_cost *c);

/* The layout facts and the environment of scenario s with params parameters;
 * comm_share is the share of a step in exposed communication (0 if unknown). */
void ckpt_in_of(const struct scenario *s, double params, struct ckpt_in *in);
void ckpt_env_of(const struct scenario *s, double comm_share, struct ckpt_env *env);

/* ckpt_model of scenario s. Warns (c->warn) when a blocking save or the first
 * save's planning exceeds the collective timeout, or the staged state exceeds
 * the node's host memory. */
void ckpt_cost(const struct scenario *s, double params, double comm_share, int mode,
	       struct ckpt_cost *c);

#endif
