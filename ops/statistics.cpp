#include "ops/statistics.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/shape.h"
#include "ops/binary.h"
#include "ops/calculus.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/index.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/search.h"
#include "ops/sort.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

// A 0-d (or one-element) tensor's value on the host; used only for argument checks
// that PyTorch also makes on the data (negative weights, histogram ranges).
double host_value(const Tensor& t) {
  GradModeGuard no_grad(false);
  return contiguous(to_device(to_dtype(t, DType::Float64), Device())).data<double>()[0];
}

void check_weights(const Tensor& w, int64_t n, bool frequency) {
  if (!w.defined()) return;
  const char* name = frequency ? "fweights" : "aweights";
  KILN_CHECK(w.dim() <= 1, Runtime, "[cov] expected ", name,
             " to have one or fewer dimensions "
             "but got ",
             name, " with ", w.dim(), " dimensions");
  KILN_CHECK(w.numel() == n, Runtime, "[cov] expected ", name,
             " to have the same numel as "
             "there are observations in the input but got ",
             w.numel(), " != ", n);
  KILN_CHECK(frequency ? is_integral(w.dtype(), false) : is_floating(w.dtype()), Runtime,
             "[cov] "
             "expected ",
             name, " to have ", frequency ? "integral" : "floating point", " dtype but got ", name,
             " with ", w.dtype(), " dtype");
  KILN_CHECK(n == 0 || host_value(amin(w)) >= 0, Runtime, "[cov] ", name, " cannot be negative");
}

}  // namespace

Tensor cov(const Tensor& x, int64_t correction, const Tensor& fweights, const Tensor& aweights) {
  KILN_CHECK(x.dim() <= 2, Runtime,
             "[cov] expected input to have two or fewer dimensions but "
             "got an input with ",
             x.dim(), " dimensions");
  Tensor obs = x.dim() < 2 ? reshape(x, {1, x.numel()}) : x;
  if (!is_floating(obs.dtype())) obs = to_dtype(obs, default_dtype());
  const int64_t n = obs.size(1);
  check_weights(fweights, n, true);
  check_weights(aweights, n, false);
  Tensor w;
  if (fweights.defined()) w = fweights;
  if (aweights.defined()) w = w.defined() ? mul(w, aweights) : aweights;
  Tensor avg, w_sum, norm;
  if (!w.defined()) {
    avg = mean(obs, std::vector<int64_t>{1});
    norm = scalar_tensor(double(n - correction), obs.dtype(), obs.device());
  } else {
    w = reshape(w, {n});
    w_sum = sum(w);
    avg = div(sum(mul(obs, w), std::vector<int64_t>{1}), w_sum);
    norm = aweights.defined() && correction != 0
               ? sub(w_sum, div(mul(sum(mul(w, reshape(aweights, {n}))), correction), w_sum))
               : sub(w_sum, correction);
  }
  // Like PyTorch, a non-positive normaliser gives inf / nan rather than an error.
  norm = clamp(norm, Scalar(0.0), std::nullopt);
  Tensor xc = sub(obs, unsqueeze(avg, 1));
  Tensor c = div(mm(w.defined() ? mul(xc, w) : xc, t(xc)), norm);
  return x.dim() < 2 ? reshape(c, {}) : c;
}

Tensor corrcoef(const Tensor& x) {
  KILN_CHECK(x.dim() <= 2, Runtime,
             "[corrcoef] expected input to have two or fewer dimensions "
             "but got an input with ",
             x.dim(), " dimensions");
  Tensor c = cov(x);
  if (c.dim() == 0) return div(c, c);
  Tensor sd = sqrt(diagonal(c));
  c = div(div(c, unsqueeze(sd, 1)), unsqueeze(sd, 0));
  return clamp(c, Scalar(-1.0), Scalar(1.0));
}

namespace {

// (values, indices) of the lower median of the non-NaN entries along the last dim of a
// tensor with at least one element there; a slice of only NaNs picks its first NaN.
std::tuple<Tensor, Tensor> nanmedian_last(const Tensor& x) {
  auto [sorted, order] = sort(x, -1);
  Tensor valid = sum(logical_not(isnan(x)), std::vector<int64_t>{-1}, true);
  Tensor pos = floor_divide(clamp(sub(valid, 1), Scalar(int64_t(0)), std::nullopt), 2);
  return {gather(sorted, -1, pos), gather(order, -1, pos)};
}

}  // namespace

