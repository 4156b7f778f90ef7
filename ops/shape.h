// Shape manipulation that moves data: joining (cat, stack), splitting into
// views (split, chunk, unbind, tensor_split), reordering (flip, roll, rot90),
// repetition (repeat, tile) and triangles (tril, triu). All are differentiable.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// Joins along an existing dim; dtypes promote. 1-D tensors of shape [0] are
// skipped, as in PyTorch (legacy "empty" tensors).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins equally shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// cat along dim 1 (dim 0 for 1-D inputs) / dim 0 after promoting inputs to 2-D.
Tensor hstack(const std::vector<Tensor>& tensors);
Tensor vstack(const std::vector<Tensor>& tensors);
// cat along dim 2 after promoting inputs to 3-D ([n] -> [1, n, 1], [m, n] -> [m, n, 1]).
Tensor dstack(const std::vector<Tensor>& tensors);

// Views of `split_size` elements along dim (the last one may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Views with the given lengths, which must sum to the dim's size.
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes,
                                     int64_t dim = 0);
// At most `chunks` views of ceil(size / chunks) elements.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// The slices along dim, each without that dim.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
// `sections` views whose sizes differ by at most one (the first ones larger), as
// np.array_split; sections may exceed the dim's size (the tail views are empty).
std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim = 0);
// Views x[:i0], x[i0:i1], ..., x[ik:] along dim, indices read like Python slice bounds.
std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<int64_t>& indices,
                                 int64_t dim = 0);
// A 0-d int64 CPU tensor is a section count, a 1-D one a list of indices.
std::vector<Tensor> tensor_split(const Tensor& x, const Tensor& indices_or_sections,
                                 int64_t dim = 0);

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
// Rotates the (dims[0], dims[1]) plane by k quarter turns, from dims[0] towards dims[1].
Tensor rot90(const Tensor& x, int64_t k = 1, const std::vector<int64_t>& dims = {0, 1});
// Empty dims: rolls the flattened tensor (shifts must have one entry).
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts,
            const std::vector<int64_t>& dims = {});
// Tiles x `repeats[i]` times along dim i; repeats may have more dims than x.
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
// repeat with missing leading repeats taken as 1.
Tensor tile(const Tensor& x, const std::vector<int64_t>& dims);

// Repeats each element (of the flattened tensor when dim is absent) `repeats`
// times, in place along the dim: [a, b] -> [a, a, b, b].
Tensor repeat_interleave(const Tensor& x, int64_t repeats,
                         std::optional<int64_t> dim = std::nullopt);
// Per-element counts (1-D, the dim's length, or a single count).
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt);
// repeat_interleave(arange(n), repeats): index i repeated repeats[i] times.
Tensor repeat_interleave(const Tensor& repeats);

// Lower / upper triangle of the last two dims; `diagonal` shifts the boundary.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
const Tensor& tril_(const Tensor& self, int64_t diagonal = 0);
const Tensor& triu_(const Tensor& self, int64_t diagonal = 0);

}  // namespace kiln
