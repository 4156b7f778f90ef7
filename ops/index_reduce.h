// Reducing scatters: scatter_reduce, index_reduce and masked_scatter, composed from the
// gather / scatter / index_put ops of ops/index.h, sort and reductions, so they run on
// every device those kernels cover.
#pragma once

#include <string>

#include "core/tensor.h"

namespace kiln {

// self with src's leading index-shaped block reduced into the positions `index` names along
// dim: reduce is sum, prod, mean, amax or amin; include_self=false leaves self's value out of
// the positions that receive at least one element. Integer means round down.
Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);
const Tensor& scatter_reduce_(const Tensor& self, int64_t dim, const Tensor& index,
                              const Tensor& src, const std::string& reduce,
                              bool include_self = true);
// scatter_reduce of source's slices along dim into self's slices at the 1-D `index`;
// reduce is prod, mean, amax or amin.
Tensor index_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                    const std::string& reduce, bool include_self = true);
const Tensor& index_reduce_(const Tensor& self, int64_t dim, const Tensor& index,
                            const Tensor& source, const std::string& reduce,
                            bool include_self = true);
// self (broadcast with the bool mask) with source's first elements, in row-major order,
// written where mask is true.
Tensor masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source);
const Tensor& masked_scatter_(const Tensor& self, const Tensor& mask, const Tensor& source);

}  // namespace kiln
