// The fused linear layer through cuBLASLt (Note [Linear through cuBLASLt] in cuda/blas_lt.cpp).
#pragma once

namespace kiln::cuda {

// Installs the cuBLASLt kernels as CUDA's LinearBackend (ops/linear_backend.h).
void register_blas_lt();

}  // namespace kiln::cuda
