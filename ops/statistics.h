// Statistics composed from sorting, reductions and matmul: cov, corrcoef, nanmedian,
// quantile / nanquantile and histogram. They run on every device through existing kernels;
// the floating results are differentiable through their parts (histogram's are not).
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// Covariance of the variables in input's rows (a 1-D input is one variable) over its
// columns, with integer frequency weights and floating observation weights (undefined: none).
Tensor cov(const Tensor& x, int64_t correction = 1, const Tensor& fweights = Tensor(),
           const Tensor& aweights = Tensor());
// Pearson correlation coefficients of input's rows, clipped to [-1, 1].
Tensor corrcoef(const Tensor& x);

// Lower median ignoring NaNs (NaN only when a slice is all NaN), of all elements or along
// dim with the int64 index of the chosen element.
Tensor nanmedian(const Tensor& x);
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim = false);

// The q-th quantiles (q a 0-d or 1-D tensor in [0, 1], input's dtype) of all elements or
// along dim; a 1-D q adds a leading dim. interpolation: linear, lower, higher, midpoint,
// nearest. quantile gives NaN for slices containing NaN, nanquantile skips them.
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                bool keepdim = false, const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                   bool keepdim = false, const std::string& interpolation = "linear");

// (hist, bin_edges) of the flattened input: `bins` equal bins over range (the data's
// [min, max] when absent, [0, 1] for empty data, widened by 0.5 each way when min == max),
// or the given 1-D increasing edges. The last bin includes its right edge; weight (input's
// shape) sums instead of counting; density divides by the total times the bin widths.
std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins,
                                    std::optional<std::pair<double, double>> range = std::nullopt,
                                    const Tensor& weight = Tensor(), bool density = false);
std::pair<Tensor, Tensor> histogram(const Tensor& x, const Tensor& bins,
                                    const Tensor& weight = Tensor(), bool density = false);

}  // namespace kiln
