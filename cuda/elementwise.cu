// Registers the CUDA elementwise kernels (cuda/unary.cu, cuda/binary.cu).
#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"

namespace kiln::cuda {

void install_elementwise_kernels(Backend& b) {
  b.unary = unary_kernel;
  b.binary = binary_kernel;
  b.where = where_kernel;
}

}  // namespace kiln::cuda
