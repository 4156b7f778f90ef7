// Batched GEMM through cuBLAS (the bmm kernel family).
//
// kiln tensors are row-major; cuBLAS is column-major. C = A @ B is computed as
// C^T = B^T @ A^T, where a row-major matrix read column-major is already its
// transpose, so each operand needs a transpose flag only when its unit stride
// is along rows (a transposed view). The front end guarantees a unit stride
// in one of the two matrix dims.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <unordered_map>

#include "core/error.h"
#include "core/flags.h"
#include "cuda/capture.h"
#include "cuda/cublas_api.h"
#include "cuda/internal.h"
#include "cuda/kernels.h"

namespace kiln::cuda {

namespace {

void check_cublas(cublasStatus_t status, const char* op) {
  KILN_CHECK(status == CUBLAS_STATUS_SUCCESS, Runtime, "[", op,
             "] cuBLAS error: ", blas().cublasGetStatusString(status));
}

// One handle per device per thread (cuBLAS handles are not thread-safe).
cublasHandle_t handle_for_current_device() {
  thread_local std::unordered_map<int, cublasHandle_t> handles;
  int device = 0;
  cudaGetDevice(&device);
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasHandle_t h = nullptr;
  check_cublas(blas().cublasCreate(&h), "bmm");
  handles[device] = h;
  return h;
}

struct Operand {
  cublasOperation_t op;
  int64_t ld;
};

// How a row-major [rows, cols] matrix with these strides reads as the
// transposed column-major operand.
Operand describe(const Tensor& t) {
  if (t.stride(2) == 1 && t.stride(1) >= t.size(2)) return {CUBLAS_OP_N, t.stride(1)};
  return {CUBLAS_OP_T, t.stride(2)};
}

void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  DeviceGuard guard(out.device().index);
  cublasHandle_t h = handle_for_current_device();
  check_cublas(blas().cublasSetStream(h, stream_of(out.device().index)), "bmm");
  // cublasSetStream resets the workspace to cuBLAS's own, which it may allocate under a CUDA
  // graph capture; the stream's kiln workspace exists before any capture (Note [CUDA graphs]).
  const auto [workspace, workspace_bytes] = stream_workspace(out.device().index, "bmm");
  check_cublas(blas().cublasSetWorkspace(h, workspace, workspace_bytes), "bmm");
  const Operand opa = describe(a), opb = describe(b);
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (out.dtype()) {
    case DType::Float32:
      type = CUDA_R_32F;
      if (backend_flags().matmul_allow_tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      break;
    case DType::Float64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      break;
    case DType::Float16:
      type = CUDA_R_16F;
      break;
    case DType::BFloat16:
      type = CUDA_R_16BF;
      break;
    default:
      fail(ErrorKind::NotImplemented, "[bmm] not implemented for dtype ", out.dtype());
  }
  const float alpha_f = 1.f, beta_f = 0.f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const bool f64 = compute == CUBLAS_COMPUTE_64F;
  check_cublas(
      blas().cublasGemmStridedBatchedEx(
          h, opb.op, opa.op, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
          f64 ? static_cast<const void*>(&alpha_d) : &alpha_f, b.data_ptr(), type,
          static_cast<int>(opb.ld), b.stride(0), a.data_ptr(), type, static_cast<int>(opa.ld),
          a.stride(0), f64 ? static_cast<const void*>(&beta_d) : &beta_f, out.data_ptr(), type,
          static_cast<int>(out.stride(1)), out.stride(0), static_cast<int>(batch), compute,
          CUBLAS_GEMM_DEFAULT),
      "bmm");
}

}  // namespace

void install_blas_kernels(Backend& b) { b.bmm = bmm_kernel; }

}  // namespace kiln::cuda
