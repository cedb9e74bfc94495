/*
 * profile.h — a framework profile: what a training process holds on a GPU
 * besides its tensors, and how its allocator rounds and pools requests.
 *
 * Loaded from models/frameworks/<name>.ini (pytorch, deepspeed, shardcast),
 * named by the scenario's [training] framework. Each value in those files says
 * where it comes from; validate --calibrate is meant to refine them from
 * measurements. The memory model (memory.c) reads them; nothing else does.
 */
#ifndef SHARDCAST_PROFILE_H
#define SHARDCAST_PROFILE_H

#include <stdint.h>

#include "cfg.h"
#include "err.h"

struct fw_profile {
	char name[CFG_STR_MAX];
	char description[CFG_STR_MAX];
	/* allocator */
	double alignment;          /* bytes: every request is rounded up to a multiple */
	double small_pool_max;     /* bytes: requests <= this come from the small pool; 0 = no pools */
	double small_segment;      /* bytes: segment size of the small pool */
	double large_split_max;    /* bytes: larger requests below this are carved from large_segment */
	double large_segment;      /* bytes */
	double huge_round;         /* bytes: requests >= large_split_max get a segment rounded to this */
	/* fixed per-process memory on each GPU */
	double cuda_context;       /* bytes, outside the allocator */
	double cublas_workspace;   /* bytes per handle (compute capability < 9) */
	double cublas_workspace_sm90; /* bytes per handle on Hopper and later */
	int64_t cublas_handles;    /* handles with a workspace per GPU */
	double nccl_buffer;        /* bytes per connection per channel (outside the allocator) */
	int64_t nccl_channels;     /* channels per communicator */
	int64_t nccl_connections;  /* connections per channel whose buffers a GPU holds */
	/* optimizer and engine behaviour */
	double adam_step_temp;     /* bytes per parameter of temporaries in an Adam step */
	double loss_scale_state;   /* bytes of fp16 loss-scaling state */
	double zero3_reuse_distance; /* elements: DeepSpeed stage3_max_reuse_distance */
	double zero3_sub_group_size; /* elements: DeepSpeed sub_group_size */
	int zero_overlap_comm;     /* DeepSpeed stage 1/2 overlap_comm (double ipg buffer) */
	char source[CFG_STR_MAX];
};

/* Loads models/frameworks/<name>.ini (or a path) into p. where/line locate the
 * scenario key that named it. Returns 0 or fills e. */
int profile_load(const char *name_or_path, struct fw_profile *p, const char *where, int line,
		 struct err *e);

const struct cfg_table *profile_keys(void);

#endif
