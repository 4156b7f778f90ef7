#include "ops/calculus.h"

#include "core/error.h"
#include "core/flags.h"
#include "core/shape.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

// x[lo : size + hi] along dim (hi <= 0), like Python's x[lo:hi or None].
Tensor part(const Tensor& x, int64_t dim, int64_t lo, int64_t hi) {
  return narrow(x, dim, lo, x.size(dim) - lo + hi);
}

void check_joined(const Tensor& x, const Tensor& t, int64_t d, const char* what) {
  if (!t.defined()) return;
  bool ok = t.dim() == x.dim();
  for (int64_t j = 0; ok && j < x.dim(); ++j) ok = j == d || t.size(j) == x.size(j);
  KILN_CHECK(ok, Runtime, "[diff] expected ", what,
             " to have the same number of dimensions as "
             "input and the same shape except along dim ",
             d, ", got ", what, " ", t.sizes(), " and input ", x.sizes());
}

}  // namespace

Tensor diff(const Tensor& x, int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) {
  KILN_CHECK(x.dim() >= 1, Runtime, "[diff] expects input to be at least one-dimensional");
  KILN_CHECK(n >= 0, Runtime, "[diff] order must be non-negative but got ", n);
  const int64_t d = wrap_dim(dim, x.dim(), "diff");
  check_joined(x, prepend, d, "prepend");
  check_joined(x, append, d, "append");
  // As NumPy and PyTorch: order 0 returns input, ignoring prepend and append.
  if (n == 0) return x;
  std::vector<Tensor> parts;
  if (prepend.defined()) parts.push_back(prepend);
  parts.push_back(x);
  if (append.defined()) parts.push_back(append);
  Tensor out = parts.size() == 1 ? x : cat(parts, d);
  for (int64_t i = 0; i < n && out.size(d) > 0; ++i) {
    Tensor hi = part(out, d, 1, 0), lo = part(out, d, 0, -1);
    out = out.dtype() == DType::Bool ? logical_xor(hi, lo) : sub(hi, lo);
  }
  return out;
}

namespace {

// 1-D `t` shaped to broadcast along dim d of an nd-dim tensor.
Tensor along(const Tensor& t, int64_t d, int64_t nd) {
  Shape s(nd, 1);
  s[d] = t.numel();
  return reshape(t, s);
}

// The derivative of f along d with a constant step h.
Tensor gradient_uniform(const Tensor& f, int64_t d, Scalar h, int64_t edge_order) {
  Tensor inner = div(div(sub(part(f, d, 2, 0), part(f, d, 0, -2)), h), 2.0);
  Tensor first, last;
  const int64_t n = f.size(d);
  if (edge_order == 1) {
    first = div(sub(narrow(f, d, 1, 1), narrow(f, d, 0, 1)), h);
    last = div(sub(narrow(f, d, n - 1, 1), narrow(f, d, n - 2, 1)), h);
  } else {
    first = div(div(add(add(mul(narrow(f, d, 0, 1), -3.0), mul(narrow(f, d, 1, 1), 4.0)),
                        neg(narrow(f, d, 2, 1))),
                    h),
                2.0);
    last = div(div(add(sub(mul(narrow(f, d, n - 1, 1), 3.0), mul(narrow(f, d, n - 2, 1), 4.0)),
                       narrow(f, d, n - 3, 1)),
                   h),
               2.0);
  }
  return cat({first, inner, last}, d);
}

// The derivative of f along d sampled at the 1-D coordinates c (second-order accurate inside).
Tensor gradient_coords(const Tensor& f, int64_t d, const Tensor& c, int64_t edge_order) {
  const int64_t n = f.size(d), nd = f.dim();
  Tensor dx = along(sub(narrow(c, 0, 1, n - 1), narrow(c, 0, 0, n - 1)), d, nd);
  Tensor hd = part(dx, d, 0, -1), hs = part(dx, d, 1, 0);
  Tensor f0 = part(f, d, 0, -2), f1 = part(f, d, 1, -1), f2 = part(f, d, 2, 0);
  Tensor inner = div(
      sub(add(mul(mul(hd, hd), f2), mul(sub(mul(hs, hs), mul(hd, hd)), f1)), mul(mul(hs, hs), f0)),
      mul(mul(hs, hd), add(hd, hs)));
  auto at = [&](const Tensor& t, int64_t i) { return narrow(t, d, i < 0 ? t.size(d) + i : i, 1); };
  Tensor first, last;
  if (edge_order == 1) {
    first = div(sub(at(f, 1), at(f, 0)), at(dx, 0));
    last = div(sub(at(f, -1), at(f, -2)), at(dx, -1));
  } else {
    Tensor a1 = at(dx, 0), a2 = at(dx, 1), s = add(a1, a2);
    first = add(add(mul(neg(div(add(mul(a1, 2.0), a2), mul(a1, s))), at(f, 0)),
                    mul(div(s, mul(a1, a2)), at(f, 1))),
                mul(neg(div(a1, mul(a2, s))), at(f, 2)));
    Tensor b1 = at(dx, -2), b2 = at(dx, -1), t = add(b1, b2);
    last = add(add(mul(div(b2, mul(b1, t)), at(f, -3)), mul(neg(div(t, mul(b1, b2))), at(f, -2))),
               mul(div(add(mul(b2, 2.0), b1), mul(b2, t)), at(f, -1)));
  }
  return cat({first, inner, last}, d);
}

}  // namespace

