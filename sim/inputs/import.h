/*
 * import.h — reading the files users already have: a Hugging Face config.json
 * (the model), an `accelerate config` YAML (FSDP, DDP or DeepSpeed through
 * Accelerate) and a DeepSpeed ds_config.json.
 *
 * A model config becomes a struct model directly. Accelerate and DeepSpeed
 * configs become a list of scenario settings ("training.strategy = fsdp"),
 * each with the file, line and field it came from; the scenario loader
 * (scenario.c) applies them before the scenario file's own keys and --set, so
 * explicit keys win, and the report says where every imported value came from.
 * Values the frameworks fill in at run time ("auto") are resolved the way the
 * Hugging Face Trainer / Accelerate resolve them when the model alone decides
 * (bucket sizes), and otherwise left to the scenario and reported as notes.
 *
 * Parsers: cJSON for JSON, libyaml for YAML. Files: imp_* lives in import.c
 * (results, shared JSON/YAML helpers), import_hf.c, import_accel.c and
 * import_ds.c.
 */
#ifndef SHARDCAST_IMPORT_H
#define SHARDCAST_IMPORT_H

#include <stdint.h>

#include "cfg.h"
#include "err.h"
#include "model.h"

enum { IMP_MAX_FILES = 4, IMP_MAX_SETTINGS = 64, IMP_MAX_NOTES = 24 };

/* What became of an imported setting. */
enum imp_state {
	IMP_PENDING,     /* not applied yet */
	IMP_APPLIED,     /* the scenario uses it */
	IMP_OVERRIDDEN,  /* the scenario file or --set gave the key explicitly */
	IMP_SUPERSEDED   /* a later import set the same key (DeepSpeed over Accelerate) */
};

struct imp_setting {
	char section[16];      /* scenario section, e.g. "training" */
	char key[48];          /* scenario key, e.g. "fsdp_sharding_strategy" */
	char value[64];        /* as it would be written in a scenario file */
	int file;              /* index into imp_result.files */
	int line;              /* line in that file; 0 = unknown */
	char field[96];        /* the source field, e.g. "fsdp_config.fsdp_sharding_strategy" */
	int state;             /* enum imp_state */
};

/* Everything the imports of one scenario produced. */
struct imp_result {
	char files[IMP_MAX_FILES][CFG_STR_MAX]; /* paths as opened */
	int nfiles;
	struct imp_setting set[IMP_MAX_SETTINGS];
	int nset;
	char notes[IMP_MAX_NOTES][256];  /* assumptions and ignored fields, for the report */
	int nnotes;
	uint64_t hash;         /* FNV-1a 64 of the imported files' texts */

	/* DeepSpeed's batch triple, checked once the data-parallel degree is known
	 * (imp_batch): train_batch_size = micro x accumulation x dp */
	int64_t ds_train_batch;       /* 0 = not given or "auto" */
	int ds_train_batch_file, ds_train_batch_line;
};

/* Empties r (no files, settings or notes). */
void imp_init(struct imp_result *r);

/* Loads a Hugging Face config.json (or a folder holding one) into m: GPT-2,
 * BERT, T5 (v1.0 and v1.1) and Llama/Mistral configs, chosen by model_type or
 * else architectures[0]. Errors name the file, the line and the field: a
 * missing or mistyped field, an unknown architecture, an inconsistent shape. */
int imp_hf_model(const char *path, struct model *m, struct err *e);

/* Reads an `accelerate config` YAML into r's settings (and a DeepSpeed file it
 * names through deepspeed_config.deepspeed_config_file, relative to the YAML's
 * folder). m is the scenario's model, for DeepSpeed "auto" sizes. */
int imp_accelerate(struct imp_result *r, const char *path, const struct model *m,
		   struct err *e);

/* Reads a DeepSpeed JSON config into r's settings; "auto" bucket sizes are
 * filled from m's hidden size as transformers' HfTrainerDeepSpeedConfig does. */
int imp_deepspeed(struct imp_result *r, const char *path, const struct model *m,
		  struct err *e);

/* DeepSpeed's batch rule (runtime/config.py _set_batch_related_parameters):
 * given train_batch_size T (r->ds_train_batch > 0) and the data-parallel degree
 * dp, fills whichever of *micro (-1 = auto) and *accum the scenario left open
 * (accum_given = 0: not set by anyone) and checks T = micro x accum x dp.
 * Returns 0 (nothing to do without T) or ERR_INPUT naming the file and line. */
int imp_batch(const struct imp_result *r, int64_t dp, int64_t *micro, int64_t *accum,
	      int accum_given, struct err *e);

/* Appends the setting section.key = value (printf format) from file:line field
 * (state IMP_PENDING). */
int imp_add(struct imp_result *r, int file, int line, const char *field, const char *section,
	    const char *key, struct err *e, const char *fmt, ...)
	__attribute__((format(printf, 8, 9)));

/* rel resolved against the folder of the file base (rel itself when it is
 * absolute or base has no folder): how a scenario names its import files. */
void imp_relative(const char *base, const char *rel, char *out, size_t n);

/* The file an imported setting came from. */
static inline const char *imp_file(const struct imp_result *r, const struct imp_setting *s)
{
	return r->files[s->file];
}

#endif
