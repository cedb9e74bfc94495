/*
 * strategy_int.h — what strategy.c shares with stratfsdp2.c (FSDP2's units).
 * Private to the two.
 */
#ifndef SHARDCAST_STRATEGY_INT_H
#define SHARDCAST_STRATEGY_INT_H

#include "strategy.h"

/* n elements of w bytes each through the running device's arena, zeroed
 * (a 16-bit buffer is held in fp32, counted at w). Returns 0, RT_EOOM or
 * fills e. */
int strat_buf(struct strat *s, float **p, size_t n, size_t w, const char *tag, struct err *e);

/* Frees *p (NULL is fine) and clears it. */
void strat_unbuf(struct strat *s, float **p);

/* Rounds a 16-bit buffer's values to its type after a write. */
void strat_round(struct strat *s, float *p, size_t n);

/* Before a collective in a search trial: do all ranks still run? */
int strat_agree(struct strat *s, struct err *e);

/* stratfsdp2.c: the per-parameter layout (after the units: their shard
 * sizes and offsets), the initial shards, and the hooks. */
int stratfsdp2_layout(struct strat *s, struct err *e);
void stratfsdp2_init(struct strat *s);
float *stratfsdp2_param(struct strat *s, int p);
float *stratfsdp2_grad(struct strat *s, int p);
int stratfsdp2_fwd_pre(struct strat *s, int op, struct err *e);
int stratfsdp2_fwd_post(struct strat *s, int op, struct err *e);
int stratfsdp2_bwd_pre(struct strat *s, int op, struct err *e);
int stratfsdp2_bwd_post(struct strat *s, int op, struct err *e);
void stratfsdp2_bwd_end(struct strat *s);
int stratfsdp2_gather_params(struct strat *s, float *host, struct err *e);
void stratfsdp2_free(struct strat *s);

#endif
