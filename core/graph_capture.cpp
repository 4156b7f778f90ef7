#include "core/graph_capture.h"

#include <array>
#include <atomic>

#include "core/error.h"

namespace kiln {

namespace {

constexpr int kMaxDevices = 64;

std::array<std::atomic<int>, kMaxDevices> g_device_captures{};
std::atomic<int> g_global_captures{0};
thread_local int t_captures = 0;

}  // namespace

bool graph_capture_underway(int device) {
  return device >= 0 && device < kMaxDevices &&
         g_device_captures[device].load(std::memory_order_acquire) > 0;
}

bool host_sync_forbidden_by_capture() {
  return t_captures > 0 || g_global_captures.load(std::memory_order_acquire) > 0;
}

void check_not_capturing(const char* op, const std::string& what) {
  if (!host_sync_forbidden_by_capture()) return;
  fail(ErrorKind::Runtime, "[", op, "] ", what,
       " is not allowed while capturing a CUDA graph: captured work only runs when the graph "
       "is replayed, so the host cannot wait for it or read its results here (move it before "
       "capture_begin or after capture_end)");
}

void note_capture_begin(int device, bool global) {
  if (device >= 0 && device < kMaxDevices) g_device_captures[device].fetch_add(1);
  if (global) g_global_captures.fetch_add(1);
  ++t_captures;
}

void note_capture_end(int device, bool global) {
  if (device >= 0 && device < kMaxDevices) g_device_captures[device].fetch_sub(1);
  if (global) g_global_captures.fetch_sub(1);
  --t_captures;
}

}  // namespace kiln
