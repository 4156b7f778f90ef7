// Sorting and selection: sort, argsort, topk, kthvalue, median, unique.
// Orders are stable and put NaN above every number, as PyTorch does.
#pragma once

#include <optional>
#include <tuple>

#include "core/tensor.h"

namespace kiln {

// (values, indices); indices are int64. Differentiable in values.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// The k largest (smallest) entries along dim, in sorted order.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
// The k-th smallest entry (1-based) along dim.
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1,
                                    bool keepdim = false);
// Lower median of all elements; NaN when any element is NaN or x is empty.
Tensor median(const Tensor& x);
// Lower median along dim with its index; rows containing NaN give NaN.
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
// Distinct values of the flattened input in ascending order, the index of each
// input element's value among them (input's shape) and each value's count.
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted = true,
                                          std::optional<int64_t> dim = std::nullopt);

}  // namespace kiln
