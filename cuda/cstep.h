/*
 * cstep.h — a whole training step of a decoder on one GPU in bf16 mixed
 * precision (or fp32), straight over cuda/kernels.h.
 *
 * It walks the same model graph as the runtime's micro-step (model_rt.c:
 * same ops, same parameter layout and initial values, same synthetic samples,
 * same dropout stream, AdamW with the strategies' settings), so its losses can
 * be set against the cpu backend's fp32 run of strategy `single`; what it
 * adds is the precision (kernels.h): CUK_BF16 = torch.autocast (bf16
 * activations and a bf16 copy of the parameters for the products; fp32
 * master, gradients and optimizer), CUK_BF16W = sim/models/memory.h's contract (bf16
 * working parameters and gradients, fp32 master and optimizer); the optimizer
 * writes the bf16 copy back after each update.
 *
 * It is the measurement harness for throughput (bench/gpu_bench.c) and for
 * bf16-vs-fp32 tracking (tests/gpu_tests.c) until the runtime's strategies
 * carry a compute type of their own: every buffer is a plain cudaMalloc held
 * for the whole run (no arena, no freeing schedule), so its memory is not the
 * shardcast profile's.
 */
#ifndef SHARDCAST_CSTEP_H
#define SHARDCAST_CSTEP_H

#include <stdint.h>

#include "kernels.h"
#include "model_rt.h"

struct cstep {
	struct rtm r;              /* graph (fp32 sizes) and parameter layout */
	struct graph g;            /* the same graph at the compute type's sizes */
	struct cuk *k;
	int dt, B, T, flash;       /* flash: fused attention instead of scores/softmax/ctx */
	float lr, b1, b2, eps, wd;
	uint64_t seed;
	float *p, *m, *v;          /* fp32 (nparams): master, Adam moments */
	void *grad;                /* (nparams): fp32, bf16 under CUK_BF16W */
	void *pc;                  /* bf16 working copy of the parameters (== p in fp32) */
	void **val, **dval;        /* per tensor: value, gradient (B samples) */
	float *lse;                /* flash: (B, NH, T) per attention */
	int32_t *ids, *ids_host;   /* (B, 2, T) */
	size_t bytes;              /* device bytes allocated */
	int step;                  /* optimizer steps done */
	double loss;               /* mean token loss of the last step */
};

/* Loads nothing itself: m is a loaded model. B samples of T tokens, dt the
 * compute type, dropout probability, seed as strat_opts.seed. Returns 0 or
 * fills e (and frees what it made). */
int cstep_init(struct cstep *c, struct cuk *k, const struct model *m, int B, int T, int dt,
	       double dropout, uint64_t seed, int flash, struct err *e);

/* One optimizer step (forward, backward, AdamW); c->loss is its loss. */
int cstep_step(struct cstep *c, struct err *e);

void cstep_free(struct cstep *c);

#endif
