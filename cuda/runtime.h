// The CUDA runtime as the rest of kiln sees it: devices, streams, events, the
// caching allocators and their statistics. No CUDA header is needed to use it
// (streams and events are opaque pointers), so the Python bindings include it.
// Only declared in builds with the CUDA backend (KILN_WITH_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/tensor.h"

namespace kiln::cuda {

// --- devices -----------------------------------------------------------------
// The device an unindexed "cuda" means for this thread.
int current_device();
void set_device(int index);
// `d.index`, or the current device for a bare "cuda"; RuntimeError naming the device when
// there is no GPU or the index is out of range.
int resolve_device(Device d, const char* op);

struct DeviceProperties {
  std::string name;
  size_t total_memory = 0;
  int multi_processor_count = 0;
  int major = 0, minor = 0;
};
DeviceProperties device_properties(int index);
// Waits for all work on the device, then raises its deferred error, if any.
void synchronize(int index);
// {free, total} bytes of the device, as the driver reports them.
std::pair<size_t, size_t> mem_get_info(int index);

// Makes `index` current for its lifetime (no driver call when it already is).
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

// --- streams and events ------------------------------------------------------
// A stream handle is a cudaStream_t; nullptr is the device's default (legacy) stream.
using StreamHandle = void*;
// The stream kernels on `device` (-1: current device) go to, for this thread.
StreamHandle current_stream(int device = -1);
void set_current_stream(int device, StreamHandle s);
// A stream from a per-device pool (streams live as long as the process, as the caching
// allocator keys blocks by stream).
StreamHandle new_stream(int device, int priority);
bool stream_query(StreamHandle s, int device);
void stream_synchronize(StreamHandle s, int device);

class Event {
 public:
  explicit Event(bool enable_timing = false, bool blocking = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(StreamHandle s, int device);
  // Makes `s` wait until the work recorded so far completes (no-op before the first record).
  void wait(StreamHandle s, int device);
  bool query() const;
  void synchronize() const;
  // Milliseconds between this event and `end`; both recorded with timing enabled.
  float elapsed_time(const Event& end) const;
  int device() const { return device_; }

 private:
  void* event_ = nullptr;  // cudaEvent_t, created on first record
  int device_ = -1;
  bool timing_, blocking_;
};

// --- deferred errors and synchronizing calls ----------------------------------
// Raises IndexError for the first bad index a kernel on `device` recorded since the last
// check, and clears the record (Note [Deferred index errors] in ops/index.cpp). kiln calls it
// after each wait for the device; it costs one read of host memory when there is nothing.
void check_device_errors(int device);
// kiln.cuda.set_sync_debug_mode (Note [Sync debug mode] in cuda/runtime.cpp): 0 lets calls
// that make the host wait for the GPU pass, 1 warns, 2 raises RuntimeError.
void set_sync_debug_mode(int mode);
int sync_debug_mode();

// --- caching device allocator (Note [CUDA caching allocator]) -----------------
struct MemoryStats {
  int64_t allocated = 0, max_allocated = 0;  // bytes in live tensors (rounded sizes)
  int64_t reserved = 0, max_reserved = 0;    // bytes obtained with cudaMalloc
  int64_t requested = 0;                     // bytes asked for by live tensors
  int64_t num_allocs = 0, num_frees = 0;     // allocator calls
  int64_t num_cuda_mallocs = 0, num_cuda_frees = 0;
  int64_t num_ooms = 0, num_alloc_retries = 0;
  int64_t active_blocks = 0, segments = 0;
};
MemoryStats memory_stats(int device);
void reset_peak_memory_stats(int device);
// Returns every unused cached segment to the driver (all devices).
void empty_cache();
// The memory of `t` is also used by work on `s`: it is reused only after that work ends.
void record_stream(const Tensor& t, StreamHandle s);

// --- pinned host memory --------------------------------------------------------
// A CPU copy of `t` in page-locked memory from the caching host allocator.
Tensor pin_memory(const Tensor& t);
bool is_pinned(const Tensor& t);

// Whether device->host copies may return before the data arrives (set around a
// non_blocking copy into pinned memory; see copy in cuda/copy.cpp).
class NonBlockingGuard {
 public:
  explicit NonBlockingGuard(bool non_blocking);
  ~NonBlockingGuard();

 private:
  bool previous_;
};
bool non_blocking_copies();

}  // namespace kiln::cuda