Tensor nanmedian(const Tensor& x) {
  if (x.numel() == 0) return full({}, NAN, x.dtype(), x.device());
  return reshape(std::get<0>(nanmedian_last(reshape(x, {x.numel()}))), {});
}

std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = wrap_dim(dim, x.dim(), "nanmedian");
  Tensor v = x.dim() == 0 ? reshape(x, {1}) : x;
  KILN_CHECK(v.size(d) > 0, Index, "[nanmedian] Expected reduction dim ", d,
             " to have non-zero size, got input ", x.sizes());
  auto [vals, idx] = nanmedian_last(movedim(v, d, -1));
  vals = movedim(vals, -1, d);
  idx = movedim(idx, -1, d);
  if (!keepdim || x.dim() == 0) {
    vals = x.dim() == 0 ? reshape(vals, {}) : squeeze(vals, std::vector<int64_t>{d});
    idx = x.dim() == 0 ? reshape(idx, {}) : squeeze(idx, std::vector<int64_t>{d});
  }
  return {vals, idx};
}

namespace {

Tensor quantile_impl(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                     const std::string& mode, bool ignore_nan) {
  const char* op = ignore_nan ? "nanquantile" : "quantile";
  KILN_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, Runtime, "[", op,
             "] input tensor must be either float or double dtype, got ", x.dtype());
  KILN_CHECK(q.dtype() == x.dtype(), Runtime, "[", op,
             "] q tensor must be same dtype as the input tensor, got q ", q.dtype(), " and input ",
             x.dtype());
  KILN_CHECK(q.dim() <= 1, Runtime, "[", op, "] q must be a scalar or 1D tensor, got shape ",
             q.sizes());
  KILN_CHECK(q.device() == x.device(), Runtime, "[", op,
             "] q tensor must be on the same device "
             "as the input tensor, got q on ",
             q.device(), " and input on ", x.device());
  KILN_CHECK(mode == "linear" || mode == "lower" || mode == "higher" || mode == "midpoint" ||
                 mode == "nearest",
             Runtime, "[", op,
             "] interpolation must be one of linear, lower, higher, midpoint "
             "or nearest. Got ",
             mode);
  if (q.numel() > 0) {
    KILN_CHECK(host_value(amin(q)) >= 0 && host_value(amax(q)) <= 1, Runtime, "[", op,
               "] q values must be in the range [0, 1]");
  }
  // Rows: every element (dim absent) or the slices along dim, moved last.
  Shape out_shape;
  Tensor rows;
  if (!dim) {
    rows = reshape(x, {x.numel()});
    out_shape = keepdim ? Shape(x.dim(), 1) : Shape{};
  } else {
    const int64_t d = wrap_dim(*dim, x.dim(), op);
    Tensor v = x.dim() == 0 ? reshape(x, {1}) : x;
    rows = movedim(v, d, -1);
    out_shape = x.sizes();
    if (x.dim() > 0) {
      if (keepdim)
        out_shape[d] = 1;
      else
        out_shape.erase(out_shape.begin() + d);
    }
  }
  const int64_t nq = q.numel();
  Shape lead(rows.sizes().begin(), rows.sizes().end() - 1);
  const int64_t n = rows.size(-1);
  Tensor result;
  if (n == 0) {
    Shape s = lead;
    s.push_back(nq);
    result = full(s, NAN, x.dtype(), x.device());
  } else {
    Tensor sorted = std::get<0>(sort(rows, -1));
    Tensor qs = reshape(q, {nq});
    // The fractional rank of each quantile per row; NaNs sort last, so pointing a row's rank
    // at its last entry (quantile) or at the first of an all-NaN row gives NaN.
    Tensor valid = sum(logical_not(isnan(rows)), std::vector<int64_t>{-1}, true);
    Tensor rank;
    if (ignore_nan) {
      rank = mul(clamp(sub(to_dtype(valid, x.dtype()), 1.0), Scalar(0.0), std::nullopt), qs);
    } else {
      Tensor has_nan = lt(valid, n);
      rank = where(has_nan, full({}, double(n - 1), x.dtype(), x.device()), mul(qs, double(n - 1)));
    }
    Shape rs = lead;
    rs.push_back(nq);
    rank = expand(rank, rs);
    auto pick = [&](const Tensor& r) {
      return gather(sorted, -1,
                    to_dtype(clamp(r, Scalar(0.0), Scalar(double(n - 1))), DType::Int64));
    };
    Tensor lo = floor(rank), hi = ceil(rank);
    if (mode == "lower") {
      result = pick(lo);
    } else if (mode == "higher") {
      result = pick(hi);
    } else if (mode == "nearest") {
      result = pick(round(rank));
    } else {
      Tensor w = mode == "midpoint" ? full_like(rank, 0.5) : sub(rank, lo);
      result = lerp(pick(lo), pick(hi), w);
    }
  }
  // [..., nq] -> [nq, ...out_shape]; a 0-d q has no q dim.
  result = movedim(result, -1, 0);
  Shape final_shape = out_shape;
  if (q.dim() == 1) final_shape.insert(final_shape.begin(), nq);
  return reshape(result, final_shape);
}

}  // namespace

Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  return quantile_impl(x, q, dim, keepdim, interpolation, false);
}

Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return quantile_impl(x, q, dim, keepdim, interpolation, true);
}