std::vector<Tensor> gradient(const Tensor& x, const std::vector<GradientSpacing>& spacing,
                             const std::vector<int64_t>& dims, int64_t edge_order) {
  KILN_CHECK(edge_order == 1 || edge_order == 2, Runtime,
             "[gradient] only supports edge_order=1 and edge_order=2, got ", edge_order);
  KILN_CHECK(x.dim() >= 1, Runtime, "[gradient] expected input to have at least 1 dimension");
  std::vector<int64_t> ds;
  if (dims.empty()) {
    for (int64_t j = 0; j < x.dim(); ++j) ds.push_back(j);
  } else {
    ds = wrap_dims(dims, x.dim(), "gradient");
  }
  KILN_CHECK(spacing.size() == 1 || spacing.size() == ds.size(), Runtime,
             "[gradient] expected spacing to be unspecified, a scalar or a list of length ",
             ds.size(), " (the number of dims), but got a list of length ", spacing.size());
  Tensor f = is_floating(x.dtype()) ? x : to_dtype(x, default_dtype());
  std::vector<Tensor> out;
  for (size_t i = 0; i < ds.size(); ++i) {
    const int64_t d = ds[i];
    KILN_CHECK(f.size(d) >= edge_order + 1, Runtime,
               "[gradient] expected each dimension size to be at least edge_order+1, got size ",
               f.size(d), " for dim ", d, " of input ", x.sizes(), " with edge_order ", edge_order);
    const GradientSpacing& sp = spacing[spacing.size() == 1 ? 0 : i];
    if (const Scalar* h = std::get_if<Scalar>(&sp)) {
      out.push_back(gradient_uniform(f, d, *h, edge_order));
      continue;
    }
    const Tensor& c = std::get<Tensor>(sp);
    KILN_CHECK(c.dim() == 1 && c.numel() == f.size(d), Runtime,
               "[gradient] expected each coordinate tensor to be 1-D with as many elements as "
               "its dim, got coordinates ",
               c.sizes(), " for dim ", d, " of size ", f.size(d));
    out.push_back(gradient_coords(f, d, c, edge_order));
  }
  return out;
}

namespace {

// dx of the trapezoid rule from sample points: diff of a 1-D x broadcast along dim, or of x.
Tensor sample_steps(const Tensor& y, const Tensor& x, int64_t d, const char* op) {
  if (x.dim() == 1) {
    KILN_CHECK(x.numel() == y.size(d), Runtime, "[", op,
               "] There must be one `x` value for each "
               "sample point, got x ",
               x.sizes(), " and y ", y.sizes(), " along dim ", d);
    return along(diff(x), d, y.dim());
  }
  KILN_CHECK(x.dim() == y.dim() && x.size(d) == y.size(d), Runtime, "[", op,
             "] x must be 1-D or have y's number of dims and size along dim ", d, ", got x ",
             x.sizes(), " and y ", y.sizes());
  return diff(x, 1, d);
}

// Twice the area of each trapezoid along d: (y[i+1] + y[i]) * dx[i].
Tensor halves(const Tensor& y, int64_t d) { return add(part(y, d, 1, 0), part(y, d, 0, -1)); }

int64_t integration_dim(const Tensor& y, int64_t dim, const char* op) {
  KILN_CHECK(y.dim() >= 1, Runtime, "[", op, "] expected y to have at least 1 dimension");
  return wrap_dim(dim, y.dim(), op);
}

}  // namespace

Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim) {
  const int64_t d = integration_dim(y, dim, "trapezoid");
  if (y.size(d) == 0) return sum(mul(y, 0.5), std::vector<int64_t>{d});
  return div(sum(mul(halves(y, d), sample_steps(y, x, d, "trapezoid")), std::vector<int64_t>{d}),
             2.0);
}

Tensor trapezoid(const Tensor& y, Scalar dx, int64_t dim) {
  const int64_t d = integration_dim(y, dim, "trapezoid");
  if (y.size(d) == 0) return sum(mul(y, 0.5), std::vector<int64_t>{d});
  return mul(div(sum(halves(y, d), std::vector<int64_t>{d}), 2.0), dx);
}

Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, int64_t dim) {
  const int64_t d = integration_dim(y, dim, "cumulative_trapezoid");
  if (y.size(d) == 0) return mul(y, 0.5);
  return cumsum(div(mul(halves(y, d), sample_steps(y, x, d, "cumulative_trapezoid")), 2.0), d);
}

Tensor cumulative_trapezoid(const Tensor& y, Scalar dx, int64_t dim) {
  const int64_t d = integration_dim(y, dim, "cumulative_trapezoid");
  if (y.size(d) == 0) return mul(y, 0.5);
  return cumsum(mul(div(halves(y, d), 2.0), dx), d);
}

}  // namespace kiln
