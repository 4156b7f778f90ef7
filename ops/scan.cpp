// Scans along one dim, with autograd: every op of KILN_SCAN_OPS (ops/scan_table.h) through one
// front end, whose table columns say the signature, the result dtype, the autocast policy and
// what the backward saves; each op adds only its backward case (scan_backward). The kernels are
// the shared scan functors (Note [Scan functors], ops/math/scan_functors.h).
#include <limits>
#include <utility>
#include <vector>

#include "autograd/function.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/dispatch.h"
#include "ops/index.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

Tensor constant(double v, const Tensor& like) {
  return scalar_tensor(Scalar(v), like.dtype(), like.device());
}

// The kernel scans the last dim of contiguous rows, so `dim` is moved last and back. Max/Min
// also return the running extreme's indices (else an undefined tensor).
std::pair<Tensor, Tensor> scan_compute(ScanOp op, const Tensor& x, int64_t dim, DType dt,
                                       const char* name) {
  GradModeGuard no_grad(false);
  Tensor moved = x.dim() == 0 ? reshape(x, {1}) : movedim(x, dim, x.dim() - 1);
  Tensor in = contiguous(to_dtype(moved, dt));
  const int64_t n = in.sizes().back();
  int64_t outer = 1;
  for (size_t i = 0; i + 1 < in.sizes().size(); ++i) outer *= in.sizes()[i];
  const bool indexed = op_signature(op) == ScanSignature::Indexed;
  Tensor out = make_tensor(in.sizes(), dt, x.device());
  Tensor indices = indexed ? make_tensor(in.sizes(), DType::Int64, x.device()) : Tensor();
  if (out.numel() > 0)
    require_kernel(backend(x.device()).scan, name, x.device())(
        op, reshape(out, {outer, n}), indexed ? reshape(indices, {outer, n}) : Tensor(),
        reshape(in, {outer, n}));
  auto back = [&](const Tensor& t) {
    if (!t.defined()) return t;
    if (x.dim() == 0) return reshape(t, {});
    return contiguous(movedim(t, x.dim() - 1, dim));
  };
  return {back(out), back(indices)};
}

// sum_{k >= i} t_k along dim: the gradient of cumsum.
Tensor reverse_cumsum(const Tensor& t, int64_t dim) {
  if (t.dim() == 0) return t;
  return add(sub(sum(t, std::vector<int64_t>{dim}, true), cumsum(t, dim)), t);
}

// Note [cumprod gradient with zeros]: dy_k/dx_i = prod_{j<=k, j!=i} x_j. Before a slice's
// first zero z every x_i is nonzero, so the usual sum_{k>=i} g_k y_k / x_i is exact there
// (y_k = 0 for k >= z contributes correctly). At z the gradient is
// prod_{j<z} x_j * sum_{k>=z} g_k prod_{z<j<=k} x_j; after z it is 0. All O(n), no division
// by zero and no host sync.
Tensor cumprod_grad(const Tensor& g, const Tensor& x, const Tensor& y, int64_t dim) {
  if (x.dim() == 0) return g;
  const std::vector<int64_t> d{dim};
  Tensor zero = eq(x, Scalar(0.0));
  Tensor zeros_so_far = cumsum(zero, dim);
  Tensor before = eq(zeros_so_far, Scalar(int64_t{0}));
  Tensor first_zero = logical_and(zero, eq(zeros_so_far, Scalar(int64_t{1})));
  Tensor one = constant(1.0, x);
  Tensor usual = div(reverse_cumsum(mul(g, y), dim), where(zero, one, x));
  Tensor prefix = prod(where(before, x, one), d, true);
  Tensor after_z = cumprod(where(logical_or(before, first_zero), one, x), dim);
  Tensor tail = sum(mul(mul(g, after_z), to_dtype(logical_not(before), x.dtype())), d, true);
  return where(before, usual, where(first_zero, mul(prefix, tail), constant(0.0, x)));
}

DType scan_dtype(const Tensor& x, std::optional<DType> dtype) {
  return dtype ? *dtype : (is_integral(x.dtype(), true) ? DType::Int64 : x.dtype());
}

// cummax / cummin: the gradient flows to the element each output was taken from, so repeated
// indices accumulate.
Tensor extreme_grad(const Tensor& g, const Tensor& indices, const Shape& shape, int64_t dim) {
  if (shape.empty()) return g;
  return scatter_add(zeros(shape, g.dtype(), g.device()), dim, indices, g);
}

