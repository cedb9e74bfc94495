/*
 * fuzz_accel.c — libFuzzer harness of the `accelerate config` YAML import
 * (imp_accelerate: libyaml parsing, aliases, fsdp_config / deepspeed_config
 * fields), with gpt2 as the scenario's model for DeepSpeed "auto" sizes.
 */
#include "fuzz.h"
#include "import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct imp_result r;
	struct err e = {0};

	imp_init(&r);
	imp_accelerate(&r, fuzz_write("accelerate.yaml", data, size), fuzz_gpt2(), &e);
	return 0;
}
