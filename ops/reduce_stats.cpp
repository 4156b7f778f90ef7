// Statistical reductions: var/std (and their _mean forms), vector norms and
// logsumexp. var, std and logsumexp are composites of differentiable ops, so
// their gradients (and double backward) come from the ops they are built of;
// vector_norm records its own backward to stay finite at a zero norm.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

Tensor constant(double v, const Tensor& like) {
  return scalar_tensor(Scalar(v), like.dtype(), like.device());
}

void check_floating(const Tensor& x, const char* name) {
  KILN_CHECK(is_floating(x.dtype()), Runtime, "[", name,
             "] std and var only support floating point dtypes, got ", x.dtype());
}

// Returns the mean (kept dims) and writes var with `correction` to *var_out.
Tensor centred_stats(const Tensor& x, const DimList& dims, double correction, bool keepdim,
                     const char* name, Tensor* var_out) {
  AutocastSuspend keep_dtypes;  // built from table ops, but keeps its input dtype like PyTorch's
  check_floating(x, name);
  if (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16) {
    // A half sum of squares overflows long before the variance does: compute in float32.
    Tensor m = centred_stats(to_dtype(x, DType::Float32), dims, correction, keepdim, name, var_out);
    *var_out = to_dtype(*var_out, x.dtype());
    return to_dtype(m, x.dtype());
  }
  std::vector<int64_t> wrapped = reduction_dims(dims, x.dim(), name);
  int64_t count = 1;
  for (int64_t d : wrapped) count *= x.sizes()[d];
  Tensor m = mean(x, wrapped, true);
  Tensor centred = sub(x, m);
  // A non-positive divisor gives inf/NaN rather than an error, as in PyTorch.
  double divisor = std::max(0.0, static_cast<double>(count) - correction);
  *var_out = div(sum(mul(centred, centred), wrapped, keepdim), Scalar(divisor));
  return keepdim ? m : reshape(m, reduced_shape(x.sizes(), wrapped, false));
}

bool is_inf(double v, int sign) { return std::isinf(v) && (v > 0) == (sign > 0); }

// Forward value of the ord-norm of |x| (no autograd).
Tensor norm_value(const Tensor& x, double ord, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor a = abs(x);
  if (is_inf(ord, 1)) return amax(a, dims, keepdim);
  if (is_inf(ord, -1)) return amin(a, dims, keepdim);
  if (ord == 0) return to_dtype(sum(ne(x, Scalar(0.0)), dims, keepdim), x.dtype());
  if (ord == 1) return sum(a, dims, keepdim);
  if (ord == 2) return sqrt(sum(mul(a, a), dims, keepdim));
  return pow(sum(pow(a, Scalar(ord)), dims, keepdim), Scalar(1.0 / ord));
}

// d||x||_ord / dx times the (kept-dims) upstream gradient g.
Tensor norm_grad(const Tensor& g, const Tensor& x, const Tensor& norm, double ord,
                 const std::vector<int64_t>& dims) {
  if (ord == 0) return mul(g, zeros_like(x));
  if (ord == 1) return mul(g, sign(x));
  if (std::isinf(ord)) {
    Tensor hit = to_dtype(eq(abs(x), norm), x.dtype());
    return mul(div(g, sum(hit, dims, true)), mul(sign(x), hit));
  }
  Tensor zero_norm = eq(norm, Scalar(0.0));
  if (ord == 2) return mul(g, div(x, where(zero_norm, constant(1.0, norm), norm)));
  // sign(x) |x|^(ord-1) / norm^(ord-1); zero entries (where |x|^(ord-1) may be inf for
  // ord < 1) get no gradient.
  Tensor scaled = div(mul(sign(x), pow(abs(x), Scalar(ord - 1))),
                      pow(where(zero_norm, constant(1.0, norm), norm), Scalar(ord - 1)));
  return mul(g, where(eq(x, Scalar(0.0)), constant(0.0, x), scaled));
}

}  // namespace

Tensor var(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  profiler::RecordScope profile("var");
  profile.inputs(x);
  Tensor v;
  centred_stats(x, dims, correction, keepdim, "var", &v);
  return v;
}

Tensor std_dev(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  profiler::RecordScope profile("std");
  profile.inputs(x);
  Tensor v;
  centred_stats(x, dims, correction, keepdim, "std", &v);
  return sqrt(v);
}

std::pair<Tensor, Tensor> var_mean(const Tensor& x, const DimList& dims, double correction,
                                   bool keepdim) {
  Tensor v;
  Tensor m = centred_stats(x, dims, correction, keepdim, "var_mean", &v);
  return {v, m};
}