// Note [logcumsumexp gradient]: with y = logcumsumexp(x), dy_k/dx_i = exp(x_i - y_k) for
// i <= k, so dx_i = sum_{k >= i} g_k exp(x_i - y_k) = exp(x_i) * sum_{k >= i} g_k exp(-y_k).
// That sum is taken in log space by a reverse logcumsumexp, once over the positive part of g
// and once over the negative part (log |g| is undefined for mixed signs), so terms never
// overflow. Built from kiln ops, so it differentiates again; two choices keep that second
// derivative finite:
// - the other part's entries get the dtype's lowest finite value, not -inf. With -inf, a part
//   with no entries (all g > 0, say) has tail = -inf, and the derivative of the inner
//   logcumsumexp there is exp(-inf - -inf) = NaN; with a finite floor, tail ~ lowest,
//   exp(tail + x) is still 0 in the forward, and every derivative stays finite.
// - log is taken of where(mask, |g|, 1): log |g| at g = 0 would pass 0 * (1 / 0) = NaN back
//   through the where even where the mask drops it.
// One limit remains, as in any log-space form: at an upstream g_k that is exactly 0 the
// derivative of dx in g_k comes out 0 instead of exp(x_i - y_k) (g_k is in neither part).
// Second derivatives in x are unaffected.
Tensor logcumsumexp_grad(const Tensor& g, const Tensor& x, const Tensor& y, int64_t dim) {
  if (x.dim() == 0) return g;
  const std::vector<int64_t> d{dim};
  const double lowest = dispatch_floating(g.dtype(), "logcumsumexp", [](auto tag) {
    using T = typename decltype(tag)::type;
    return static_cast<double>(std::numeric_limits<T>::lowest());
  });
  const Tensor floor = constant(lowest, g);
  const Tensor one = constant(1.0, g);
  auto part = [&](const Tensor& mask) {
    Tensor log_g = log(abs(where(mask, g, one)));
    Tensor w = sub(where(mask, log_g, floor), y);
    Tensor tail = flip(logcumsumexp(flip(w, d), dim), d);  // log sum_{k >= i} |g_k| e^-y_k
    return exp(add(tail, x));
  };
  return sub(part(gt(g, Scalar(0.0))), part(lt(g, Scalar(0.0))));
}

// The gradient of op's result y = op(x) (x in the result's dtype) along dim, from what the
// table's saves column kept: x and y (InputOutput) or the indices (Indexed ops).
Tensor scan_backward(ScanOp op, const Tensor& g, const Tensor& x, const Tensor& y,
                     const Tensor& indices, const Shape& shape, int64_t dim) {
  switch (op) {
    case ScanOp::Sum:  // cumsum
      return reverse_cumsum(g, dim);
    case ScanOp::Prod:  // cumprod
      return cumprod_grad(g, x, y, dim);
    case ScanOp::Max:  // cummax
    case ScanOp::Min:  // cummin
      return extreme_grad(g, indices, shape, dim);
    case ScanOp::LogSumExp:  // logcumsumexp
      return logcumsumexp_grad(g, x, y, dim);
  }
  fail(ErrorKind::Runtime, "[", op_name(op), "] has no backward");
}

}  // namespace

std::pair<Tensor, Tensor> scan(ScanOp op, const Tensor& x, int64_t dim,
                               std::optional<DType> dtype) {
  const char* name = op_name(op);
  const ScanSignature signature = op_signature(op);
  if (op_autocast(op) != AutocastPolicy::None)
    if (auto ac = autocast_args(name, {x}, dtype.has_value()))
      return scan(op, (*ac)[0], dim, dtype);
  const int64_t d = wrap_dim(dim, x.dim(), name);
  KILN_CHECK(signature != ScanSignature::Floating || is_floating(x.dtype()), NotImplemented, "[",
             name, "] not implemented for dtype ", x.dtype(), "; it takes floating point inputs");
  const DType dt = signature == ScanSignature::Accumulate ? scan_dtype(x, dtype) : x.dtype();
  std::pair<Tensor, Tensor> result = scan_compute(op, x, d, dt, name);
  if (is_floating(dt) && needs_grad({x})) {
    SavedTensor sx, sy, si;
    switch (op_saves(op)) {
      case ScanSaves::InputOutput:
        sx = SavedTensor(x);
        sy = SavedTensor::output(result.first, 0);
        break;
      case ScanSaves::Indices:
        si = SavedTensor(result.second);
        break;
      case ScanSaves::Nothing:
        break;
    }
    record(name, {x}, {result.first},
           [op, d, dt, shape = x.sizes(), sx, sy, si](const Grads& g, Node& self) -> Grads {
             Tensor xv = sx.unpack();
             return {scan_backward(op, g[0], xv.defined() ? to_dtype(xv, dt) : xv, sy.unpack(self),
                                   si.unpack(), shape, d)};
           });
  }
  return result;
}

#define KILN_DEFINE_SCAN_Accumulate(name, op)                             \
  Tensor name(const Tensor& x, int64_t dim, std::optional<DType> dtype) { \
    return scan(ScanOp::op, x, dim, dtype).first;                         \
  }
#define KILN_DEFINE_SCAN_Indexed(name, op) \
  std::pair<Tensor, Tensor> name(const Tensor& x, int64_t dim) { return scan(ScanOp::op, x, dim); }
#define KILN_DEFINE_SCAN_Floating(name, op) \
  Tensor name(const Tensor& x, int64_t dim) { return scan(ScanOp::op, x, dim).first; }
#define KILN_DEFINE_SCAN(name, op, functor, signature, autocast, saves) \
  KILN_DEFINE_SCAN_##signature(name, op)
KILN_SCAN_OPS(KILN_DEFINE_SCAN)
#undef KILN_DEFINE_SCAN
#undef KILN_DEFINE_SCAN_Floating
#undef KILN_DEFINE_SCAN_Indexed
#undef KILN_DEFINE_SCAN_Accumulate

}  // namespace kiln
