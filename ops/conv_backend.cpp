#include "ops/conv_backend.h"

#include <atomic>

namespace kiln {

namespace {
const ConvBackend* g_cuda_conv = nullptr;
const ConvBackend* g_cpu_conv = nullptr;
std::atomic<bool> g_cpu_conv_enabled{true};
}  // namespace

void register_conv_backend(DeviceType type, const ConvBackend* b) {
  if (type == DeviceType::CUDA) g_cuda_conv = b;
  if (type == DeviceType::CPU) g_cpu_conv = b;
}

const ConvBackend* conv_backend(DeviceType type) {
  if (type == DeviceType::CPU) return g_cpu_conv;
  return type == DeviceType::CUDA ? g_cuda_conv : nullptr;
}

bool cpu_conv_enabled() { return g_cpu_conv_enabled.load(std::memory_order_relaxed); }

void set_cpu_conv_enabled(bool enabled) {
  g_cpu_conv_enabled.store(enabled, std::memory_order_relaxed);
}

}  // namespace kiln
