// Convolutions and their layout helpers (kiln.nn.functional conv*, unfold,
// fold, pad, pixel_shuffle). Built from views, index ops and matmul (Note
// [Convolution as GEMM] in ops/conv.cpp), so every device with those kernel
// families runs them and double backward comes for free; CUDA convolutions
// take cuDNN instead where kiln has it (Note [Accelerated convolution]).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// Per-spatial-dim arguments (stride, padding, ...) already expanded to one
// entry per spatial dim by the caller; stride.size() is the number of spatial dims.
using Dims = std::vector<int64_t>;

// input [N, C_in, *S] or unbatched [C_in, *S], weight [C_out, C_in / groups, *K].
// `op` names the op in errors ("conv1d", "conv2d").
Tensor conv_nd(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
               const Dims& stride, const Dims& padding, const Dims& dilation, int64_t groups,
               const char* op);
// padding="same" (stride 1 only; an odd total padding puts the extra element
// at the end) or "valid" (no padding).
Tensor conv_nd(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
               const Dims& stride, const std::string& padding, const Dims& dilation, int64_t groups,
               const char* op);
// weight [C_in, C_out / groups, *K]; the adjoint of conv_nd with the same arguments.
Tensor conv_transpose_nd(const Tensor& input, const Tensor& weight,
                         const std::optional<Tensor>& bias, const Dims& stride, const Dims& padding,
                         const Dims& output_padding, int64_t groups, const Dims& dilation,
                         const char* op);

// F.unfold: [N, C, H, W] (or [C, H, W]) -> [N, C * kH * kW, L] sliding blocks.
Tensor im2col(const Tensor& input, const Dims& kernel_size, const Dims& dilation,
              const Dims& padding, const Dims& stride);
// F.fold: sums the blocks of [N, C * kH * kW, L] back into [N, C, *output_size].
Tensor col2im(const Tensor& input, const Dims& output_size, const Dims& kernel_size,
              const Dims& dilation, const Dims& padding, const Dims& stride);

// F.pad: `pad` lists (before, after) pairs starting from the last dim. mode is
// "constant" (negative pads crop), "reflect", "replicate" or "circular".
Tensor pad(const Tensor& input, const Dims& pad, const std::string& mode = "constant",
           std::optional<double> value = std::nullopt);

// [*, C * r^2, H, W] <-> [*, C, H * r, W * r].
Tensor pixel_shuffle(const Tensor& input, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& input, int64_t downscale_factor);

// A contiguous CPU table (the index and weight tables of these ops) on
// `device`. Tables for other devices are cached by content, so a repeated call
// (every training step) costs no host-to-device copy; callers never write to them.
Tensor device_table(const Tensor& host, Device device);
// Host-built int64 index tensor on `device`, through device_table.
Tensor index_table(const std::vector<int64_t>& values, const Shape& shape, Device device);

}  // namespace kiln
