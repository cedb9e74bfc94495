/*
 * profile.c — loading framework profiles (see profile.h).
 */
#include "profile.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "catalog.h"

#define F(x) offsetof(struct fw_profile, x)
#define BIG 1e13
static const struct cfg_key keys[] = {
	{"framework", "description", CFG_STR, 0, 0, 0, 0, "", F(description), NULL, "free text"},
	{"framework", "alignment", CFG_NUM, UNIT_BYTES, CFG_REQUIRED, 1, 1 << 30, NULL, F(alignment), NULL, "every allocation is rounded up to a multiple of this"},
	{"framework", "small_pool_max", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(small_pool_max), NULL, "requests up to this come from the small pool (0 = no pools)"},
	{"framework", "small_segment", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(small_segment), NULL, "segment size of the small pool"},
	{"framework", "large_split_max", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(large_split_max), NULL, "larger requests below this share large segments"},
	{"framework", "large_segment", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(large_segment), NULL, "segment size shared by mid-size requests"},
	{"framework", "huge_round", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(huge_round), NULL, "requests >= large_split_max get a segment rounded to this"},
	{"framework", "cuda_context", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(cuda_context), NULL, "CUDA context and loaded kernels, per GPU"},
	{"framework", "cublas_workspace", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(cublas_workspace), NULL, "cuBLAS workspace per handle (before Hopper)"},
	{"framework", "cublas_workspace_sm90", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(cublas_workspace_sm90), NULL, "cuBLAS workspace per handle on Hopper and later"},
	{"framework", "cublas_handles", CFG_INT, 0, 0, 0, 64, "1", F(cublas_handles), NULL, "cuBLAS handles with a workspace per GPU"},
	{"framework", "nccl_buffer", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(nccl_buffer), NULL, "NCCL buffers per connection per channel"},
	{"framework", "nccl_channels", CFG_INT, 0, 0, 0, 1024, "0", F(nccl_channels), NULL, "NCCL channels per communicator"},
	{"framework", "nccl_connections", CFG_INT, 0, 0, 0, 64, "0", F(nccl_connections), NULL, "connections per channel whose buffers a GPU holds"},
	{"framework", "adam_step_temp", CFG_NUM, UNIT_BYTES, 0, 0, 64, "0", F(adam_step_temp), NULL, "bytes per parameter of temporaries in an Adam step"},
	{"framework", "loss_scale_state", CFG_NUM, UNIT_BYTES, 0, 0, BIG, "0", F(loss_scale_state), NULL, "fp16 loss-scaling state"},
	{"framework", "zero3_reuse_distance", CFG_NUM, 0, 0, 0, BIG, "1e9", F(zero3_reuse_distance), NULL, "DeepSpeed stage3_max_reuse_distance (elements)"},
	{"framework", "zero3_sub_group_size", CFG_NUM, 0, 0, 1, BIG, "1e9", F(zero3_sub_group_size), NULL, "DeepSpeed sub_group_size (elements)"},
	{"framework", "zero_overlap_comm", CFG_BOOL, 0, 0, 0, 0, "false", F(zero_overlap_comm), NULL, "DeepSpeed stage 1/2 overlap_comm: two ipg buffers"},
	{"framework", "source", CFG_STR, 0, 0, 0, 0, "", F(source), NULL, "where the values come from"},
};
#undef F
#undef BIG

static const struct cfg_table table = {keys, sizeof keys / sizeof keys[0]};

const struct cfg_table *profile_keys(void)
{
	return &table;
}

int profile_load(const char *name_or_path, struct fw_profile *p, const char *where, int line,
		 struct err *e)
{
	char path[PATH_MAX];
	int rc;

	rc = catalog_resolve("frameworks", name_or_path, path, sizeof path, where, line,
			     "[training] framework", e);
	if (rc)
		return rc;
	rc = cfg_load_file(&table, p, path, e);
	if (!rc && p->small_pool_max > 0 && (p->small_segment < p->small_pool_max ||
	    p->large_segment < p->large_split_max || p->huge_round <= 0))
		rc = err_set(e, ERR_INPUT, path, 0, "allocator pools need small_segment >= small_pool_max, "
			     "large_segment >= large_split_max and huge_round > 0");
	if (!rc)
		snprintf(p->name, sizeof p->name, "%s", name_or_path);
	return rc;
}
