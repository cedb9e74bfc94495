/*
 * fuzz_scenario.c — libFuzzer harness of the INI scenario loader
 * (scenario_load: parsing, the key table's types, units and ranges, catalog
 * resolution, imports named by the file, the cross-key checks).
 */
#include "fuzz.h"
#include "scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scenario s;
	struct err e = {0};

	scenario_load(&s, fuzz_write("scenario.ini", data, size), NULL, 0, &e);
	scenario_free(&s);
	return 0;
}
