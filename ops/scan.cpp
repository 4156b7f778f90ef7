// Scans along one dim, with autograd: cumsum, cumprod, cummax, cummin, logcumsumexp. The
// kernels are the shared scan functors (Note [Scan functors], ops/math/scan_functors.h).
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
  const bool indexed = op == ScanOp::Max || op == ScanOp::Min;
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

// cummax / cummin: values keep x's dtype, indices are int64; the gradient flows to the element
// each output was taken from, so repeated indices accumulate.
std::pair<Tensor, Tensor> cumulative_extreme(ScanOp op, const Tensor& x, int64_t dim,
                                             const char* name) {
  const int64_t d = wrap_dim(dim, x.dim(), name);
  std::pair<Tensor, Tensor> result = scan_compute(op, x, d, x.dtype(), name);
  if (is_floating(x.dtype()) && needs_grad({x})) {
    record(name, {x}, {result.first},
           [d, shape = x.sizes(), si = SavedTensor(result.second)](const Grads& g,
                                                                  Node&) -> Grads {
             if (shape.empty()) return {g[0]};
             return {scatter_add(zeros(shape, g[0].dtype(), g[0].device()), d, si.unpack(),
                                 g[0])};
           });
  }
  return result;
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

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  if (auto ac = autocast_args("cumsum", {x}, dtype.has_value()))
    return cumsum((*ac)[0], dim, dtype);
  const int64_t d = wrap_dim(dim, x.dim(), "cumsum");
  DType dt = scan_dtype(x, dtype);
  Tensor out = scan_compute(ScanOp::Sum, x, d, dt, "cumsum").first;
  if (is_floating(dt) && needs_grad({x})) {
    record("cumsum", {x}, {out}, [d](const Grads& g, Node&) -> Grads {
      return {reverse_cumsum(g[0], d)};
    });
  }
  return out;
}

Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  if (auto ac = autocast_args("cumprod", {x}, dtype.has_value()))
    return cumprod((*ac)[0], dim, dtype);
  const int64_t d = wrap_dim(dim, x.dim(), "cumprod");
  DType dt = scan_dtype(x, dtype);
  Tensor out = scan_compute(ScanOp::Prod, x, d, dt, "cumprod").first;
  if (is_floating(dt) && needs_grad({x})) {
    record("cumprod", {x}, {out}, [d, dt, sx = SavedTensor(x), so = SavedTensor::output(out, 0)](
                                      const Grads& g, Node& self) -> Grads {
      return {cumprod_grad(g[0], to_dtype(sx.unpack(), dt), so.unpack(self), d)};
    });
  }
  return out;
}

std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) {
  return cumulative_extreme(ScanOp::Max, x, dim, "cummax");
}

std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) {
  return cumulative_extreme(ScanOp::Min, x, dim, "cummin");
}

Tensor logcumsumexp(const Tensor& x, int64_t dim) {
  const int64_t d = wrap_dim(dim, x.dim(), "logcumsumexp");
  KILN_CHECK(is_floating(x.dtype()), NotImplemented, "[logcumsumexp] not implemented for dtype ",
             x.dtype(), "; it takes floating point inputs");
  Tensor out = scan_compute(ScanOp::LogSumExp, x, d, x.dtype(), "logcumsumexp").first;
  if (needs_grad({x})) {
    record("logcumsumexp", {x}, {out},
           [d, sx = SavedTensor(x), so = SavedTensor::output(out, 0)](const Grads& g, Node& self)
               -> Grads { return {logcumsumexp_grad(g[0], sx.unpack(), so.unpack(self), d)}; });
  }
  return out;
}

}  // namespace kiln
