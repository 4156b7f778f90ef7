#include "ops/reduce.h"

#include <numeric>

#include "autograd/function.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/view.h"

namespace kiln {

namespace {
using Grads = std::vector<Tensor>;
}

std::vector<int64_t> reduction_dims(const DimList& dims, int64_t ndim, const char* name) {
  if (!dims || dims->empty()) {
    std::vector<int64_t> all(ndim);
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  if (ndim == 0) {
    for (int64_t d : *dims) wrap_dim(d, 0, name);
    return {};
  }
  return wrap_dims(*dims, ndim, name);
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
    bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced) out.push_back(in[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor unsqueeze_reduced(const Tensor& t, const Shape& in_shape, const std::vector<int64_t>& dims,
                         bool keepdim) {
  if (keepdim || in_shape.empty()) return t;
  return reshape(t, reduced_shape(in_shape, dims, true));
}

Tensor reduce_compute(ReduceOp op, const Tensor& x, const DimList& dims_opt, bool keepdim,
                      DType out_dtype, const char* name) {
  std::vector<int64_t> dims = reduction_dims(dims_opt, x.dim(), name);
  Shape out_shape = reduced_shape(x.sizes(), dims, keepdim);
  // Kept dims first, reduced dims last, so each output is one contiguous row.
  std::vector<int64_t> order;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) {
      order.push_back(i);
      outer *= x.sizes()[i];
    }
  }
  for (int64_t d : dims) {
    order.push_back(d);
    inner *= x.sizes()[d];
  }
  if (inner == 0 && outer > 0) {
    KILN_CHECK(op == ReduceOp::Sum || op == ReduceOp::Prod || op == ReduceOp::All ||
                   op == ReduceOp::Any,
               Index, "[", name, "] Expected reduction dim to be specified for input.numel() == 0"
               " (cannot reduce a tensor of shape ", x.sizes(),
               " with no elements: the operation has no identity)");
  }
  GradModeGuard no_grad(false);
  Tensor in = contiguous(to_dtype(permute(x, order), out_dtype));
  Tensor rows = reshape(in, {outer, inner});
  Tensor out = make_tensor({outer}, out_dtype, x.device());
  require_kernel(backend(x.device()).reduce, name, x.device())(op, out, rows);
  return reshape(out, out_shape);
}

Tensor sum(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  DType dt = dtype ? *dtype : (is_floating(x.dtype()) ? x.dtype() : DType::Int64);
  Tensor out = reduce_compute(ReduceOp::Sum, x, dims, keepdim, dt, "sum");
  if (is_floating(dt) && needs_grad({x})) {
    std::vector<int64_t> wrapped = reduction_dims(dims, x.dim(), "sum");
    Shape in_shape = x.sizes();
    record("sum", {x}, {out}, [wrapped, in_shape, keepdim](const Grads& g, Node&) -> Grads {
      return {expand(unsqueeze_reduced(g[0], in_shape, wrapped, keepdim), in_shape)};
    });
  }
  return out;
}

Tensor mean(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  DType dt = dtype ? *dtype : x.dtype();
  KILN_CHECK(is_floating(dt), Runtime,
             "[mean] mean(): could not infer output dtype. Input dtype must be either a floating "
             "point or complex dtype. Got: ", dt);
  std::vector<int64_t> wrapped = reduction_dims(dims, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t d : wrapped) count *= x.sizes()[d];
  return div(sum(x, dims, keepdim, dt), Scalar(static_cast<double>(count)));
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.sizes() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  KILN_CHECK(lead >= 0, Runtime, "[sum_to] cannot sum shape ", x.sizes(), " to ", shape);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else {
      int64_t want = shape[i - lead];
      KILN_CHECK(want == x.sizes()[i] || want == 1, Runtime, "[sum_to] cannot sum shape ",
                 x.sizes(), " to ", shape);
      if (want == 1 && x.sizes()[i] != 1) dims.push_back(i);
    }
  }
  Tensor r = dims.empty() ? x : sum(x, dims, true);
  return lead > 0 || r.sizes() != shape ? reshape(r, shape) : r;
}

}  // namespace kiln
