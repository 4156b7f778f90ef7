// Shape helpers composed from views, cat and indexing: atleast_Nd, column_stack,
// hsplit/vsplit/dsplit, ravel, argwhere, block_diag, diag_embed, diagflat, the
// triangle index lists, combinations, vander, take_along_dim and empty_strided.
// They run on every device through existing kernels; autograd comes from the parts.
#pragma once

#include <optional>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln {

// x itself when it already has at least N dims, else a view with size-1 dims added
// ([n] -> [1, n] for 2-D; [n] -> [1, n, 1] and [m, n] -> [m, n, 1] for 3-D).
Tensor atleast_1d(const Tensor& x);
Tensor atleast_2d(const Tensor& x);
Tensor atleast_3d(const Tensor& x);
// hstack after turning 0-d and 1-D inputs into columns.
Tensor column_stack(const std::vector<Tensor>& tensors);
// tensor_split along dim 1 (dim 0 for 1-D) / dim 0 / dim 2; an int must divide the dim exactly.
std::vector<Tensor> hsplit(const Tensor& x, int64_t sections);
std::vector<Tensor> hsplit(const Tensor& x, const std::vector<int64_t>& indices);
std::vector<Tensor> vsplit(const Tensor& x, int64_t sections);
std::vector<Tensor> vsplit(const Tensor& x, const std::vector<int64_t>& indices);
std::vector<Tensor> dsplit(const Tensor& x, int64_t sections);
std::vector<Tensor> dsplit(const Tensor& x, const std::vector<int64_t>& indices);
// A 1-D view when x is contiguous, else a 1-D copy.
Tensor ravel(const Tensor& x);
// nonzero under NumPy's name: [n, ndim] int64 coordinates.
Tensor argwhere(const Tensor& x);
// Inputs (0-d, 1-D as one row, or 2-D) on the diagonal of a zero matrix; dtypes promote.
Tensor block_diag(const std::vector<Tensor>& tensors);
// x's last dim on the `offset` diagonal of the (dim1, dim2) planes of a new tensor.
Tensor diag_embed(const Tensor& x, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
// The flattened x on the `offset` diagonal of a square matrix.
Tensor diagflat(const Tensor& x, int64_t offset = 0);
// [2, n] coordinates of the lower (upper) triangle of a row x col matrix, row-major.
Tensor tril_indices(int64_t row, int64_t col, int64_t offset = 0, DType dtype = DType::Int64,
                    Device device = {});
Tensor triu_indices(int64_t row, int64_t col, int64_t offset = 0, DType dtype = DType::Int64,
                    Device device = {});
// [count, r] rows of r-element combinations of a 1-D x, in itertools order; [0] for r == 0.
Tensor combinations(const Tensor& x, int64_t r = 2, bool with_replacement = false);
// Columns x^(N-1) .. x^0 (x^0 .. x^(N-1) when increasing); integers compute in int64.
Tensor vander(const Tensor& x, std::optional<int64_t> N = std::nullopt, bool increasing = false);
// gather after broadcasting x and indices except along dim; no dim: over the flattened x.
Tensor take_along_dim(const Tensor& x, const Tensor& indices,
                      std::optional<int64_t> dim = std::nullopt);
// An uninitialized tensor with the given strides (its storage just covers them).
Tensor empty_strided(const Shape& size, const Shape& stride, DType dtype, Device device = {});

}  // namespace kiln
