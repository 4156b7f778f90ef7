// The random Generator: a seed and a Philox counter offset (Note [Random streams] in
// ops/philox.h), and the process-wide default generator of each device. Part of the kernel
// contract (Note [Layers] in scripts/check_layers.py): CUDA graph capture (cuda/graph.cpp)
// drives generators without reaching the random front ends of ops/random.h.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/device.h"
#include "ops/philox.h"

namespace kiln {

class Generator {
 public:
  // PyTorch's default seed, so a fresh process starts from a known stream.
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;

  explicit Generator(Device device = {}, uint64_t seed = kDefaultSeed);

  Device device() const { return device_; }
  // Restarts the stream at `seed`.
  void manual_seed(uint64_t seed);
  // Seeds from a nondeterministic source and returns the seed used.
  uint64_t seed();
  uint64_t initial_seed() const;
  // Reserves n consecutive counters and returns where they start.
  PhiloxState reserve(uint64_t n);
  // The serialized state: 16 bytes (seed, offset) in little-endian order.
  std::vector<uint8_t> get_state() const;
  void set_state(const std::vector<uint8_t>& state);

  // CUDA graph capture (Note [CUDA graphs] in cuda/graph.cpp). Between begin_capture and
  // end_capture, reserve() hands out counters relative to `base` (device memory {seed, offset}
  // that the graph writes before each replay), from `offset` on, and leaves the host offset
  // alone; end_capture
  // returns how many counters one replay uses. replay_state returns the {seed, offset} a replay
  // starts from and advances the host offset past it, as eager code would.
  void begin_capture(const uint64_t* base, uint64_t offset = 0);
  uint64_t end_capture();
  PhiloxState replay_state(uint64_t increment);
  bool capturing() const;

 private:
  mutable std::mutex mutex_;
  Device device_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  const uint64_t* capture_base_ = nullptr;
  uint64_t capture_offset_ = 0;
};

using GeneratorPtr = std::shared_ptr<Generator>;

// The process-wide generator of `device` (CPU by default).
const GeneratorPtr& default_generator(Device device = {});
// Seeds the default generators of every device.
void manual_seed(uint64_t seed);

}  // namespace kiln
