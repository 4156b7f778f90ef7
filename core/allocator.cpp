#include "core/allocator.h"

#include <cstdlib>

#include "core/error.h"

namespace kiln {

namespace {

// 64-byte alignment keeps Eigen's vectorized paths and AVX-512 loads aligned.
constexpr size_t kCpuAlignment = 64;

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device, const AllocationLabel&) override {
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    if (rounded == 0) rounded = kCpuAlignment;
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    KILN_CHECK(p != nullptr, OutOfMemory, "[cpu allocator] failed to allocate ", nbytes, " bytes");
    return p;
  }
  void release(void* ptr) noexcept override { std::free(ptr); }
};

Allocator* g_allocators[2] = {nullptr, nullptr};

}  // namespace

Allocator* cpu_allocator() {
  static CpuAllocator instance;
  return &instance;
}

void register_allocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<int>(type)] = allocator;
}

Allocator* allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  Allocator* a = g_allocators[static_cast<int>(device.type)];
  KILN_CHECK(a != nullptr, Runtime, "[allocator] no allocator for device ", device,
             ": kiln was built without this backend or it has no devices");
  return a;
}

}  // namespace kiln
