// cuDNN attention in a build without cuDNN or without the cuDNN frontend headers
// (CMakeLists.txt prints which): never available, so the front end never calls the kernels.
#include "core/error.h"
#include "cuda/cudnn_attention.h"

namespace kiln::cuda {

namespace {

[[noreturn]] void not_built() {
  fail(ErrorKind::Runtime,
       "[scaled_dot_product_attention] cuDNN: kiln was built without cuDNN attention (it needs "
       "cuDNN and the cuDNN frontend headers: run scripts/install_deps.sh and reconfigure)");
}

}  // namespace

bool cudnn_attention_available() { return false; }

bool cudnn_attention_supports(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const AttentionParams&, bool) {
  return false;
}

void cudnn_attention_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                             const Tensor&, const Tensor&, const AttentionParams&) {
  not_built();
}

void cudnn_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, const Tensor&, const AttentionParams&) {
  not_built();
}

}  // namespace kiln::cuda
