/*
 * fuzz_hf.c — libFuzzer harness of the Hugging Face config.json import
 * (imp_hf_model: JSON parsing, fields per model_type, shape checks).
 */
#include "fuzz.h"
#include "import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model m;
	struct err e = {0};

	imp_hf_model(fuzz_write("config.json", data, size), &m, &e);
	return 0;
}
