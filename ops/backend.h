// The per-device kernel table. An op's front end (ops/*.cpp) does checks,
// promotion, allocation and autograd, then calls backend(device).<family>.
// A null entry means the device lacks that family: the front end raises
// NotImplementedError naming op and device. What each backend covers is
// visible in one file: ops/cpu/backend_cpu.cpp, cuda/backend_cuda.cpp.
#pragma once

#include "core/error.h"
#include "core/scalar.h"
#include "core/tensor.h"
#include "ops/op_table.h"

namespace kiln {

enum class ReduceOp : int8_t { Sum, Prod, Max, Min, All, Any };

struct Backend {
  // out = op(in); in already broadcast to out's shape and in the compute dtype.
  void (*unary)(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p) = nullptr;
  // out = op(a, b); a and b broadcast to out's shape, both in the compute dtype.
  void (*binary)(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) = nullptr;
  // dst = src with dtype conversion; src broadcast to dst's shape; any strides.
  void (*copy)(const Tensor& dst, const Tensor& src) = nullptr;
  void (*fill)(const Tensor& dst, Scalar value) = nullptr;
  // out = cond ? a : b; all broadcast to out's shape; a, b, out share a dtype.
  void (*where)(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) = nullptr;
  // out[i] = reduce(in[i, :]); in is contiguous 2-D [outer, inner], out is [outer].
  void (*reduce)(ReduceOp op, const Tensor& out, const Tensor& in) = nullptr;
  // out[b] = a[b] @ bm[b] for 3-D tensors of one floating dtype; any strides.
  void (*bmm)(const Tensor& out, const Tensor& a, const Tensor& b) = nullptr;
  // out[i, :] = src[index[i], :]; out and src contiguous 2-D of one dtype, index
  // contiguous 1-D int64 with values already checked against src.size(0).
  void (*row_gather)(const Tensor& out, const Tensor& src, const Tensor& index) = nullptr;
  // out[index[i], :] += src[i, :]; out, src contiguous 2-D of one floating dtype.
  void (*row_scatter_add)(const Tensor& out, const Tensor& src, const Tensor& index) = nullptr;
};

// The CUDA backend installs its table here when the library loads.
void register_cuda_backend(Backend* b);

// Throws RuntimeError when kiln was built without the device's backend.
const Backend& backend(Device device);

// `fn` if the device has that kernel family, else NotImplementedError naming op and device.
template <typename Fn>
Fn require_kernel(Fn fn, const char* op, Device device) {
  if (!fn) fail(ErrorKind::NotImplemented, "[", op, "] is not implemented on device ", device);
  return fn;
}

}  // namespace kiln
