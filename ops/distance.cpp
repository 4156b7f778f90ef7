// dist and cdist, composed from existing ops so they run on every device. cdist's matmul
// path records its own backward: through the composition, sqrt(0) would give an infinite
// gradient at zero distance, where PyTorch defines it as 0.
#include "ops/distance.h"

#include <cmath>
#include <vector>

#include "autograd/function.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/creation.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

// sqrt(max(|a_i|^2 + |b_j|^2 - 2 a_i.b_j, 0)) for a [*, P, M], b [*, R, M] with equal
// batch dims; rounding can make the expansion slightly negative, hence the clamp.
Tensor euclidean_mm(const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    GradModeGuard no_grad(false);
    Tensor na = sum(mul(a, a), std::vector<int64_t>{-1}, true);
    Tensor nb = sum(mul(b, b), std::vector<int64_t>{-1}, true);
    Tensor sq = add(add(mul(matmul(a, mT(b)), Scalar(-2.0)), na), mT(nb));
    out = sqrt(clamp(sq, Scalar(0.0), std::nullopt));
  }
  if (needs_grad({a, b})) {
    record("cdist", {a, b}, {out},
           [sa = SavedTensor(a), sb = SavedTensor(b), so = SavedTensor::output(out, 0)](
               const Grads& g, Node& self) -> Grads {
             Tensor x = sa.unpack(), y = sb.unpack(), d = so.unpack(self);
             // w_ij = g_ij / d_ij (0 where d_ij == 0); d d_ij / d a_i = (a_i - b_j) / d_ij,
             // so grad a_i = a_i sum_j w_ij - sum_j w_ij b_j, and symmetrically for b.
             Tensor zero = eq(d, Scalar(0.0));
             Tensor w = where(zero, zeros_like(d), div(g[0], where(zero, ones_like(d), d)));
             Tensor ga = sub(mul(x, sum(w, std::vector<int64_t>{-1}, true)), matmul(w, y));
             Tensor gb =
                 sub(mul(y, unsqueeze(sum(w, std::vector<int64_t>{-2}), -1)), matmul(mT(w), x));
             return {ga, gb};
           });
  }
  return out;
}

}  // namespace

Tensor dist(const Tensor& a, const Tensor& b, double p) {
  if (auto ac = autocast_args("dist", {a, b})) return dist((*ac)[0], (*ac)[1], p);
  return vector_norm(sub(a, b), p, std::nullopt, false, std::nullopt, "dist");
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, CdistMode mode) {
  if (auto ac = autocast_args("cdist", {x1, x2})) return cdist((*ac)[0], (*ac)[1], p, mode);
  KILN_CHECK(x1.dim() >= 2, Runtime,
             "[cdist] cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D (shape ",
             x1.sizes(), ")");
  KILN_CHECK(x2.dim() >= 2, Runtime,
             "[cdist] cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D (shape ",
             x2.sizes(), ")");
  KILN_CHECK(x1.size(-1) == x2.size(-1), Runtime,
             "[cdist] X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
             " X2: ", x2.size(-1), " (shapes ", x1.sizes(), " and ", x2.sizes(), ")");
  KILN_CHECK(
      is_floating(x1.dtype()), Runtime,
      "[cdist] cdist only supports floating-point dtypes, X1 got: ", scalar_type_name(x1.dtype()));
  KILN_CHECK(
      is_floating(x2.dtype()), Runtime,
      "[cdist] cdist only supports floating-point dtypes, X2 got: ", scalar_type_name(x2.dtype()));
  KILN_CHECK(x1.dtype() == x2.dtype(), Runtime, "[cdist] X1 and X2 must have the same dtype, got ",
             scalar_type_name(x1.dtype()), " and ", scalar_type_name(x2.dtype()));
  KILN_CHECK(x1.device() == x2.device(), Runtime,
             "[cdist] X1 and X2 must have the same device type. X1: ", x1.device(),
             " X2: ", x2.device());
  KILN_CHECK(p >= 0, Runtime, "[cdist] cdist only supports non-negative p values, got ", p);
  const Shape b1(x1.sizes().begin(), x1.sizes().end() - 2);
  const Shape b2(x2.sizes().begin(), x2.sizes().end() - 2);
  Shape batch = broadcast_shapes(b1, b2, "cdist");
  const int64_t rows1 = x1.size(-2), rows2 = x2.size(-2), cols = x1.size(-1);
  const bool use_mm = p == 2.0 && rows1 > 0 && rows2 > 0 && cols > 0 &&
                      (mode == CdistMode::AlwaysMm ||
                       (mode == CdistMode::MmIfNecessary && (rows1 > 25 || rows2 > 25)));
  if (use_mm) {
    Shape s1 = batch, s2 = batch;
    s1.insert(s1.end(), {rows1, cols});
    s2.insert(s2.end(), {rows2, cols});
    return euclidean_mm(expand(x1, s1), expand(x2, s2));
  }
  // [*, P, 1, M] - [*, 1, R, M], normed over M. Without columns every distance is 0 (the
  // 2-norm of nothing), also for the p = inf max, which has no empty identity.
  Tensor diff = sub(unsqueeze(x1, -2), unsqueeze(x2, -3));
  return vector_norm(diff, cols == 0 ? 2.0 : p, std::vector<int64_t>{-1}, false, std::nullopt,
                     "cdist");
}

}  // namespace kiln
