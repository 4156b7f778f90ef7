// Views: ops whose result shares storage with the input (sizes, strides and
// offset change; no data moves). All are differentiable.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace kiln {

Tensor view(const Tensor& t, const Shape& shape);
// t's bytes read as `dtype` (Tensor.view(dtype)): same shape for equal element sizes, the
// last dim scaled by the size ratio otherwise (PyTorch's rules). Not differentiable.
Tensor view_dtype(const Tensor& t, DType dtype);
// A view when the strides allow it, else a copy.
Tensor reshape(const Tensor& t, const Shape& shape);
Tensor expand(const Tensor& t, const Shape& shape);
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
// 2-D transpose; 0-d and 1-d tensors are returned as is.
Tensor t(const Tensor& t);
// Transpose of the last two dims (batched matrices).
Tensor mT(const Tensor& t);
Tensor squeeze(const Tensor& t, std::optional<std::vector<int64_t>> dims = std::nullopt);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
// Python slicing along one dim; start/end are clamped like Python's.
Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step = 1);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& t, int64_t dim, const Shape& sizes);
Tensor movedim(const Tensor& t, int64_t source, int64_t destination);
// Moves each source[i] to destination[i]; the other dims keep their order.
Tensor movedim(const Tensor& t, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination);
// The diagonal of the (dim1, dim2) planes as a view, appended as the last dim;
// offset > 0 is above the main diagonal.
Tensor diagonal(const Tensor& t, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor unfold(const Tensor& t, int64_t dim, int64_t size, int64_t step);
// Raw strided view; backward scatters into the base geometry.
Tensor as_strided(const Tensor& t, const Shape& sizes, const Shape& strides,
                  std::optional<int64_t> storage_offset = std::nullopt);

}  // namespace kiln
