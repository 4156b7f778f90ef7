// CUDA runtime errors as kiln errors: "[op] CUDA error: <text> (<name>)".
// Included by .cu and .cpp files of the CUDA backend only (it needs cuda_runtime.h).
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

namespace kiln::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* op, const char* what) {
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  ErrorKind kind = err == cudaErrorMemoryAllocation ? ErrorKind::OutOfMemory : ErrorKind::Runtime;
  fail(kind, "[", op, "] CUDA error: ", cudaGetErrorString(err), " (", cudaGetErrorName(err),
       ") in ", what);
}

}  // namespace kiln::cuda

// KILN_CUDA_CHECK(cudaMemcpyAsync(...), "copy_"): throws RuntimeError naming the op and the
// CUDA error string when the call fails.
#define KILN_CUDA_CHECK(expr, op)                                       \
  do {                                                                  \
    cudaError_t kiln_cuda_err_ = (expr);                                \
    if (kiln_cuda_err_ != cudaSuccess)                                  \
      ::kiln::cuda::throw_cuda_error(kiln_cuda_err_, op, #expr);         \
  } while (0)

// After a kernel launch: a bad configuration or an earlier asynchronous fault surfaces here.
#define KILN_CUDA_CHECK_LAUNCH(op)                                       \
  do {                                                                  \
    cudaError_t kiln_cuda_err_ = cudaGetLastError();                    \
    if (kiln_cuda_err_ != cudaSuccess)                                  \
      ::kiln::cuda::throw_cuda_error(kiln_cuda_err_, op, "kernel launch"); \
  } while (0)
