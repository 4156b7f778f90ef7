// Shape arithmetic shared by all ops: dim wrapping, broadcasting, view sizes.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

using Shape = std::vector<int64_t>;

// Wraps a possibly negative dim into [0, ndim); IndexError naming `op` otherwise.
// A 0-d tensor accepts dims -1 and 0, as in PyTorch.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Wraps a list of dims and rejects repeats. Sorted ascending.
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op);
// NumPy broadcasting; RuntimeError naming `op` and both shapes otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Resolves one -1 in a view/reshape shape for `numel` elements.
Shape infer_size(const Shape& shape, int64_t numel, const char* op);
// Strides for viewing (sizes, strides) as `shape` without a copy, or empty if impossible.
bool compute_view_strides(const Shape& sizes, const Shape& strides, const Shape& shape,
                          Shape* out);

}  // namespace kiln
