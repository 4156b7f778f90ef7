#include "ops/linear_backend.h"

namespace kiln {

namespace {
const LinearBackend* g_cuda_linear = nullptr;
}

void register_linear_backend(DeviceType type, const LinearBackend* b) {
  if (type == DeviceType::CUDA) g_cuda_linear = b;
}

const LinearBackend* linear_backend(DeviceType type) {
  if (type == DeviceType::CPU) return &cpu::linear_backend();
  return type == DeviceType::CUDA ? g_cuda_linear : nullptr;
}

}  // namespace kiln
