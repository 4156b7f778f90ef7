// Pooling and resampling (kiln.nn.functional *_pool*d, interpolate), built
// from index_select / gather over host-built window tables (Note [Window
// tables] in ops/pooling.cpp), so they run on every device with the index
// kernels and double backward comes for free. 1-d and 2-d max / average / adaptive
// average pooling use direct kernels where the device has them (Note [Direct pooling
// kernels] in ops/pool2d.h).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ops/conv.h"

namespace kiln {

// input [N, C, *S] or [C, *S] with 1 or 2 spatial dims (kernel_size.size()).
// An empty stride means stride = kernel_size. Returns (output, indices): the
// indices (int64) are flat positions in each input plane, PyTorch's convention.
std::pair<Tensor, Tensor> max_pool_nd(const Tensor& input, const Dims& kernel_size,
                                      const Dims& stride, const Dims& padding, const Dims& dilation,
                                      bool ceil_mode, const char* op);
Tensor avg_pool_nd(const Tensor& input, const Dims& kernel_size, const Dims& stride,
                   const Dims& padding, bool ceil_mode, bool count_include_pad,
                   std::optional<int64_t> divisor_override, const char* op);
// Output sizes may be -1 (PyTorch's None): that dim keeps the input's size.
Tensor adaptive_avg_pool_nd(const Tensor& input, const Dims& output_size, const char* op);
std::pair<Tensor, Tensor> adaptive_max_pool_nd(const Tensor& input, const Dims& output_size,
                                               const char* op);
// mode: "nearest" (3-D to 5-D input), "linear" (3-D), "bilinear" (4-D) or
// "trilinear" (5-D). Exactly one of
// size / scale_factor; scale factors are used for the coordinate mapping unless
// recompute_scale_factor, as PyTorch does.
Tensor interpolate(const Tensor& input, const std::optional<Dims>& size,
                   const std::optional<std::vector<double>>& scale_factor, const std::string& mode,
                   std::optional<bool> align_corners, bool recompute_scale_factor);

}  // namespace kiln
