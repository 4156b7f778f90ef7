// Reductions over one, several or all dims.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "ops/backend.h"

namespace kiln {

using DimList = std::optional<std::vector<int64_t>>;  // nullopt: all dims

// Kernel call without autograd: reduces `dims` of x in the dtype `out_dtype`.
Tensor reduce_compute(ReduceOp op, const Tensor& x, const DimList& dims, bool keepdim,
                      DType out_dtype, const char* name);
// The shape of a reduction's result (keepdim keeps size-1 dims).
Shape reduced_shape(const Shape& in, const std::vector<int64_t>& wrapped_dims, bool keepdim);
// Wraps dims; nullopt or an empty list means all dims (PyTorch's sum(dim=[])).
std::vector<int64_t> reduction_dims(const DimList& dims, int64_t ndim, const char* name);
// Reinserts reduced dims as size 1 so a keepdim=False result broadcasts against the input.
Tensor unsqueeze_reduced(const Tensor& t, const Shape& in_shape, const std::vector<int64_t>& dims,
                         bool keepdim);

// Integer and bool inputs sum in int64, as in PyTorch.
Tensor sum(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
// Sums a broadcast gradient down to `shape` (the inverse of expand).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace kiln
