// Tensor factories (deterministic ones; random ones are in ops/random.h).
#pragma once

#include <optional>

#include "core/flags.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// Factories given no dtype make the default dtype (core/flags.h), read per call.
// Sizes that are negative or overflow (Note [Checked shape arithmetic] in
// core/shape.h) raise RuntimeError naming `op`: the Python factory that called.
// full takes only a value that fits the dtype (core/scalar.h's scalar_fits).
Tensor empty(const Shape& shape, DType dtype = default_dtype(), Device device = {},
             const char* op = "empty");
Tensor zeros(const Shape& shape, DType dtype = default_dtype(), Device device = {},
             const char* op = "zeros");
Tensor ones(const Shape& shape, DType dtype = default_dtype(), Device device = {},
            const char* op = "ones");
Tensor full(const Shape& shape, Scalar value, DType dtype, Device device = {},
            const char* op = "full");
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);

// A 0-d tensor holding `value`, which must fit the dtype as in full.
Tensor scalar_tensor(Scalar value, DType dtype, Device device = {},
                     const char* op = "scalar_tensor");
// A Python number as a 0-d "wrapped number" tensor (see core/promotion.h).
Tensor wrapped_scalar(Scalar value);

// dtype defaults: int64 when all of start/end/step are integers, else the default dtype.
Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype = std::nullopt,
              Device device = {});
Tensor linspace(double start, double end, int64_t steps, DType dtype = default_dtype(),
                Device device = {});
// base ** linspace(start, end, steps), computed in float64 on the host; integer dtypes
// truncate start and end first, as PyTorch does.
Tensor logspace(double start, double end, int64_t steps, double base = 10.0,
                DType dtype = default_dtype(), Device device = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = default_dtype(),
           Device device = {});

// Fills in place with a value that fits self's dtype, as in full; bumps the version counter.
const Tensor& fill_(const Tensor& self, Scalar value);
const Tensor& zero_(const Tensor& self);

}  // namespace kiln
