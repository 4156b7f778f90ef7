#include "ops/backend.h"

#include <cstring>

#include "ops/cpu/kernels.h"
#include "ops/kernel_families.h"
#ifdef KILN_WITH_CUDA
#include "cuda/device.h"
#include "cuda/runtime.h"
#endif

namespace kiln {

namespace {
Backend* g_cuda_backend = nullptr;
}

void register_cuda_backend(Backend* b) { g_cuda_backend = b; }
bool has_cuda_backend() { return g_cuda_backend != nullptr; }

std::vector<const char*> missing_kernel_families(const Backend& b) {
  std::vector<const char*> missing;
#define KILN_MISSING_FAMILY(family) \
  if (!b.family) missing.push_back(#family);
  KILN_KERNEL_FAMILIES(KILN_MISSING_FAMILY)
  KILN_GPU_ONLY_KERNEL_FAMILIES(KILN_MISSING_FAMILY)
#undef KILN_MISSING_FAMILY
  return missing;
}

std::string zero_division_message(const char* op) {
  const bool division = std::strcmp(op, "floor_divide") == 0;
  return str_cat("[", op, "] ZeroDivisionError: integer ", division ? "division" : "modulo",
                 " by zero");
}

std::string index_error_message(const char* op, IndexErrorStyle style, int64_t index, int64_t size,
                                int64_t dim) {
  switch (style) {
    case IndexErrorStyle::Self:
      return str_cat("[", op, "] index out of range in self: index ", index, " for dimension ", dim,
                     " with size ", size);
    case IndexErrorStyle::Flat:
      return str_cat("[", op, "] out of range: tried to access index ", index, " on a tensor of ",
                     size, " elements");
    case IndexErrorStyle::Rows:
      return str_cat("[", op, "] index ", index, " is out of bounds for ", size,
                     " rows of weight (num_embeddings)");
    case IndexErrorStyle::Classes:
      return str_cat("[", op, "] Target ", index, " is out of bounds for ", size, " classes");
    case IndexErrorStyle::Dim:
      break;
  }
  return str_cat("[", op, "] index ", index, " is out of bounds for dimension ", dim, " with size ",
                 size);
}

Device concrete_device(Device d) {
  if (!d.is_cuda() || d.index >= 0) return d;
#ifdef KILN_WITH_CUDA
  // Without a GPU, "cuda" stays cuda:0 so the allocator's error names it.
  d.index = static_cast<int8_t>(cuda::device_count() > 0 ? cuda::current_device() : 0);
#else
  d.index = 0;
#endif
  return d;
}

const Backend& cuda_backend() { return backend(Device(DeviceType::CUDA, 0)); }

const Backend& backend(Device device) {
  if (device.is_cpu()) return cpu::backend();
  KILN_CHECK(g_cuda_backend != nullptr, Runtime, "[backend] device ", device,
             " is not available: kiln was built without CUDA kernels or no GPU is present");
  return *g_cuda_backend;
}

}  // namespace kiln
