// Allocators hand out device memory wrapped in a shared_ptr whose deleter
// returns it. The CPU allocator is plain aligned malloc; the CUDA caching
// allocator registers itself for DeviceType::CUDA.
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace kiln {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::shared_ptr<void> allocate(size_t nbytes, Device device) = 0;
};

Allocator* cpu_allocator();
// The allocator for a device type; throws RuntimeError when that backend is not built.
Allocator* allocator_for(Device device);
void register_allocator(DeviceType type, Allocator* allocator);

}  // namespace kiln
