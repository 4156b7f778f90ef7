#include "ops/conv_backend.h"

namespace kiln {

namespace {
const ConvBackend* g_cuda_conv = nullptr;
}

void register_conv_backend(DeviceType type, const ConvBackend* b) {
  if (type == DeviceType::CUDA) g_cuda_conv = b;
}

const ConvBackend* conv_backend(DeviceType type) {
  return type == DeviceType::CUDA ? g_cuda_conv : nullptr;
}

}  // namespace kiln
