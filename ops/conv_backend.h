// Optional accelerated convolutions (cuDNN on CUDA, oneDNN on the CPU). A device library that has
// one registers it here; ops/conv.cpp uses it when present and enabled, and
// otherwise runs the composition of Note [Convolution as GEMM]. Kept out of
// struct Backend on purpose: a CUDA build without cuDNN is still a complete
// backend (missing_kernel_families stays empty).
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace kiln {

// One convolution's geometry: per-spatial-dim stride, symmetric padding and
// dilation, the group count, and the memory layout all operands and results use.
struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  // NHWC-dense (NDHWC for 3-d) operands and results instead of contiguous NCHW.
  bool channels_last = false;
};

// The output sizes [N, O, *out] of conv(x [N, C, *S], w [O, C / groups, *K]) under `g`, by
// PyTorch's formula; the front end and the library size their tensors from this one rule.
inline Shape conv_output_sizes(const Shape& x, const Shape& w, const ConvGeometry& g) {
  Shape y = {x[0], w[0]};
  for (size_t i = 0; i < g.stride.size(); ++i)
    y.push_back((x[2 + i] + 2 * g.padding[i] - g.dilation[i] * (w[2 + i] - 1) - 1) / g.stride[i] +
                1);
  return y;
}

// Every entry takes batched [N, C, *S] operands of one floating dtype on one device and writes
// a result the caller allocated, all dense in the geometry's layout (contiguous NCHW, or NHWC /
// NDHWC when channels_last) and starting on a 16-byte boundary: ops/conv.cpp lays them out, so
// the library only computes (Note [Layers]). An entry returns false, having written nothing
// useful, when the library has no algorithm for the problem (the caller then composes). Errors
// name `op`.
struct ConvBackend {
  // The library's version as one number (cuDNN: major * 10000 + minor * 100 +
  // patch), 0 when it cannot be loaded at run time (the other entries are then unusable).
  int64_t (*version)() = nullptr;
  // y = conv(x, w): x [N, C, *S], w [O, C / groups, *K], y [N, O, *out].
  bool (*forward)(const Tensor& y, const Tensor& x, const Tensor& w, const ConvGeometry& g,
                  const char* op) = nullptr;
  // grad_input (x's sizes) = the input gradient of conv (= conv_transpose of grad_output).
  bool (*backward_data)(const Tensor& grad_input, const Tensor& grad_output, const Tensor& w,
                        const ConvGeometry& g, const char* op) = nullptr;
  // grad_weight (w's sizes) = the weight gradient of conv(x, w).
  bool (*backward_filter)(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& x,
                          const ConvGeometry& g, const char* op) = nullptr;
};

// Called by a device library when it loads (cuda/backend_cuda.cpp, ops/cpu/conv_dnnl.cpp).
void register_conv_backend(DeviceType type, const ConvBackend* b);
// The backend registered for `type`, or nullptr (whether or not it is enabled).
const ConvBackend* conv_backend(DeviceType type);

// kiln.backends.mkldnn.enabled: whether CPU convolutions use the CPU's backend (default on).
// Kept here rather than in core/flags.h's BackendFlags, which most of kiln includes.
bool cpu_conv_enabled();
void set_cpu_conv_enabled(bool enabled);

}  // namespace kiln
