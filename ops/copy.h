// Copies, dtype/device conversion, clone, contiguous and detach.
#pragma once

#include "core/tensor.h"

namespace kiln {

// dst <- src (broadcast to dst's shape, converted to dst's dtype). Differentiable
// with respect to src: dst takes over the history, as in PyTorch.
const Tensor& copy_(const Tensor& dst, const Tensor& src);
// Same as `t` when it already has the dtype (unless copy), else a converted copy.
Tensor to_dtype(const Tensor& t, DType dtype, bool copy = false);
// Same as `t` when it is already there (unless copy), else a copy on `device`.
Tensor to_device(const Tensor& t, Device device, bool non_blocking = false, bool copy = false);
Tensor contiguous(const Tensor& t);
Tensor clone(const Tensor& t);
// Shares storage and version counter, no autograd history.
Tensor detach(const Tensor& t);

}  // namespace kiln
