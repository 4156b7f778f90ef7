// Matrix norms, pseudo-inverse, rank, powers and chained products, composed from kiln ops
// (the decompositions of ops/linalg_decomp.cpp among them), so autograd needs no new rules.
#include "ops/linalg_matrix.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/shape.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/linalg.h"
#include "ops/linalg_decomp.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

// The two norm dims, wrapped and checked; the input cast to dtype.
Tensor prepare_matrix_norm(const Tensor& a, std::vector<int64_t>& dims, std::optional<DType> dtype,
                           const char* op) {
  KILN_CHECK(a.dim() >= 2, Runtime, "[", op,
             "] The input tensor A must have at least 2 dimensions, got shape ", a.sizes());
  KILN_CHECK(dims.size() == 2, Runtime, "[", op, "] dim must be a 2-tuple. Got ", dims);
  dims = wrap_dims(dims, a.dim(), op);
  KILN_CHECK(dims[0] != dims[1], Runtime, "[", op, "] dims must be different. Got (", dims[0], ", ",
             dims[1], ")");
  const Tensor x = dtype ? to_dtype(a, *dtype) : a;
  KILN_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, Runtime, "[", op,
             "] Expected a float32 or float64 tensor as input. Got ", x.dtype());
  return x;
}

// r (a reduction of x over both norm dims) with the dims restored as size 1 when keepdim.
Tensor restore_dims(Tensor r, std::vector<int64_t> dims, bool keepdim) {
  if (!keepdim) return r;
  std::sort(dims.begin(), dims.end());
  for (int64_t d : dims) r = unsqueeze(r, d);
  return r;
}

// PyTorch's tolerance rule for pinv / matrix_rank: max(atol, rtol * largest), rtol
// defaulting to eps * max(m, n) unless only a positive atol is given.
Tensor tolerance(const Tensor& largest, const Tensor& a, std::optional<double> atol,
                 std::optional<double> rtol) {
  const double eps = a.dtype() == DType::Float64 ? std::numeric_limits<double>::epsilon()
                                                 : std::numeric_limits<float>::epsilon();
  const double r = rtol                  ? *rtol
                   : (atol && *atol > 0) ? 0.0
                                         : eps * std::max(a.size(-2), a.size(-1));
  return maximum(mul(largest, r), full_like(largest, atol.value_or(0.0)));
}

// Singular values (or |eigenvalues|) with the largest, per matrix, kept as [*, 1].
std::pair<Tensor, Tensor> spectrum(const Tensor& a, bool hermitian) {
  Tensor s = hermitian ? abs(linalg_eigvalsh(a)) : linalg_svdvals(a);
  Tensor largest =
      s.size(-1) == 0 ? zeros({}, s.dtype(), s.device()) : amax(s, std::vector<int64_t>{-1}, true);
  return {s, largest};
}

}  // namespace

Tensor linalg_matrix_norm(const Tensor& a, double ord, std::vector<int64_t> dims, bool keepdim,
                          std::optional<DType> dtype, const char* op) {
  const Tensor x0 = prepare_matrix_norm(a, dims, dtype, op);
  const double o = std::abs(ord);
  KILN_CHECK(o == 1 || o == 2 || std::isinf(o), Runtime, "[", op, "] Order ", ord,
             " not supported.");
  const Tensor x = movedim(x0, dims, {-2, -1});
  Tensor per;  // values whose max (ord > 0) or min is the norm, per matrix
  if (o == 2)
    per = linalg_svdvals(x);
  else
    per = sum(abs(x), std::vector<int64_t>{o == 1 ? -2 : -1});
  const std::vector<int64_t> last{-1};
  Tensor r = ord > 0 ? amax(per, last) : amin(per, last);
  return restore_dims(r, dims, keepdim);
}

Tensor linalg_matrix_norm(const Tensor& a, const std::string& ord, std::vector<int64_t> dims,
                          bool keepdim, std::optional<DType> dtype, const char* op) {
  const Tensor x = prepare_matrix_norm(a, dims, dtype, op);
  if (ord == "fro") return vector_norm(x, 2, dims, keepdim, std::nullopt, op);
  KILN_CHECK(ord == "nuc", Runtime, "[", op, "] Order ", ord, " not supported.");
  Tensor r = sum(linalg_svdvals(movedim(x, dims, {-2, -1})), std::vector<int64_t>{-1});
  return restore_dims(r, dims, keepdim);
}

Tensor linalg_pinv(const Tensor& a, std::optional<double> atol, std::optional<double> rtol,
                   bool hermitian) {
  check_linalg_input(a, "linalg.pinv", hermitian);
  // 1 / s where s is kept; the where() on both sides keeps the gradient finite at s = 0.
  auto invert = [&](const Tensor& s, const Tensor& keep_against) {
    Tensor keep = gt(abs(s), keep_against);
    return where(keep, reciprocal(where(keep, s, ones_like(s))), zeros_like(s));
  };
  if (hermitian) {
    auto [w, v] = linalg_eigh(a);
    Tensor largest = w.size(-1) == 0 ? zeros({}, w.dtype(), w.device())
                                     : amax(abs(w), std::vector<int64_t>{-1}, true);
    Tensor winv = invert(w, tolerance(largest, a, atol, rtol));
    return matmul(mul(v, unsqueeze(winv, -2)), mT(v));
  }
  auto [u, s, vh] = linalg_svd(a, false);
  Tensor largest =
      s.size(-1) == 0 ? zeros({}, s.dtype(), s.device()) : amax(s, std::vector<int64_t>{-1}, true);
  Tensor sinv = invert(s, tolerance(largest, a, atol, rtol));
  return matmul(mul(mT(vh), unsqueeze(sinv, -2)), mT(u));
}

