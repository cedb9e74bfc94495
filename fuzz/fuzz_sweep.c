/*
 * fuzz_sweep.c — libFuzzer harness of the sweep loader (sweep_load: the
 * [sweep] lists, model globs and ranges, the cluster and training sections,
 * the candidate list).
 */
#include "fuzz.h"
#include "sweep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sweep sw;
	struct err e = {0};

	sweep_load(&sw, fuzz_write("sweep.ini", data, size), &e);
	sweep_free(&sw);
	return 0;
}
