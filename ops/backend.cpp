#include "ops/backend.h"

#include <cstring>

#include "ops/cpu/kernels.h"
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
  // Keep in step with struct Backend: one line per kernel family.
  std::vector<const char*> missing;
  if (!b.unary) missing.push_back("unary");
  if (!b.binary) missing.push_back("binary");
  if (!b.copy) missing.push_back("copy");
  if (!b.fill) missing.push_back("fill");
  if (!b.where) missing.push_back("where");
  if (!b.reduce) missing.push_back("reduce");
  if (!b.bmm) missing.push_back("bmm");
  if (!b.index_take) missing.push_back("index_take");
  if (!b.index_put) missing.push_back("index_put");
  if (!b.index_check) missing.push_back("index_check");
  if (!b.nonzero) missing.push_back("nonzero");
  if (!b.triangle) missing.push_back("triangle");
  if (!b.sort) missing.push_back("sort");
  if (!b.gather_rows) missing.push_back("gather_rows");
  if (!b.unique_sorted) missing.push_back("unique_sorted");
  if (!b.random) missing.push_back("random");
  if (!b.bernoulli) missing.push_back("bernoulli");
  if (!b.dropout) missing.push_back("dropout");
  if (!b.dropout_backward) missing.push_back("dropout_backward");
  if (!b.arg_reduce) missing.push_back("arg_reduce");
  if (!b.scan) missing.push_back("scan");
  if (!b.row_gather) missing.push_back("row_gather");
  if (!b.row_scatter_add) missing.push_back("row_scatter_add");
  if (!b.optimizer_step) missing.push_back("optimizer_step");
  if (!b.softmax_lastdim) missing.push_back("softmax_lastdim");
  if (!b.softmax_backward_lastdim) missing.push_back("softmax_backward_lastdim");
  if (!b.layer_norm_forward) missing.push_back("layer_norm_forward");
  if (!b.layer_norm_backward) missing.push_back("layer_norm_backward");
  if (!b.cross_entropy_forward) missing.push_back("cross_entropy_forward");
  if (!b.cross_entropy_backward) missing.push_back("cross_entropy_backward");
  if (!b.amp_unscale) missing.push_back("amp_unscale");
  if (!b.batch_norm_forward) missing.push_back("batch_norm_forward");
  if (!b.batch_norm_backward) missing.push_back("batch_norm_backward");
  if (!b.max_pool2d_forward) missing.push_back("max_pool2d_forward");
  if (!b.max_pool2d_backward) missing.push_back("max_pool2d_backward");
  if (!b.avg_pool2d_forward) missing.push_back("avg_pool2d_forward");
  if (!b.avg_pool2d_backward) missing.push_back("avg_pool2d_backward");
  if (!b.attention_forward) missing.push_back("attention_forward");
  if (!b.attention_backward) missing.push_back("attention_backward");
  // The linalg_* families are CPU-only on purpose: CUDA inputs run them through the CPU
  // (Note [CUDA linear algebra through the CPU], ops/linalg_decomp.cpp).
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
