// unary, binary and where on CUDA devices (filled in by the elementwise work).
#include "cuda/kernels.h"

namespace kiln::cuda {

void install_elementwise_kernels(Backend&) {}

}  // namespace kiln::cuda
