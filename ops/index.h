// Indexing ops: advanced indexing (x[idx]), index_put, gather/scatter,
// index_select/index_add/index_fill/index_copy, masked_fill/masked_select, nonzero, take/put.
// Integer index tensors are int64 (int32 is accepted where PyTorch accepts it);
// all differentiable ops record backward rules written with these same ops.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// self[indices[0], indices[1], ...] with NumPy/PyTorch advanced-indexing rules:
// undefined entries are full slices; integer tensors may be negative; bool/uint8
// masks cover as many dims as they have. The broadcast index dims replace the
// indexed dims when those are adjacent, else they go first.
Tensor index(const Tensor& self, const std::vector<Tensor>& indices);
// A copy of self with self[indices] = values (accumulate: +=, duplicates add up).
Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);
const Tensor& index_put_(const Tensor& self, const std::vector<Tensor>& indices,
                         const Tensor& values, bool accumulate = false);

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
// reduce: "add" or "multiply" (PyTorch's scatter(..., reduce=)).
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
               const std::optional<std::string>& reduce = std::nullopt);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, Scalar value,
               const std::optional<std::string>& reduce = std::nullopt);
const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                       const std::optional<std::string>& reduce = std::nullopt);
const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, Scalar value,
                       const std::optional<std::string>& reduce = std::nullopt);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
const Tensor& scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
// self with source's slices added at `index` along dim, times alpha.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha = 1);
const Tensor& index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                         Scalar alpha = 1);

// self with the slices at `index` (int64, negatives count from the end) along dim set to
// value (a number or a 0-d tensor, differentiable).
Tensor index_fill(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value);
Tensor index_fill(const Tensor& self, int64_t dim, const Tensor& index, Scalar value);
const Tensor& index_fill_(const Tensor& self, int64_t dim, const Tensor& index,
                          const Tensor& value);
const Tensor& index_fill_(const Tensor& self, int64_t dim, const Tensor& index, Scalar value);
// self with its slices at `index` (int64, in [0, size)) along dim replaced by source's, in order.
Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
const Tensor& index_copy_(const Tensor& self, int64_t dim, const Tensor& index,
                          const Tensor& source);

// value: a number or a 0-d tensor; mask (bool) broadcasts with self.
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value);
Tensor masked_fill(const Tensor& self, const Tensor& mask, Scalar value);
const Tensor& masked_fill_(const Tensor& self, const Tensor& mask, const Tensor& value);
const Tensor& masked_fill_(const Tensor& self, const Tensor& mask, Scalar value);
// The elements of self (broadcast with mask) where mask is true, as a 1-D tensor.
Tensor masked_select(const Tensor& self, const Tensor& mask);

// [n, ndim] int64 coordinates of the nonzero elements.
Tensor nonzero(const Tensor& self);
std::vector<Tensor> nonzero_tuple(const Tensor& self);

// self as a flat (row-major) tensor indexed by `index`; negative indices count from the end.
Tensor take(const Tensor& self, const Tensor& index);
Tensor put(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate = false);
const Tensor& put_(const Tensor& self, const Tensor& index, const Tensor& source,
                   bool accumulate = false);

}  // namespace kiln
