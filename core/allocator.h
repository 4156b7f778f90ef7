// Allocators hand out device memory that the owning storage hands back through
// release() (a raw pair rather than a shared_ptr with a deleter: that would be
// one more heap allocation per tensor). The CPU allocator is plain aligned
// malloc; the CUDA caching allocator registers itself for DeviceType::CUDA.
#pragma once

#include <cstddef>

#include "core/device.h"
#include "core/dtype.h"

namespace kiln {

// What an allocation holds, kept by the CUDA allocator so an out-of-memory
// error can name the largest live tensors by shape and dtype. Fixed-size, so
// carrying it costs nothing measurable per allocation.
struct AllocationLabel {
  static constexpr int kMaxDims = 8;
  int ndim = -1;  // -1: not a tensor (raw storage), or more than kMaxDims dims
  int64_t sizes[kMaxDims] = {};
  DType dtype = DType::UInt8;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device, const AllocationLabel& label) = 0;
  // Takes back memory from allocate(). Runs from storage destructors: must not throw.
  virtual void release(void* ptr) noexcept = 0;
};

Allocator* cpu_allocator();
// The allocator for a device type; throws RuntimeError when that backend is not built.
Allocator* allocator_for(Device device);
void register_allocator(DeviceType type, Allocator* allocator);

}  // namespace kiln
