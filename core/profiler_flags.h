// The profiler's on/off word, apart from core/profiler.h so that core/storage.h can test it
// without pulling in Tensor (Note [Profiler events] in core/profiler.cpp).
#pragma once

#include <atomic>
#include <cstdint>

namespace kiln::profiler {

// What a session records; bits of the word that enabled() reads.
enum Flag : uint32_t {
  kOn = 1,
  kShapes = 2,  // record_shapes: the sizes of each op's tensor arguments
  kCuda = 4,    // device activity through CUPTI
  kMemory = 8,  // profile_memory: allocations and frees of tensor storage
};

namespace detail {
extern std::atomic<uint32_t> g_flags;
}

inline bool enabled() { return detail::g_flags.load(std::memory_order_relaxed) != 0; }
inline bool recording_shapes() {
  return (detail::g_flags.load(std::memory_order_relaxed) & kShapes) != 0;
}
inline bool recording_memory() {
  return (detail::g_flags.load(std::memory_order_relaxed) & kMemory) != 0;
}

// profile_memory: an allocation (bytes > 0) or free (bytes < 0) on `device` (-1: the CPU),
// an instant event inside the thread's innermost open range.
void record_memory(int64_t bytes, int device);

}  // namespace kiln::profiler
