/*
 * fuzz_ds.c — libFuzzer harness of the DeepSpeed ds_config.json import
 * (imp_deepspeed: zero_optimization, offload, precision, batch fields and
 * "auto" values), with gpt2 as the scenario's model.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "import.h"

static struct model gpt2;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct err e = {0};

	(void)argc;
	(void)argv;
	if (model_load("gpt2", &gpt2, NULL, 0, &e)) {
		fprintf(stderr, "fuzz_ds: %s (set SHARDCAST_MODELS to the catalog)\n", e.msg);
		exit(1);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct imp_result r;
	struct err e = {0};

	imp_init(&r);
	imp_deepspeed(&r, fuzz_write("ds_config.json", data, size), &gpt2, &e);
	return 0;
}
