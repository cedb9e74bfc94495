/*
 * ckpt.h — what one checkpoint costs: its size, how long training is blocked
 * for it, how long it takes to write in the background, and to read back.
 *
 * Size: the training state the framework saves, per parameter — the weights
 * as the optimizer sees them (fp32, or a 16-bit module plus fp32 masters),
 * the optimizer's moments, the gradients if asked; what it holds is the
 * plan's (plan.h ckpt_*) — times the parameters (REFERENCE.md "Checkpoint
 * size": 12–14 B/param for mixed-precision Adam without gradients, 16 with).
 *
 * Writes:
 *   sharded  every rank writes its own share at once (torch.distributed.
 *            checkpoint, DeepSpeed): bytes / min(storage bandwidth, nodes x
 *            node bandwidth).
 *   full     the state is gathered on rank 0 (FSDP FULL_STATE_DICT,
 *            rank0_only) and written by that one process: the gather through
 *            rank 0's NICs, then bytes / min(storage, node bandwidth).
 * Modes:
 *   sync     training waits for the whole write.
 *   async    training waits only for the copy of each rank's share to host
 *            memory (device-to-host at host_copy_bandwidth; for a full state
 *            dict, the gather, with which the copy is pipelined); the write
 *            then runs in the background and must end before the next
 *            checkpoint starts. Needs the staged share in host memory.
 * Read at a restart: the same bandwidths as the write (a full state dict is
 * read by rank 0 and scattered).
 */
#ifndef SHARDCAST_CKPT_H
#define SHARDCAST_CKPT_H

#include "scenario.h"

#define CKPT_MAX_WARN 4

struct ckpt_cost {
	double bytes_per_param;  /* B saved per parameter */
	double bytes;            /* B, the whole training state */
	double shard;            /* B each GPU stages (sharded: bytes / GPUs) */
	double node_bw;          /* B/s one node writes or reads */
	double write_bw;         /* B/s the save is written at */
	double gather;           /* s to gather a full state dict on rank 0 */
	double write;            /* s to write the checkpoint */
	double copy;             /* s of device-to-host staging (async) */
	double block;            /* s training is blocked per checkpoint (this mode) */
	double block_sync;       /* s a synchronous save would block (planned stops) */
	double background;       /* s written after training resumes (async; 0 for sync) */
	double load;             /* s to read it at a restart */
	double host;             /* B of host memory a node needs for it (async staging, full gather) */
	int nwarn;
	char warn[CKPT_MAX_WARN][256];
};

/* Fills c for scenario s with params trained parameters, in checkpoint mode
 * mode (CKPT_SYNC | CKPT_ASYNC; the scenario's own is s->s.checkpoint.mode).
 * Warns (c->warn) when a blocking save exceeds the collective timeout or the
 * staged state exceeds the node's host memory. */
void ckpt_cost(const struct scenario *s, double params, int mode, struct ckpt_cost *c);

#endif
