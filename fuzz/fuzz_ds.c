/*
 * fuzz_ds.c — libFuzzer harness of the DeepSpeed ds_config.json import
 * (imp_deepspeed: zero_optimization, offload, precision, batch fields and
 * "auto" values), with gpt2 as the scenario's model.
 */
#include "fuzz.h"
#include "import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct imp_result r;
	struct err e = {0};

	imp_init(&r);
	imp_deepspeed(&r, fuzz_write("ds_config.json", data, size), fuzz_gpt2(), &e);
	return 0;
}
