/*
 * model_rt.h — the decoder's training micro-step, executed by walking the
 * simulator's model graph (graph.h, flavour GRAPH_SHARDCAST).
 *
 * The allocation schedule below is what the memory model must predict for
 * framework = shardcast (every buffer through the arena, rounded to 256 B):
 *
 *  forward, op by op in graph order:
 *   1. the op's output and the tensors it creates for its backward (norm
 *      statistics, dropout masks) are allocated, in that order, B x bytes per
 *      sample each;
 *   2. the kernel runs;
 *   3. every tensor whose last forward reader is this op is freed unless it is
 *      saved for backward (first_saver >= 0) or held.
 *  backward, op by op in reverse:
 *   1. the gradient buffer of each input that needs one and has none yet is
 *      allocated (zeroed), in input order — the token ids need none;
 *   2. the kernel runs (accumulating into those buffers and the parameters'
 *      gradients);
 *   3. the gradient of the op's output is freed, then every tensor whose first
 *      saver is this op.
 *  The token ids, a (B, 2, T) int32 buffer of inputs and targets (8 bytes per
 *  token, the graph's ids tensor), are allocated before the first op.
 *  No other temporaries exist: every kernel works in place of its outputs.
 *
 *  activation_checkpointing = full: in forward, a tensor produced inside block
 *  b is freed at its last forward reader unless an op outside block b saves it
 *  (the block's output, which is the next block's input); its statistics and
 *  masks are freed right after the op. When the backward reaches block b (after
 *  the strategy's unit hook), the block's ops whose outputs are saved or read
 *  inside the block are run again under the forward rules, then the block's
 *  backward proceeds as above.
 *
 * Parameters live in one flat buffer per wrap unit (0 = embeddings, final
 * norm and head; b+1 = block b), each op's tensors in graph order, weight then
 * bias; matrices are (out, in) as nn.Linear stores them. The strategy owns
 * these buffers and hands them over through hooks.
 */
#ifndef SHARDCAST_MODEL_RT_H
#define SHARDCAST_MODEL_RT_H

#include <stdint.h>

#include "backend.h"
#include "graph.h"
#include "model.h"

/* One parameter tensor. */
struct rt_param {
	char name[48];
	int op;
	int unit;
	size_t off;                /* elements, within the unit's flat buffer */
	size_t goff;               /* elements, within the whole model (canonical order) */
	size_t n;                  /* elements */
	int kind;                  /* enum rt_pkind: how it is initialised */
};

enum rt_pkind { PK_MATRIX, PK_BIAS, PK_NORM_W, PK_NORM_B, PK_EMBED };

/* What the strategy provides: the unit's parameters and gradients on this
 * device, and notifications as the step moves through units. */
struct rtm_hooks {
	void *ctx;
	float *(*params)(void *ctx, int unit);
	float *(*grads)(void *ctx, int unit);
	int (*fwd_enter)(void *ctx, int unit, struct err *e);
	int (*fwd_exit)(void *ctx, int unit, struct err *e);
	int (*bwd_enter)(void *ctx, int unit, struct err *e);
	int (*bwd_exit)(void *ctx, int unit, struct err *e);
	int (*grad_ready)(void *ctx, int param, struct err *e);  /* a param's gradient is final */
};

struct rtm {
	struct graph g;
	struct model m;
	struct backend *be;
	struct arena *ar;          /* the device the micro-step runs on */
	struct rtm_hooks h;
	int T, C, NH, V, F;        /* tokens, width, heads, vocabulary, MLP width */
	int recompute;             /* enum recompute */
	float dropout;             /* probability */

	/* parameter layout */
	int nunits;
	size_t *unit_n;            /* elements per unit */
	size_t *unit_goff;         /* canonical offset of each unit */
	size_t nparams;            /* elements, whole model */
	struct rt_param *p;
	int np;
	int *op_w, *op_b;          /* per op: its weight / bias param, -1 none */

	/* per tensor, during a micro-step */
	void **val, **grad;
	uint8_t *keep_ckpt;        /* tensor stays under full checkpointing */
	int *block_of;             /* per op: block index, -1 outside blocks */
	int *block_last;           /* per block: its last op */

	/* the micro-step */
	int B;
	double loss_sum;           /* sum of token losses of the micro-step */
	float loss_scale;          /* d loss / d token loss: 1 / tokens of the optimizer step */
	uint64_t seed, rng_step;   /* dropout stream of this micro-step */
	float *capture_logits;     /* host (B, T, V): copy of the logits, or NULL */
};

/* Builds the graph (GRAPH_SHARDCAST, act_bytes 4) of model m at seq_len T and
 * the parameter layout. Errors name what the runtime does not implement. */
int rtm_init(struct rtm *r, const struct model *m, int T, double dropout, int recompute,
	     struct backend *be, struct err *e);
void rtm_free(struct rtm *r);

/* The initial value of parameter element i (canonical order) of a model whose
 * element belongs to a tensor of kind k: a splitmix64 stream (seed + i) mapped
 * to U[-1, 1), scaled per kind (tests/ref/make_reference.py does the same). */
float rtm_init_value(uint64_t seed, size_t i, int kind);

/* Fills dst (n elements) with the initial values of unit u's elements
 * [from, from + n) (padding past the unit's end is zero). */
void rtm_init_unit(const struct rtm *r, uint64_t seed, int u, size_t from, float *dst, size_t n);

/* Token ids of the synthetic data: sample `sample` of the stream seed, into
 * ids (2, T) (inputs then next-token targets). */
void rtm_sample(const struct rtm *r, uint64_t seed, uint64_t sample, int32_t *ids);

/* One micro-step: ids_host (B, 2, T) int32 on the host. Allocates, computes
 * forward and backward (gradients accumulate through the hooks) and frees
 * everything it allocated, also on error. loss_sum is set. */
int rtm_micro_step(struct rtm *r, int B, const int32_t *ids_host, struct err *e);

/* Forward only (for evaluation and the reference test): loss_sum is set. */
int rtm_forward_only(struct rtm *r, int B, const int32_t *ids_host, struct err *e);

/* Bytes per sample of tensor t. */
size_t rtm_tensor_bytes(const struct rtm *r, int t, int B);

#endif
