// What the CUDA runtime's files share for CUDA graph capture (Note [CUDA graphs] in
// cuda/graph.cpp): the caching allocator's graph pools and library workspaces, and the kernels
// that hand random states to a replay. Not part of the runtime's interface.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "cuda/graph.h"
#include "ops/philox.h"

namespace kiln::cuda {

// Between these two calls, allocations on `device` by work in capture `capture_id` come from
// pool `id` (made on first use), which gains a user.
void begin_allocate_to_pool(int device, MempoolId id, unsigned long long capture_id);
void end_allocate_to_pool(int device, unsigned long long capture_id);
// Drops a user of pool `id`; once it has none, its free segments go back to the driver at the
// next empty_cache (or out-of-memory retry).
void release_pool(int device, MempoolId id);

// A scratch buffer for libraries (cuBLAS, cuBLASLt) on `device`'s current stream, made from
// the caching allocator on first use and kept, so work captured into a CUDA graph never makes
// one: a capture without one raises RuntimeError naming `op`. Returns {pointer, bytes}.
std::pair<void*, size_t> stream_workspace(int device, const char* op);

// Writes {seed, offset} to `base` (device memory) on `stream`: the Philox state a replayed
// graph's random kernels start from.
void launch_set_philox_base(uint64_t* base, uint64_t seed, uint64_t offset, cudaStream_t stream);
// Writes the absolute seed and offset of `s` (relative inside a capture, ops/philox_capture.h)
// to device memory, for libraries that read them from there (cuDNN's dropout).
void launch_resolve_philox(const PhiloxState& s, uint64_t* seed, uint64_t* offset,
                           cudaStream_t stream);

}  // namespace kiln::cuda
