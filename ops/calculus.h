// Finite differences and numerical integration: diff, gradient, trapezoid,
// cumulative_trapezoid. Composed from slicing and elementwise ops, so they run on
// every device and are differentiable through their parts.
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// The n-th forward difference along dim, after joining prepend / append (undefined: none)
// to input along dim; bool inputs use xor, as PyTorch does.
Tensor diff(const Tensor& x, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = Tensor(),
            const Tensor& append = Tensor());

// Per dim of gradient(): a uniform step or 1-D coordinates along that dim.
using GradientSpacing = std::variant<Scalar, Tensor>;
// Central differences inside, one-sided (edge_order 1 or 2) at the ends, for each dim in
// `dims` (all when empty). spacing has one entry (shared) or one per dim.
std::vector<Tensor> gradient(const Tensor& x, const std::vector<GradientSpacing>& spacing,
                             const std::vector<int64_t>& dims = {}, int64_t edge_order = 1);

// The trapezoid rule along dim with sample points x (1-D, or y's shape) or a constant dx.
Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim = -1);
Tensor trapezoid(const Tensor& y, Scalar dx = 1, int64_t dim = -1);
// The running integral along dim (one element shorter than y there).
Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, int64_t dim = -1);
Tensor cumulative_trapezoid(const Tensor& y, Scalar dx = 1, int64_t dim = -1);

}  // namespace kiln