Tensor linalg_matrix_rank(const Tensor& a, std::optional<double> atol, std::optional<double> rtol,
                          bool hermitian) {
  check_linalg_input(a, "linalg.matrix_rank", hermitian);
  auto [s, largest] = spectrum(detach(a), hermitian);
  return sum(gt(s, tolerance(largest, a, atol, rtol)), std::vector<int64_t>{-1});
}

Tensor linalg_matrix_power(const Tensor& a, int64_t n) {
  const char* op = "linalg.matrix_power";
  KILN_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2), Runtime, "[", op,
             "] A must be batches of square matrices, got shape ", a.sizes());
  if (n == 0) return clone(expand(eye(a.size(-1), std::nullopt, a.dtype(), a.device()), a.sizes()));
  Tensor base = n < 0 ? linalg_inv(a) : a;
  int64_t e = n < 0 ? -n : n;
  Tensor result;
  // Repeated squaring: log2(n) products instead of n.
  while (true) {
    if (e & 1) result = result.defined() ? matmul(result, base) : base;
    e >>= 1;
    if (e == 0) break;
    base = matmul(base, base);
  }
  return n == 1 ? clone(result) : result;
}

Tensor linalg_multi_dot(const std::vector<Tensor>& tensors) {
  const char* op = "linalg.multi_dot";
  const size_t count = tensors.size();
  KILN_CHECK(count >= 2, Runtime, "[", op, "] expected at least 2 tensors but got ", count);
  for (size_t i = 0; i < count; ++i) {
    const Tensor& t = tensors[i];
    const bool end = i == 0 || i + 1 == count;
    KILN_CHECK(t.dim() == 2 || (end && t.dim() == 1), Runtime, "[", op, "] tensor ", i,
               " must be 2D", end ? " or 1D" : "", " but got ", t.dim(), "D (shape ", t.sizes(),
               ")");
    KILN_CHECK(t.dtype() == tensors[0].dtype(), Runtime, "[", op,
               "] all tensors must have the same dtype, got ", tensors[0].dtype(), " and ",
               t.dtype(), " (tensor ", i, ")");
  }
  Tensor first = tensors[0].dim() == 1 ? unsqueeze(tensors[0], 0) : tensors[0];
  Tensor last = tensors.back().dim() == 1 ? unsqueeze(tensors.back(), -1) : tensors.back();
  Tensor acc = first;
  for (size_t i = 1; i < count; ++i) {
    const Tensor& next = i + 1 == count ? last : tensors[i];
    KILN_CHECK(acc.size(-1) == next.size(0), Runtime, "[", op, "] tensors ", i - 1, " and ", i,
               " with shapes ", tensors[i - 1].sizes(), " and ", tensors[i].sizes(),
               " cannot be multiplied");
    acc = mm(acc, next);
  }
  if (tensors[0].dim() == 1) acc = squeeze(acc, {{0}});
  if (tensors.back().dim() == 1) acc = squeeze(acc, {{-1}});
  return acc;
}

Tensor linalg_vecdot(const Tensor& x, const Tensor& y, int64_t dim) {
  KILN_CHECK(x.dtype() == y.dtype(), Runtime,
             "[linalg.vecdot] Expected x and y to have the same dtype, but found x of type ",
             x.dtype(), " and y of type ", y.dtype(), " instead");
  return sum(mul(x, y), std::vector<int64_t>{dim});
}

Tensor linalg_cond(const Tensor& a, std::optional<double> p) {
  check_linalg_input(a, "linalg.cond", p && std::abs(*p) != 2);
  if (!p || std::abs(*p) == 2) {
    Tensor s = linalg_svdvals(a);
    const std::vector<int64_t> last{-1};
    Tensor big = amax(s, last), small = amin(s, last);
    return p && *p < 0 ? div(small, big) : div(big, small);
  }
  return mul(linalg_matrix_norm(a, *p, {-2, -1}, false, std::nullopt, "linalg.cond"),
             linalg_matrix_norm(linalg_inv(a), *p, {-2, -1}, false, std::nullopt, "linalg.cond"));
}

Tensor linalg_cond(const Tensor& a, const std::string& p) {
  check_linalg_input(a, "linalg.cond", true);
  return mul(linalg_matrix_norm(a, p, {-2, -1}, false, std::nullopt, "linalg.cond"),
             linalg_matrix_norm(linalg_inv(a), p, {-2, -1}, false, std::nullopt, "linalg.cond"));
}

Tensor cholesky_solve(const Tensor& b, const Tensor& l, bool upper) {
  // A = L L^T: solve L Y = B, then L^T X = Y (U^T U: the other way round).
  const Tensor first = upper ? mT(l) : l;
  Tensor y = linalg_solve_triangular(first, b, false);
  return linalg_solve_triangular(mT(first), y, true);
}

Tensor cholesky_inverse(const Tensor& l, bool upper) {
  check_linalg_input(l, "cholesky_inverse", true);
  return cholesky_solve(expand(eye(l.size(-1), std::nullopt, l.dtype(), l.device()), l.sizes()), l,
                        upper);
}

std::tuple<Tensor, Tensor> triangular_solve(const Tensor& b, const Tensor& a, bool upper,
                                            bool transpose, bool unitriangular) {
  const Tensor t = transpose ? mT(a) : a;
  return {linalg_solve_triangular(t, b, transpose ? !upper : upper, true, unitriangular), clone(a)};
}

}  // namespace kiln
