#include "core/flags.h"

#include <atomic>

namespace kiln {

namespace {
std::atomic<bool> g_matmul_allow_tf32{false};
std::atomic<bool> g_cudnn_allow_tf32{true};
std::atomic<bool> g_cudnn_benchmark{false};
std::atomic<bool> g_cudnn_deterministic{false};
std::atomic<bool> g_cudnn_enabled{true};
}  // namespace

BackendFlags backend_flags() {
  BackendFlags f;
  f.matmul_allow_tf32 = g_matmul_allow_tf32.load(std::memory_order_relaxed);
  f.cudnn_allow_tf32 = g_cudnn_allow_tf32.load(std::memory_order_relaxed);
  f.cudnn_benchmark = g_cudnn_benchmark.load(std::memory_order_relaxed);
  f.cudnn_deterministic = g_cudnn_deterministic.load(std::memory_order_relaxed);
  f.cudnn_enabled = g_cudnn_enabled.load(std::memory_order_relaxed);
  return f;
}

void set_backend_flags(const BackendFlags& f) {
  g_matmul_allow_tf32.store(f.matmul_allow_tf32);
  g_cudnn_allow_tf32.store(f.cudnn_allow_tf32);
  g_cudnn_benchmark.store(f.cudnn_benchmark);
  g_cudnn_deterministic.store(f.cudnn_deterministic);
  g_cudnn_enabled.store(f.cudnn_enabled);
}

}  // namespace kiln
