// Fused linear-layer kernels (Note [Fused linear] in ops/nn_functional.cpp): the GEMM and the
// bias in one call, the weight and bias gradients in one more. Like ConvBackend
// (ops/conv_backend.h) this is an accelerator, kept out of struct Backend on purpose: every
// entry may decline its operands, and linear then composes matmul + add, so a device without
// it is still complete. The CPU's are Eigen kernels (ops/cpu/bmm_kernels.cpp); CUDA registers
// cuBLASLt's (cuda/blas_lt.cpp) when libkiln loads.
#pragma once

#include "core/device.h"
#include "core/tensor.h"

namespace kiln {

// Operands are 2-D matrices of any strides with sizes > 0 in one floating dtype; out, gw and the
// bias vectors (1-D, may be undefined) are contiguous. Each entry returns false, having written
// nothing, when the device's GEMM library does not take the operands (dtype, alignment, layout).
struct LinearBackend {
  // out[m, n] = a[m, k] @ w[n, k]^T + bias[n].
  bool (*forward)(const Tensor& out, const Tensor& a, const Tensor& w,
                  const Tensor& bias) = nullptr;
  // gw[n, k] = g[m, n]^T @ x[m, k] and, when gb is defined, gb[n] = the sum of g's rows.
  bool (*weight_grad)(const Tensor& gw, const Tensor& gb, const Tensor& g,
                      const Tensor& x) = nullptr;
};

// Called by a device library when it loads (cuda/backend_cuda.cpp).
void register_linear_backend(DeviceType type, const LinearBackend* b);
// The kernels of `type`'s devices, or nullptr.
const LinearBackend* linear_backend(DeviceType type);

namespace cpu {
// The CPU's (ops/cpu/bmm_kernels.cpp).
const LinearBackend& linear_backend();
}  // namespace cpu

}  // namespace kiln
