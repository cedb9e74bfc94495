/*
 * fuzz.h — what every libFuzzer harness of fuzz/ shares: the input written to
 * a file of a private folder (the loaders read paths, and resolve the paths
 * their files name against that folder), removed at exit.
 *
 * Each harness defines LLVMFuzzerTestOneInput and calls the project's own
 * loader on the file; a loader's error (ERR_INPUT, ERR_SYSTEM) is a correct
 * answer, only a crash, a hang, a leak or a sanitizer report is a finding.
 */
#ifndef SHARDCAST_FUZZ_H
#define SHARDCAST_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes data to <private folder>/name and returns that path (a static
 * buffer); aborts on an I/O error, which is the machine's, not the input's. */
const char *fuzz_write(const char *name, const uint8_t *data, size_t size);

/* The catalog's gpt2 (the model an import's "auto" sizes are taken from),
 * loaded on the first call; exits when the catalog cannot be found. */
const struct model *fuzz_gpt2(void);

#endif
