#include "core/flags.h"

#include <atomic>

#include "core/error.h"

namespace kiln {

namespace {
std::atomic<bool> g_matmul_allow_tf32{false};
std::atomic<bool> g_cudnn_allow_tf32{true};
std::atomic<bool> g_cudnn_benchmark{false};
std::atomic<bool> g_cudnn_deterministic{false};
std::atomic<bool> g_cudnn_enabled{true};
std::atomic<bool> g_sdp_flash{true};
std::atomic<bool> g_sdp_mem_efficient{true};
std::atomic<bool> g_sdp_cudnn{true};
std::atomic<bool> g_sdp_math{true};
std::atomic<DType> g_default_dtype{DType::Float32};
}  // namespace

BackendFlags backend_flags() {
  BackendFlags f;
  f.matmul_allow_tf32 = g_matmul_allow_tf32.load(std::memory_order_relaxed);
  f.cudnn_allow_tf32 = g_cudnn_allow_tf32.load(std::memory_order_relaxed);
  f.cudnn_benchmark = g_cudnn_benchmark.load(std::memory_order_relaxed);
  f.cudnn_deterministic = g_cudnn_deterministic.load(std::memory_order_relaxed);
  f.cudnn_enabled = g_cudnn_enabled.load(std::memory_order_relaxed);
  f.sdp_flash = g_sdp_flash.load(std::memory_order_relaxed);
  f.sdp_mem_efficient = g_sdp_mem_efficient.load(std::memory_order_relaxed);
  f.sdp_cudnn = g_sdp_cudnn.load(std::memory_order_relaxed);
  f.sdp_math = g_sdp_math.load(std::memory_order_relaxed);
  return f;
}

void set_backend_flags(const BackendFlags& f) {
  g_matmul_allow_tf32.store(f.matmul_allow_tf32);
  g_cudnn_allow_tf32.store(f.cudnn_allow_tf32);
  g_cudnn_benchmark.store(f.cudnn_benchmark);
  g_cudnn_deterministic.store(f.cudnn_deterministic);
  g_cudnn_enabled.store(f.cudnn_enabled);
  g_sdp_flash.store(f.sdp_flash);
  g_sdp_mem_efficient.store(f.sdp_mem_efficient);
  g_sdp_cudnn.store(f.sdp_cudnn);
  g_sdp_math.store(f.sdp_math);
}

DType default_dtype() { return g_default_dtype.load(std::memory_order_relaxed); }

void set_default_dtype(DType dtype) {
  KILN_CHECK(is_floating(dtype), Type,
             "[set_default_dtype] only floating-point types are supported as the default type, "
             "got ", dtype);
  g_default_dtype.store(dtype);
}

}  // namespace kiln
