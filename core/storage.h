// A refcounted buffer. Views share one Storage; from_numpy wraps foreign
// memory by passing a deleter that releases the owner.
#pragma once

#include <cstddef>
#include <memory>

#include "core/allocator.h"
#include "core/device.h"

namespace kiln {

struct StorageImpl {
  std::shared_ptr<void> data;
  size_t nbytes = 0;
  Device device;
  // CPU memory that is page-locked (Tensor.pin_memory()), so host<->GPU copies can be async.
  bool pinned = false;
  // Set when `data` (then non-owning) came from this allocator: the storage returns it there.
  Allocator* allocator = nullptr;

  StorageImpl() = default;
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;
  ~StorageImpl() {
    if (allocator) allocator->release(data.get());
  }
};

using Storage = std::shared_ptr<StorageImpl>;

Storage make_storage(size_t nbytes, Device device, const AllocationLabel& label = {});

}  // namespace kiln
