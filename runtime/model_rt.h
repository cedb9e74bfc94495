/*
 * model_rt.h — the decoder's training micro-step, executed by walking the
 * simulator's model graph (graph.h, flavour GRAPH_SHARDCAST).
 *
 * The allocation schedule is the contract of sim/models/memory.h (framework =
 * shardcast, rules S4-S5), which the memory model replays to predict the
 * arena's peak byte for byte:
 *
 *  micro-step start: the token ids, a (B, 2, T) int32 buffer of inputs and
 *   targets (8 bytes per token: the graph's int64 ids tensor).
 *  forward, op by op in graph order: the strategy's pre-op hook (FSDP gathers
 *   a unit before its first op); the op's output and the tensors it creates
 *   for its backward (norm statistics, dropout masks), in that order; the
 *   kernel; then every distinct input, then every product, whose last forward
 *   use is this op and that nothing keeps (kept = some op outside a recompute
 *   region saves it, or a region reads it from outside, or it is held) is
 *   freed; the post-op hook (a unit is resharded after its last op).
 *  backward, ops in reverse: the pre-op hook (a unit is gathered before its
 *   last op); the replay of a recompute region before its last op; for each
 *   distinct input made by an op: a gradient of the input's size is allocated
 *   (zeroed) unless it has one, except that an add hands its output gradient
 *   to inputs without one (no allocation; later contributions accumulate in
 *   place); the parameter-gradient hook (a unit's unsharded gradient before
 *   its first parameter gradient); the kernel; the output gradient is
 *   released (freed when no input shares it); the tensors this op frees
 *   (forward copies whose first keeper it is, replayed tensors whose first
 *   saver inside the region it is); the post-op hook (a unit's gradient is
 *   reduced and freed after its first op, then its gathered parameters).
 *  recompute regions: full = each block, selective = each run of attention
 *   core ops. The replay runs every op of the region under the forward rules
 *   except that a replayed tensor saved by an op of the region stays until
 *   that op's backward; others are freed after their last use inside it.
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
#include "life.h"
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

/* What the strategy provides: each parameter's values and gradient on this
 * device, and hooks around every op (op index of the graph). */
struct rtm_hooks {
	void *ctx;
	float *(*param)(void *ctx, int p);
	float *(*grad)(void *ctx, int p);    /* valid between pgrad_begin and pgrad_end */
	int (*fwd_pre)(void *ctx, int op, struct err *e);
	int (*fwd_post)(void *ctx, int op, struct err *e);
	int (*bwd_pre)(void *ctx, int op, struct err *e);
	int (*pgrad_begin)(void *ctx, int op, struct err *e);
	int (*pgrad_end)(void *ctx, int op, struct err *e);
	int (*bwd_post)(void *ctx, int op, struct err *e);
};

struct rtm {
	struct graph g;
	struct model m;
	struct backend *be;
	struct arena *ar;          /* the device the micro-step runs on */
	struct rtm_hooks h;
	int T, C, NH, V, F;        /* tokens, width, heads, vocabulary, MLP width */
	int NKV, hs;               /* key/value heads, head size */
	float theta;               /* rotary base (Llama 2: 10000) */
	uint8_t *rope_op;          /* per op: the qkv product whose q, k get rotary positions */
	char (*tname)[GRAPH_NAME]; /* per tensor: its name (graph_tensor_name), the arena's tag */
	int recompute;             /* enum recompute */
	int dt;                    /* enum rt_dtype of activations and gradients (16-bit: mixed
				      precision, the values held in fp32 and rounded, backend.h) */
	float dropout;             /* probability */

	/* parameter layout */
	int nunits;
	size_t *unit_n;            /* elements per unit */
	size_t *unit_goff;         /* canonical offset of each unit */
	size_t nparams;            /* elements, whole model */
	struct rt_param *p;
	int np;
	int *op_w, *op_b;          /* per op: its weight / bias param, -1 none */

	struct life lf;            /* lifetimes (sim/models/life.h, memory.h S4-S5), shared with the memory walk */

	/* per tensor, during a micro-step */
	void **val;
	int *gblk;                 /* gradient block of the tensor, -1 none */
	void **bptr;               /* per block: buffer */
	int *bref;                 /* per block: tensors sharing it */
	int nblk;

	/* the micro-step */
	int B;
	double loss_sum;           /* sum of token losses of the micro-step */
	float loss_scale;          /* d loss / d token loss: 1 / tokens of the optimizer step */
	uint64_t seed, rng_step;   /* dropout stream of this micro-step */
	float *capture_logits;     /* host (B, T, V): copy of the logits, or NULL */
	int logits;                /* the logits tensor (the loss's input) */
};

/* Builds the graph (GRAPH_SHARDCAST, act_bytes 4 for dt = RT_F32, else 2) of
 * model m at seq_len T and the parameter layout. Errors name what the runtime
 * does not implement. */
int rtm_init(struct rtm *r, const struct model *m, int T, double dropout, int recompute, int dt,
	     struct backend *be, struct err *e);

/* Does op i compute parameter gradients (its own, or the tied table's)? */
int rtm_has_pgrads(const struct rtm *r, int i);
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
