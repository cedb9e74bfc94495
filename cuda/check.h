/*
 * check.h — one check macro per library (CUDA runtime, cuBLAS/cuBLASLt, NCCL)
 * that prints the library's own message, where the call was made and a hint.
 *
 *   CUDA_CHECK(call)        fatal: prints and exits 1 (kernels and copies, which
 *                           return void through struct backend)
 *   CUDA_TRY(call, e)       returns ERR_SYSTEM from the enclosing function with
 *                           the same message in *e (allocation, setup)
 *   CUBLAS_CHECK / CUBLAS_TRY, NCCL_CHECK / NCCL_TRY likewise.
 *
 * Usable from C (backend_cuda.c) and CUDA (kernels.cu).
 */
#ifndef SHARDCAST_CUDA_CHECK_H
#define SHARDCAST_CUDA_CHECK_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "err.h"  /* C declarations */

/* What to try when a call fails with this status. */
static inline const char *cuda_hint(cudaError_t rc)
{
	switch (rc) {
	case cudaErrorNoDevice:
	case cudaErrorInvalidDevice:
		return "is the GPU visible? check nvidia-smi and CUDA_VISIBLE_DEVICES";
	case cudaErrorInsufficientDriver:
		return "the NVIDIA driver is older than this CUDA runtime; update the driver";
	case cudaErrorMemoryAllocation:
		return "the device is out of memory (another process? a too large batch?)";
	case cudaErrorNoKernelImageForDevice:
	case cudaErrorUnsupportedPtxVersion:
		return "built for sm_80/sm_90: rebuild with this GPU's -gencode (make NVCC_ARCH=...)";
	case cudaErrorLaunchOutOfResources:
		return "a kernel asked for too many registers or too much shared memory";
	case cudaErrorIllegalAddress:
	case cudaErrorMisalignedAddress:
		return "a kernel read or wrote out of bounds: run with compute-sanitizer";
	default:
		return "run with CUDA_LAUNCH_BLOCKING=1 to locate the failing kernel";
	}
}

static inline const char *cublas_hint(cublasStatus_t rc)
{
	switch (rc) {
	case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS handle not created: is the GPU visible?";
	case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate: the device is out of memory";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "this type/layout/epilogue is not supported on this GPU";
	case CUBLAS_STATUS_INVALID_VALUE: return "a matrix dimension, leading dimension or pointer is invalid";
	default: return "run with CUBLASLT_LOG_LEVEL=5 for cuBLASLt's own trace";
	}
}

static inline const char *nccl_hint(ncclResult_t rc)
{
	switch (rc) {
	case ncclSystemError: return "a system call failed: run with NCCL_DEBUG=INFO (shm size? network?)";
	case ncclInvalidUsage: return "ranks disagree on the collective, its size or the communicator";
	case ncclUnhandledCudaError: return "a CUDA call inside NCCL failed: is every rank on its own GPU?";
	case ncclRemoteError: return "another rank failed or the network dropped; check its log";
	default: return "run with NCCL_DEBUG=INFO";
	}
}

#define CHECK_FATAL_(lib, msg, hint) do { \
	fprintf(stderr, "%s:%d: %s error: %s (%s)\n", __FILE__, __LINE__, lib, msg, hint); \
	exit(1); } while (0)

#define CUDA_CHECK(call) do { cudaError_t rc_ = (call); if (rc_ != cudaSuccess) \
	CHECK_FATAL_("CUDA", cudaGetErrorString(rc_), cuda_hint(rc_)); } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t rc_ = (call); if (rc_ != CUBLAS_STATUS_SUCCESS) \
	CHECK_FATAL_("cuBLAS", cublasLtGetStatusString(rc_), cublas_hint(rc_)); } while (0)
#define NCCL_CHECK(call) do { ncclResult_t rc_ = (call); if (rc_ != ncclSuccess) \
	CHECK_FATAL_("NCCL", ncclGetErrorString(rc_), nccl_hint(rc_)); } while (0)

#define CHECK_TRY_(lib, msg, hint, e) \
	return err_set(e, ERR_SYSTEM, __FILE__, __LINE__, "%s error: %s (%s)", lib, msg, hint)

#define CUDA_TRY(call, e) do { cudaError_t rc_ = (call); if (rc_ != cudaSuccess) \
	CHECK_TRY_("CUDA", cudaGetErrorString(rc_), cuda_hint(rc_), e); } while (0)
#define CUBLAS_TRY(call, e) do { cublasStatus_t rc_ = (call); if (rc_ != CUBLAS_STATUS_SUCCESS) \
	CHECK_TRY_("cuBLAS", cublasLtGetStatusString(rc_), cublas_hint(rc_), e); } while (0)
#define NCCL_TRY(call, e) do { ncclResult_t rc_ = (call); if (rc_ != ncclSuccess) \
	CHECK_TRY_("NCCL", ncclGetErrorString(rc_), nccl_hint(rc_), e); } while (0)

/* After a kernel launch: catches bad launch configurations at the call site. */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

#ifdef __cplusplus
}
#endif

#endif
