// Searching a sorted sequence and counting into bins: searchsorted, bucketize,
// bincount, histc. All are composed from kiln's elementwise, reduction and
// index_add ops, so they run on every device that has those kernels. Their
// integer (or count) results are not differentiable.
#pragma once

#include <optional>
#include <string>

#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// For each element of input, the index in sorted_sequence's last dim where it would be
// inserted to keep the order: the first position (right=false / side "left") or past the
// last equal entry. A 1-D sorted_sequence serves every element; an N-D one must match
// input's leading dims. sorter (int64, sorted_sequence's shape) gives the ascending order
// of an unsorted sequence; undefined means none. int64 result (int32 with out_int32).
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& input, bool out_int32 = false,
                    bool right = false, const std::optional<std::string>& side = std::nullopt,
                    const Tensor& sorter = Tensor());
// The bucket of each element of input among the 1-D boundaries: i with
// boundaries[i-1] < x <= boundaries[i] (right=false) or boundaries[i-1] <= x < boundaries[i].
Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool out_int32 = false,
                 bool right = false);
// The number of occurrences of each value 0..max(input) (at least minlength bins) of a 1-D
// non-negative integer tensor, or the sum of weights (undefined: none) per value. int64
// without weights; float32 for float32 weights, float64 for any other weights.
Tensor bincount(const Tensor& input, const Tensor& weights = Tensor(), int64_t minlength = 0);
// A histogram of input with `bins` equal bins over [min, max] (the data's range when
// min == max); elements outside the range (and NaNs) are ignored. input's dtype.
Tensor histc(const Tensor& input, int64_t bins = 100, Scalar min = 0, Scalar max = 0);

}  // namespace kiln
