// Process-wide numerics switches users flip from Python (kiln.backends.*),
// read by the kernels they affect. Atomic: a training thread may read them
// while another thread sets them.
#pragma once

#include "core/dtype.h"

namespace kiln {

struct BackendFlags {
  // float32 matmuls may run on TF32 tensor cores (PyTorch's default: off).
  bool matmul_allow_tf32 = false;
  // cuDNN convolutions may use TF32 (PyTorch's default: on).
  bool cudnn_allow_tf32 = true;
  // Pick cuDNN algorithms by timing them once per shape.
  bool cudnn_benchmark = false;
  // Only deterministic cuDNN algorithms.
  bool cudnn_deterministic = false;
  // Convolutions on CUDA go through cuDNN when kiln was built with it; off:
  // the GEMM composition every device runs (PyTorch's default: on).
  bool cudnn_enabled = true;
  // Scaled-dot-product attention implementations the dispatcher may pick (PyTorch's
  // torch.backends.cuda.enable_*_sdp; Note [Choosing an attention kernel] in ops/attention.cpp).
  bool sdp_flash = true;
  bool sdp_mem_efficient = true;
  bool sdp_cudnn = true;
  bool sdp_math = true;
};

BackendFlags backend_flags();
void set_backend_flags(const BackendFlags& flags);

// kiln.set_default_dtype: the dtype of Python floats, of factories given no
// dtype, and of math on integers (exp(int)). Always a floating dtype.
DType default_dtype();
// Throws a Type error for a non-floating dtype, as PyTorch does.
void set_default_dtype(DType dtype);

}  // namespace kiln
