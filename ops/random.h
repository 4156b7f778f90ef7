// Random number generation: the Generator (a seed and a Philox counter
// offset, see Note [Random streams] in ops/philox.h) and the random factories
// and in-place samplers. A null Generator* means the device's default one.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/flags.h"
#include "core/tensor.h"
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

Tensor rand(const Shape& shape, DType dtype = default_dtype(), Device device = {},
            Generator* gen = nullptr);
Tensor randn(const Shape& shape, DType dtype = default_dtype(), Device device = {},
             Generator* gen = nullptr);
// Integers uniform in [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::Int64,
               Device device = {}, Generator* gen = nullptr);
Tensor randperm(int64_t n, DType dtype = DType::Int64, Device device = {},
                Generator* gen = nullptr);
Tensor normal(double mean, double std, const Shape& shape, DType dtype = default_dtype(),
              Device device = {}, Generator* gen = nullptr);
// Elementwise normal(mean[i], std[i]) over the broadcast of mean and std; not
// differentiable (as in PyTorch, no reparameterization gradient).
Tensor normal(const Tensor& mean, const Tensor& std, Generator* gen = nullptr);
// out[i] = 1 with probability probs[i].
Tensor bernoulli(const Tensor& probs, Generator* gen = nullptr);
Tensor bernoulli(const Tensor& input, double p, Generator* gen = nullptr);
// Indices of categories sampled from each row of the (1-D or 2-D) weights.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator* gen = nullptr);

// In-place samplers; bump the version counter.
const Tensor& uniform_(const Tensor& self, double from = 0, double to = 1,
                       Generator* gen = nullptr);
const Tensor& normal_(const Tensor& self, double mean = 0, double std = 1,
                      Generator* gen = nullptr);
const Tensor& bernoulli_(const Tensor& self, double p = 0.5, Generator* gen = nullptr);
const Tensor& bernoulli_(const Tensor& self, const Tensor& p, Generator* gen = nullptr);
const Tensor& exponential_(const Tensor& self, double lambd = 1, Generator* gen = nullptr);
// Integers in [from, to); without `to`, [from, 2^digits] for floating dtypes
// (digits of the significand) and [from, max] for integer dtypes.
const Tensor& random_(const Tensor& self, int64_t from = 0,
                      std::optional<int64_t> to = std::nullopt, Generator* gen = nullptr);

// The generator to use for a tensor on `device`: `gen` (checked to match) or the default.
Generator& resolve_generator(Generator* gen, Device device, const char* op);

}  // namespace kiln
