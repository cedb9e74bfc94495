/*
 * backend_cuda_none.c — the cuda backend of a build without nvcc: opening it
 * says so. (With nvcc, backend_cuda.c is built instead.)
 */
#include "backend.h"

int backend_cuda_open(struct backend **be, struct rt_comm *world, struct err *e)
{
	(void)be;
	(void)world;
	return err_set(e, ERR_INPUT, NULL, 0,
		       "--backend cuda: this build has no CUDA backend (nvcc was not found when it was "
		       "built; install the CUDA toolkit and rebuild, or make NVCC=/path/to/nvcc); use --backend cpu");
}

void backend_cuda_close(struct backend *be)
{
	(void)be;
}
