#include "ops/backend.h"

#include "ops/cpu/kernels.h"

namespace kiln {

namespace {
Backend* g_cuda_backend = nullptr;
}

void register_cuda_backend(Backend* b) { g_cuda_backend = b; }
bool has_cuda_backend() { return g_cuda_backend != nullptr; }

const Backend& backend(Device device) {
  if (device.is_cpu()) return cpu::backend();
  KILN_CHECK(g_cuda_backend != nullptr, Runtime, "[backend] device ", device,
             " is not available: kiln was built without CUDA kernels or no GPU is present");
  return *g_cuda_backend;
}

}  // namespace kiln
