/*
 * eager.h — the elementwise kernels eager PyTorch launches for one graph op
 * beyond the op's own read of its inputs and write of its output.
 *
 * The graph (graph.c) has one op per module-level step: one LayerNorm, one
 * activation, one attention-score product. A module written as tensor
 * expressions runs one kernel per expression, each reading and writing the
 * whole tensor, so its memory traffic is several times the op's. The step
 * model (step.c) adds what this file returns as memory-bound time (bytes at
 * the device's achieved bandwidth) and one kernel gap per extra kernel. The
 * memory walk does not use it: what each formula saves is the graph's.
 *
 * The formulas, forward (A = bytes of the compute dtype, U = bytes of
 * autocast's fp32 results, T = one pass over the op's tensor):
 *  - GPT-2's gelu_new (transformers activations.py NewGELUActivation; the
 *    book "Build a Large Language Model (From Scratch)" writes the same):
 *    0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*pow(x,3)))): pow, mul, add, mul,
 *    tanh, add, mul, mul — 8 kernels moving 5A + 13U bytes per element (pow
 *    is on autocast's fp32 list, so the rest is fp32 under autocast);
 *  - LayerNorm as tensor expressions (the book's LayerNorm: mean, var,
 *    x - mean, / sqrt(var + eps), * scale, + shift): 8 kernels, 10A bytes per
 *    element (the two reductions read x, the four maps read and write it);
 *  - transformers' LlamaRMSNorm middle step (the graph's "norm" op between the
 *    fp32 copy and the weight): pow(2), mean, add eps, rsqrt, mul: 5 kernels,
 *    pow 8, mean 4, mul 8 bytes per fp32 element;
 *  - rotary embeddings on q and k (transformers apply_rotary_pos_emb:
 *    q*cos + rotate_half(q)*sin, rotate_half = cat(-x2, x1); Meta's and
 *    torchtitan's complex form: float(), complex multiply, type_as): 5
 *    kernels and about 10 passes of q or k each;
 *  - the eager attention's scaling and causal or padding mask on the
 *    (B, heads, S, S) scores (transformers' GPT-2, BERT and Llama eager paths,
 *    the book's masked_fill_ and division): 2 kernels, 2 read-and-write passes;
 *  - the bias gradient of a linear layer (addmm's backward: grad.sum(0)): one
 *    reduction reading the output gradient, in backward only.
 * Backward: each expression's backward reads the incoming gradient and the
 * operands it saved and writes a gradient per input, and reused inputs add
 * their gradients, so a formula's backward is taken as twice its forward
 * traffic in 1.5 times its kernels (an approximation, stated as such).
 */
#ifndef SHARDCAST_EAGER_H
#define SHARDCAST_EAGER_H

#include "graph.h"
#include "model.h"

struct eager_extra {
	double kernels_fwd, kernels_bwd; /* kernels beyond the op's own one */
	double bytes_fwd, bytes_bwd;     /* bytes per sample beyond the op's own traffic */
	double calls_fwd, calls_bwd;     /* aten ops issued from Python beyond the module's call
					    (the host's dispatch_op each) */
	int sync_fwd;                    /* the host waits for the GPU before the op's forward
					    (a data-dependent shape or .item()) */
};

/* What op i of graph g (an eager PyTorch graph of model m) launches beyond
 * its own kernel; all zero for other flavours and for fused ops. */
void eager_extra(const struct graph *g, const struct model *m, int i, struct eager_extra *x);

/* Adds to x what a fused attention op i costs when the model calls
 * flash-attn's variable-length kernel on unpadded tokens (flash-attn's
 * bert_padding.py, as llm-foundry's MPT flash_attn_fn calls it on every
 * batch, padded or not): unpad_input on q, k and v, each computing the
 * tokens' indices (torch.nonzero) and the longest sequence (.item()), so the
 * host waits for the GPU, then gathering the rows (IndexFirstAxis: a read and
 * a write of the tensor); pad_input on the output (zeros, then index_put: a
 * write, a read and a write). Backward: each gather scatters its gradient
 * into zeros (three passes), pad_input's gradient is a gather (two), and the
 * separate q, k, v gradients are concatenated into the fused projection's
 * (SplitBackward of qkv.chunk: a read and a write). */
void eager_varlen(const struct graph *g, int i, struct eager_extra *x);

/* Whether op i is a copy that PyTorch makes inside another op's C++ rather
 * than a module's Python call: autocast's cast of a linear layer's input
 * (made by the autocast wrapper of F.linear) and torch.matmul's contiguous
 * copies of permuted q, k, v for bmm. The host issues it as one aten op. */
int eager_internal(const struct graph *g, int i);

#endif