namespace {

std::pair<Tensor, Tensor> histogram_edges(const Tensor& x, const Tensor& edges,
                                          const Tensor& weight, bool density) {
  KILN_CHECK(is_floating(x.dtype()), Runtime, "[histogram] input must be a floating tensor, got ",
             x.dtype());
  KILN_CHECK(edges.dim() == 1 && edges.numel() >= 2, Runtime,
             "[histogram] bins must be a 1-D tensor with at least 2 edges, got shape ",
             edges.sizes());
  KILN_CHECK(edges.dtype() == x.dtype(), Runtime,
             "[histogram] expected bins to have input's "
             "dtype ",
             x.dtype(), ", got ", edges.dtype());
  KILN_CHECK(!weight.defined() || weight.sizes() == x.sizes(), Runtime,
             "[histogram] expected weight to have the same shape as input ", x.sizes(), ", got ",
             weight.sizes());
  KILN_CHECK(!weight.defined() || weight.dtype() == x.dtype(), Runtime,
             "[histogram] expected weight to have input's dtype ", x.dtype(), ", got ",
             weight.dtype());
  GradModeGuard no_grad(false);
  const int64_t nb = edges.numel() - 1;
  Tensor v = reshape(x, {x.numel()});
  Tensor first = narrow(edges, 0, 0, 1), last = narrow(edges, 0, nb, 1);
  // Bin i holds [e_i, e_{i+1}); the last one also its right edge.
  Tensor bin = sub(searchsorted(edges, v, false, true), 1);
  bin = where(eq(v, last), full({}, nb - 1, DType::Int64, v.device()), bin);
  Tensor inside = logical_and(ge(v, first), le(v, last));
  Tensor w = weight.defined() ? reshape(weight, {x.numel()}) : ones_like(v);
  w = where(inside, w, zeros({}, v.dtype(), v.device()));
  bin = where(inside, bin, zeros({}, DType::Int64, v.device()));
  Tensor hist = to_dtype(bincount(bin, w, nb), x.dtype());
  if (density) hist = div(div(hist, sum(hist)), diff(edges));
  return {hist, edges};
}

}  // namespace

std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins,
                                    std::optional<std::pair<double, double>> range,
                                    const Tensor& weight, bool density) {
  KILN_CHECK(bins > 0, Runtime, "[histogram] bins must be > 0, but got ", bins);
  KILN_CHECK(is_floating(x.dtype()), Runtime, "[histogram] input must be a floating tensor, got ",
             x.dtype());
  double lo = 0, hi = 1;  // an empty input without a range spans [0, 1], as in NumPy
  if (range) {
    lo = range->first;
    hi = range->second;
  } else if (x.numel() > 0) {
    lo = host_value(amin(x));
    hi = host_value(amax(x));
  }
  KILN_CHECK(lo <= hi, Runtime, "[histogram] min should not exceed max, but got min ", lo, " max ",
             hi);
  KILN_CHECK(std::isfinite(lo) && std::isfinite(hi), Runtime, "[histogram] range of [", lo, ", ",
             hi, "] is not finite");
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  return histogram_edges(x, linspace(lo, hi, bins + 1, x.dtype(), x.device()), weight, density);
}

std::pair<Tensor, Tensor> histogram(const Tensor& x, const Tensor& bins, const Tensor& weight,
                                    bool density) {
  return histogram_edges(x, bins, weight, density);
}

}  // namespace kiln
