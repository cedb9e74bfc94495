/*
 * gpu_bench.c — training throughput of a decoder on this GPU with the CUDA
 * kernels (cuda/cstep.c: bf16 mixed precision or fp32, AdamW), for the
 * comparison with PyTorch eager (bench/pytorch_gpt2.py) on the same model,
 * batch and sequence length.
 *
 *   gpu_bench MODEL B T [bf16|bf16w|fp32] [STEPS] [--flash]
 *
 * bf16 is torch.autocast's arrangement (fp32 gradients), bf16w the shardcast
 * memory contract's (bf16 working parameters and gradients; kernels.h).
 *
 * 3 warm-up steps, then STEPS (default 20) timed steps, the device waited for
 * at both ends. Each step reads its loss back (as the PyTorch script's
 * loss.item() does). Prints a human line and one "RESULT key=value ..." line.
 * Without a GPU: "SKIP: ..." and exit 0.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cstep.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	struct backend *be;
	struct rt_comm world;
	struct model m;
	struct cstep c;
	struct err e = {0};
	int B, T, dt = CUK_BF16, steps = 20, flash = 0, n = 0, i;
	double t0, t1, first = 0, flops;

	if (argc < 4) {
		fprintf(stderr, "usage: %s MODEL B T [bf16|bf16w|fp32] [STEPS] [--flash]\n", argv[0]);
		return 2;
	}
	B = atoi(argv[2]), T = atoi(argv[3]);
	for (i = 4; i < argc; i++) {
		if (strcmp(argv[i], "fp32") == 0) dt = CUK_F32;
		else if (strcmp(argv[i], "bf16") == 0) dt = CUK_BF16;
		else if (strcmp(argv[i], "bf16w") == 0) dt = CUK_BF16W;
		else if (strcmp(argv[i], "--flash") == 0) flash = 1;
		else steps = atoi(argv[i]);
	}
	if (B < 1 || T < 1 || steps < 1) {
		fprintf(stderr, "%s: B, T and STEPS must be >= 1\n", argv[0]);
		return 2;
	}
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("SKIP: no CUDA device\n");
		return 0;
	}
	if (model_load(argv[1], &m, NULL, 0, &e) || backend_open("cuda", &be, &world, &e) ||
	    cstep_init(&c, backend_cuda_kernels(be), &m, B, T, dt, 0.0, 1234, flash, &e)) {
		fprintf(stderr, "%s: %s\n", argv[0], e.msg);
		return e.code ? e.code : 1;
	}
	for (i = 0; i < 3; i++) {
		if (cstep_step(&c, &e))
			goto fail;
		if (i == 0)
			first = c.loss;
	}
	cudaDeviceSynchronize();
	t0 = now();
	for (i = 0; i < steps; i++)
		if (cstep_step(&c, &e))
			goto fail;
	cudaDeviceSynchronize();
	t1 = now();
	flops = graph_model_flops_per_sample(&c.r.g, &m) * B;
	printf("shardcast %s %s%s B=%d T=%d on %s: %.0f tokens/s, step %.1f ms, %.1f TFLOP/s (model), "
	       "loss %.3f -> %.3f, %.2f GiB allocated\n", argv[1], dt == CUK_BF16W ? "bf16w" : dt ? "bf16" : "fp32", flash ? " flash" : "", B, T,
	       be->device, B * T * steps / (t1 - t0), (t1 - t0) / steps * 1e3, flops * steps / (t1 - t0) / 1e12,
	       first, c.loss, c.bytes / 1073741824.0);
	printf("RESULT framework=shardcast model=%s dtype=%s attention=%s batch=%d seq=%d tokens_per_s=%.1f "
	       "step_ms=%.3f loss=%.4f\n", argv[1], dt == CUK_BF16W ? "bf16w" : dt ? "bf16" : "fp32", flash ? "flash" : "unfused", B, T,
	       B * T * steps / (t1 - t0), (t1 - t0) / steps * 1e3, c.loss);
	cstep_free(&c);
	backend_close(be);
	return 0;
fail:
	fprintf(stderr, "%s: %s\n", argv[0], e.msg);
	return 1;
}
