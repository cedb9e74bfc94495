/*
 * test_cuda.c — opening the cuda backend on a machine that may have no GPU
 * (the kernels themselves: bin/gpu_tests, which needs one).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "backend.h"

Test(cuda, opening_fails_cleanly_or_opens)
{
	/* no crash either way: a GPU machine opens it; elsewhere the message says
	 * what is missing (no device/driver, or a build without nvcc) */
	struct backend *be;
	struct rt_comm w;
	struct err e = {0};
	int rc = backend_open("cuda", &be, &w, &e);

	if (rc == 0) {
		cr_expect_str_eq(be->name, "cuda");
		cr_expect_not_null(be->device_used);
		backend_close(be);
		return;
	}
	cr_expect(rc == ERR_SYSTEM || rc == ERR_INPUT, "rc %d", rc);
	cr_expect(strstr(e.msg, "no CUDA device") || strstr(e.msg, "no CUDA backend"), "%s", e.msg);
	cr_expect(strstr(e.msg, "--backend cpu") != NULL, "the message offers the cpu backend: %s", e.msg);
}
