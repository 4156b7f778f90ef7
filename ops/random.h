// Random number generation: the random factories and in-place samplers over the Generator of
// ops/generator.h. A null Generator* means the device's default one.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/flags.h"
#include "core/tensor.h"
#include "ops/generator.h"

namespace kiln {

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
