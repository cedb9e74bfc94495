/*
 * emulate.h — `validate --emulate-world N`: one process on one device runs
 * rank 0 of an N-rank job. Shards, gathered units and buckets have the sizes
 * of the real job (the strategy sees a world of N), and each collective is
 * replaced by local work of the same size on rank 0's data, as if every rank
 * held what rank 0 holds:
 *
 *   allreduce        buf *= N           (the sum of N equal contributions)
 *   reduce_scatter   recv = N * send[0 .. count)   (rank 0's slice)
 *   allgather        recv[r*count ..] = send for every r (N local copies)
 *   the flat ones    likewise on rank 0's shard [0, sh) of the flat buffer
 *   broadcast, barrier                  nothing
 *   allreduce_host   sum: v *= N; max: v
 *
 * So one device measures the memory of an N-way sharded job exactly and the
 * compute part of its step time. The numbers computed are rank 0's of a job
 * whose ranks all draw rank 0's samples — except where parameters are sharded
 * (zero3, fsdp full/grad-op/hybrid): a gathered unit is then N copies of rank
 * 0's shard, so the losses are not a real model's (they stay finite, and the
 * memory and the work are the real job's).
 *
 * comm_split: the members of a color are not knowable from rank 0 alone, so
 * an emulated world splits the way strategy.c's hybrid sharding does — the
 * first split of a communicator gives the `group` ranks of rank 0's node
 * (color rank / group), the second the size / group ranks that share its
 * local index (color rank % group).
 */
#ifndef SHARDCAST_EMULATE_H
#define SHARDCAST_EMULATE_H

#include "backend.h"

/* Fills out with inner's memory functions and kernels and the emulated
 * collectives, and world with rank 0 of N. group: ranks per node (hybrid
 * sharding's shard group), a divisor of N. Returns 0 or fills e (ERR_INPUT). */
int emu_open(struct backend *inner, int N, int group, struct backend *out, struct rt_comm *world,
	     struct err *e);

/* Frees the world emu_open made. */
void emu_close(struct rt_comm *world);

#endif