std::pair<Tensor, Tensor> std_mean(const Tensor& x, const DimList& dims, double correction,
                                   bool keepdim) {
  Tensor v;
  Tensor m = centred_stats(x, dims, correction, keepdim, "std_mean", &v);
  return {sqrt(v), m};
}

Tensor vector_norm(const Tensor& x, double ord, const DimList& dims, bool keepdim,
                   std::optional<DType> dtype, const char* name) {
  if (auto ac = autocast_args("norm", {x}, dtype.has_value()))
    return vector_norm((*ac)[0], ord, dims, keepdim, dtype, name);
  // NotImplementedError (a RuntimeError) as PyTorch 2.15 raises; earlier releases raised
  // RuntimeError.
  KILN_CHECK(is_floating(x.dtype()), NotImplemented, "[", name,
             "] Expected a floating point tensor as input, got ", x.dtype());
  KILN_CHECK(!std::isnan(ord), Runtime, "[", name, "] ord must not be NaN");
  DType dt = dtype ? *dtype : x.dtype();
  KILN_CHECK(is_floating(dt), Runtime, "[", name,
             "] dtype should be a floating point dtype, got ", dt);
  std::vector<int64_t> wrapped = reduction_dims(dims, x.dim(), name);
  if (ord < 0 || std::isinf(ord)) {
    for (int64_t d : wrapped)
      KILN_CHECK(x.sizes()[d] != 0, Index, "[", name, "] cannot compute the ", ord,
                 " norm over dim ", d, " of size 0 (input shape ", x.sizes(), ")");
  }
  Tensor out;
  {
    GradModeGuard no_grad(false);
    out = norm_value(to_dtype(x, dt), ord, wrapped, keepdim);
  }
  if (needs_grad({x})) {
    record("linalg_vector_norm", {x}, {out},
           [sx = SavedTensor(x), so = SavedTensor::output(out, 0), ord, wrapped, keepdim, dt](
               const Grads& g, Node& self) -> Grads {
             Tensor xc = to_dtype(sx.unpack(), dt);
             Tensor n = unsqueeze_reduced(so.unpack(self), xc.sizes(), wrapped, keepdim);
             Tensor gg = unsqueeze_reduced(g[0], xc.sizes(), wrapped, keepdim);
             return {norm_grad(gg, xc, n, ord, wrapped)};
           });
  }
  return out;
}

Tensor nansum(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  AutocastSuspend keep_dtypes;  // built from table ops, but keeps its input dtype like PyTorch's
  if (!is_floating(x.dtype())) return sum(x, dims, keepdim, dtype);
  return sum(where(isnan(x), constant(0.0, x), x), dims, keepdim, dtype);
}

Tensor nanmean(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  AutocastSuspend keep_dtypes;  // built from table ops, but keeps its input dtype like PyTorch's
  DType dt = dtype ? *dtype : x.dtype();
  KILN_CHECK(is_floating(dt), Runtime,
             "[nanmean] nanmean(): expected input to have floating point dtype but got ", dt);
  Tensor xc = to_dtype(x, dt);
  Tensor present = logical_not(isnan(xc));
  return div(nansum(xc, dims, keepdim), sum(present, dims, keepdim));
}

Tensor count_nonzero(const Tensor& x, const DimList& dims) {
  return sum(ne(x, Scalar(int64_t{0})), dims, false);
}

Tensor logsumexp(const Tensor& x, const DimList& dims, bool keepdim) {
  profiler::RecordScope profile("logsumexp");
  profile.inputs(x);
  if (auto ac = autocast_args("logsumexp", {x})) return logsumexp((*ac)[0], dims, keepdim);
  Tensor xf = is_floating(x.dtype()) ? x : to_dtype(x, DType::Float32);
  std::vector<int64_t> wrapped = reduction_dims(dims, x.dim(), "logsumexp");
  if (xf.numel() == 0) return log(sum(exp(xf), wrapped, keepdim));
  // The shift is a constant for autograd: the gradient of log(sum(exp(x - m))) + m is
  // softmax(x) whatever m is. Infinite maxima shift by 0 so inf - inf cannot make NaN.
  Tensor shift;
  {
    GradModeGuard no_grad(false);
    Tensor m = amax(xf, wrapped, true);
    shift = where(isinf(m), constant(0.0, m), m);
  }
  Tensor lse = log(sum(exp(sub(xf, shift)), wrapped, keepdim));
  return add(lse, keepdim ? shift : reshape(shift, reduced_shape(x.sizes(), wrapped, false)));
}

}  // namespace kiln
