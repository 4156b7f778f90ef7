// copy and fill on CUDA devices; the host logic is in cuda/copy.cpp, the
// kernels in cuda/copy.cu and cuda/fill.cu.
#include "cuda/internal.h"
#include "cuda/kernels.h"

namespace kiln::cuda {

void install_runtime_kernels(Backend& b) {
  b.copy = copy_tensor;
  b.fill = fill_tensor;
}

}  // namespace kiln::cuda
