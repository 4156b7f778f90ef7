// Front ends of the dense decompositions: checks, batching, the CPU kernel call and the
// backward rules (written with kiln ops, so double backward works).
//
// Note [CUDA linear algebra through the CPU]
// kiln has no cuSOLVER bindings yet, so only the CPU backend has the linalg_* kernels. The
// front ends copy every operand to the CPU, run the CPU kernel and copy the results back to
// the input's device: CUDA users get correct results at the price of two transfers and a
// synchronization per call. The backward rules are kiln ops, so they run on the input's
// device except where they call these front ends again. Binding cuSOLVER (getrf/potrf/geqrf/
// gesvdj/syevd) as the CUDA backend's linalg_* entries would remove the round trip.
#include "ops/linalg_decomp.h"

#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "core/shape.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/linalg.h"
#include "ops/linalg_matrix.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

using Grads = std::vector<Tensor>;

namespace {

const Backend& cpu_kernels() { return backend(Device()); }

Shape batch_shape(const Tensor& a) { return Shape(a.sizes().begin(), a.sizes().end() - 2); }

int64_t batch_numel(const Shape& batch) {
  int64_t n = 1;
  for (int64_t s : batch) n *= s;
  return n;
}

// A fresh contiguous CPU copy of a's matrices as [B, rows, cols] (kernels write in place).
Tensor cpu_batch(const Tensor& a) {
  Tensor out = empty(a.sizes(), a.dtype(), Device());
  copy_(out, a);
  return reshape(out, {batch_numel(batch_shape(a)), a.size(-2), a.size(-1)});
}

// A CPU kernel result [B, ...] reshaped to batch + tail and moved to `device`.
Tensor unbatch(const Tensor& t, const Shape& batch, Shape tail, Device device) {
  Shape shape = batch;
  shape.insert(shape.end(), tail.begin(), tail.end());
  return to_device(reshape(t, shape), device);
}

Tensor new_info(int64_t b) { return zeros({b}, DType::Int64, Device()); }

// Throws LinAlgError for the first batch element whose info is nonzero; `what(info)` words
// the failure. With info_out (the *_ex ops), hands info over as int32 instead.
template <typename F>
void check_info(const Tensor& info, const char* op, const Shape& batch, Device device,
                Tensor* info_out, F&& what) {
  if (info_out) {
    *info_out = to_device(reshape(to_dtype(info, DType::Int32), batch), device);
    return;
  }
  const bool batched = !batch.empty();
  const int64_t* p = info.data<int64_t>();
  for (int64_t b = 0; b < info.numel(); ++b) {
    if (p[b] == 0) continue;
    const std::string where = batched ? str_cat("(Batch element ", b, "): ") : std::string();
    throw LinAlgError(str_cat("[", op, "] ", where, what(p[b])));
  }
}

Tensor eye_like_batch(const Tensor& a) {
  return expand(eye(a.size(-1), std::nullopt, a.dtype(), a.device()), a.sizes());
}

// x * s along the last dim (columns) of a matrix batch.
Tensor scale_cols(const Tensor& x, const Tensor& s) { return mul(x, unsqueeze(s, -2)); }
Tensor scale_rows(const Tensor& x, const Tensor& s) { return mul(x, unsqueeze(s, -1)); }

// A X = B operands for the CPU kernels: shapes, device and dtype checked, batch dims
// broadcast, both copied into contiguous CPU batches (ca [B, n, n], cx [B, n, k], the
// right-hand side the kernels overwrite with X).
struct SolveBatches {
  Shape batch;
  Tensor ca, cx;
};

SolveBatches solve_batches(const Tensor& a, const Tensor& b, const char* op) {
  KILN_CHECK(a.size(-1) == b.size(-2), Runtime, "[", op,
             "] Incompatible shapes of A and B for the equation AX = B (", a.sizes(), " and ",
             b.sizes(), ")");
  KILN_CHECK(a.device() == b.device(), Runtime, "[", op,
             "] Expected A and B on the same device, got ", a.device(), " and ", b.device());
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, "[", op,
             "] Expected A and B to have the same dtype, got ", a.dtype(), " and ", b.dtype());
  SolveBatches s;
  s.batch = broadcast_shapes(batch_shape(a), batch_shape(b), op);
  GradModeGuard no_grad(false);
  Shape sa = s.batch, sb = s.batch;
  sa.insert(sa.end(), {a.size(-2), a.size(-1)});
  sb.insert(sb.end(), {b.size(-2), b.size(-1)});
  s.ca = cpu_batch(expand(a, sa));
  s.cx = cpu_batch(expand(b, sb));
  return s;
}

// A X = B for matrices (batch dims broadcast); the autograd primitive behind solve and inv.
Tensor solve_matrix(const Tensor& a, const Tensor& b, const char* op, Tensor* info_out = nullptr) {
  SolveBatches s = solve_batches(a, b, op);
  const Shape& batch = s.batch;
  Tensor x;
  {
    GradModeGuard no_grad(false);
    Tensor info = new_info(s.ca.size(0));
    require_kernel(cpu_kernels().linalg_solve, op, Device())(s.cx, s.ca, info);
    const bool inv = std::string(op) == "linalg.inv";
    check_info(info, op, batch, a.device(), info_out, [&](int64_t i) {
      return inv ? str_cat("The diagonal element ", i,
                           " is zero, the inversion could not be completed because the input "
                           "matrix is singular.")
                 : std::string("The solver failed because the input matrix is singular.");
    });
    x = unbatch(s.cx, batch, {b.size(-2), b.size(-1)}, a.device());
  }
  if (needs_grad({a, b}))
    record(
        "linalg_solve", {a, b}, {x},
        [sa = SavedTensor(a), sx = SavedTensor::output(x, 0)](const Grads& g, Node& self) -> Grads {
          Tensor gb = linalg_solve(mT(sa.unpack()), g[0]);
          return {neg(matmul(gb, mT(sx.unpack(self)))), gb};
        });
  return x;
}

// LU factors for det / slogdet: (diagonal of U [*, n], det(P) [*]).
std::tuple<Tensor, Tensor> lu_diag(const Tensor& a, const char* op) {
  GradModeGuard no_grad(false);
  Tensor lu = cpu_batch(a);
  Tensor sign = empty({lu.size(0)}, a.dtype(), Device());
  Tensor info = new_info(lu.size(0));
  require_kernel(cpu_kernels().linalg_lu, op, Device())(lu, sign, info);
  const Shape batch = batch_shape(a);
  return {unbatch(diagonal(lu, 0, -2, -1), batch, {a.size(-1)}, a.device()),
          unbatch(sign, batch, {}, a.device())};
}

Tensor tri(const Tensor& x, bool upper, int64_t offset = 0) {
  return upper ? triu(x, offset) : tril(x, -offset);
}

}  // namespace

void check_linalg_input(const Tensor& a, const char* op, bool square) {
  KILN_CHECK(a.dim() >= 2, Runtime, "[", op,
             "] The input tensor A must have at least 2 dimensions, got shape ", a.sizes());
  const DType t = a.dtype();
  KILN_CHECK(is_floating(t), Runtime, "[", op, "] Expected a floating point tensor as input. Got ",
             t);
  KILN_CHECK(t == DType::Float32 || t == DType::Float64, Runtime, "[", op,
             "] Low precision dtypes not supported. Got ", t);
  KILN_CHECK(!square || a.size(-1) == a.size(-2), Runtime, "[", op,
             "] A must be batches of square matrices, but they are ", a.size(-2), " by ",
             a.size(-1), " matrices (shape ", a.sizes(), ")");
}

namespace {

Tensor inv_impl(const Tensor& a, Tensor* info_out) {
  check_linalg_input(a, "linalg.inv", true);
  Tensor y;
  {
    GradModeGuard no_grad(false);
    y = solve_matrix(a, eye_like_batch(a), "linalg.inv", info_out);
  }
  if (needs_grad({a}))
    record("linalg_inv", {a}, {y},
           [sy = SavedTensor::output(y, 0)](const Grads& g, Node& self) -> Grads {
             Tensor yt = mT(sy.unpack(self));
             return {neg(matmul(yt, matmul(g[0], yt)))};
           });
  return y;
}

}  // namespace

Tensor linalg_inv(const Tensor& a) { return inv_impl(a, nullptr); }

std::tuple<Tensor, Tensor> linalg_inv_ex(const Tensor& a, bool check_errors) {
  Tensor info;
  Tensor y = inv_impl(a, check_errors ? nullptr : &info);
  if (check_errors) info = zeros(batch_shape(a), DType::Int32, a.device());
  return {y, info};
}

Tensor linalg_solve(const Tensor& a, const Tensor& b, bool left) {
  check_linalg_input(a, "linalg.solve", true);
  KILN_CHECK(b.dim() >= 1, Runtime, "[linalg.solve] B must have at least 1 dimension, got shape ",
             b.sizes());
  if (!left) return mT(linalg_solve(mT(a), mT(b), true));
  // PyTorch's rule: B is a batch of vectors when it is 1-D or A's shape without the last dim.
  const bool vector = b.dim() == 1 || (b.dim() == a.dim() - 1 &&
                                       b.sizes() == Shape(a.sizes().begin(), a.sizes().end() - 1));
  if (vector) return squeeze(solve_matrix(a, unsqueeze(b, -1), "linalg.solve"), {{-1}});
  return solve_matrix(a, b, "linalg.solve");
}

Tensor linalg_det(const Tensor& a) {
  check_linalg_input(a, "linalg.det", true);
  Tensor det;
  {
    GradModeGuard no_grad(false);
    auto [d, sign] = lu_diag(a, "linalg.det");
    det = mul(prod(d, std::vector<int64_t>{-1}), sign);
  }
  if (needs_grad({a}))
    record("linalg_det", {a}, {det},
           [sa = SavedTensor(a), sd = SavedTensor::output(det, 0)](const Grads& g,
                                                                   Node& self) -> Grads {
             Tensor c = unsqueeze(unsqueeze(mul(g[0], sd.unpack(self)), -1), -1);
             return {mul(c, mT(linalg_inv(sa.unpack())))};
           });
  return det;
}

std::tuple<Tensor, Tensor> linalg_slogdet(const Tensor& a) {
  check_linalg_input(a, "linalg.slogdet", true);
  Tensor sign, logabs;
  {
    GradModeGuard no_grad(false);
    auto [d, p] = lu_diag(a, "linalg.slogdet");
    sign = mul(prod(kiln::sign(d), std::vector<int64_t>{-1}), p);
    logabs = sum(log(abs(d)), std::vector<int64_t>{-1});
  }
  if (needs_grad({a}))
    record("linalg_slogdet", {a}, {logabs}, [sa = SavedTensor(a)](const Grads& g, Node&) -> Grads {
      return {mul(unsqueeze(unsqueeze(g[0], -1), -1), mT(linalg_inv(sa.unpack())))};
    });
  return {sign, logabs};
}

Tensor logdet(const Tensor& a) {
  auto [sign, logabs] = linalg_slogdet(a);
  // log(sign) is 0, -inf (singular) or NaN (negative determinant), as torch.logdet.
  return add(logabs, log(sign));
}

namespace {

Tensor cholesky_impl(const Tensor& a, bool upper, const char* op, Tensor* info_out) {
  check_linalg_input(a, op, true);
  if (upper) return mT(cholesky_impl(mT(a), false, op, info_out));
  Tensor l;
  {
    GradModeGuard no_grad(false);
    Tensor cl = cpu_batch(a);
    Tensor info = new_info(cl.size(0));
    require_kernel(cpu_kernels().linalg_cholesky, op, Device())(cl, info);
    check_info(info, op, batch_shape(a), a.device(), info_out, [](int64_t i) {
      return str_cat(
          "The factorization could not be completed because the input is not "
          "positive-definite (the leading minor of order ",
          i, " is not positive-definite).");
    });
    l = unbatch(cl, batch_shape(a), {a.size(-2), a.size(-1)}, a.device());
  }
  if (needs_grad({a}))
    record("linalg_cholesky", {a}, {l},
           [sl = SavedTensor::output(l, 0)](const Grads& g, Node& self) -> Grads {
             // A = L L^T: gA = sym(L^-T Phi(L^T gL) L^-1), Phi keeping the lower triangle
             // with the diagonal halved.
             Tensor L = sl.unpack(self);
             Tensor p = matmul(mT(L), g[0]);
             p = sub(tril(p), mul(tril(triu(p)), 0.5));
             Tensor s = linalg_solve_triangular(mT(L), p, true);
             s = linalg_solve_triangular(L, s, false, false);
             return {mul(add(s, mT(s)), 0.5)};
           });
  return l;
}

}  // namespace

Tensor linalg_cholesky(const Tensor& a, bool upper, const char* op) {
  return cholesky_impl(a, upper, op, nullptr);
}

std::tuple<Tensor, Tensor> linalg_cholesky_ex(const Tensor& a, bool upper, bool check_errors) {
  Tensor info;
  Tensor l = cholesky_impl(a, upper, "linalg.cholesky_ex", check_errors ? nullptr : &info);
  if (check_errors) info = zeros(batch_shape(a), DType::Int32, a.device());
  return {l, info};
}

std::tuple<Tensor, Tensor> linalg_qr(const Tensor& a, const std::string& mode) {
  const char* op = "linalg.qr";
  check_linalg_input(a, op, false);
  KILN_CHECK(mode == "reduced" || mode == "complete" || mode == "r", Runtime, "[", op,
             "] qr received unrecognized mode '", mode,
             "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  const int64_t qcols = mode == "complete" ? m : k;
  Tensor q, r;
  {
    GradModeGuard no_grad(false);
    Tensor ca = cpu_batch(a);
    Tensor cr = empty({ca.size(0), qcols, n}, a.dtype(), Device());
    Tensor cq = mode == "r" ? Tensor() : empty({ca.size(0), m, qcols}, a.dtype(), Device());
    require_kernel(cpu_kernels().linalg_qr, op, Device())(cq, cr, ca);
    r = unbatch(cr, batch_shape(a), {qcols, n}, a.device());
    q = mode == "r" ? empty({0}, a.dtype(), a.device())
                    : unbatch(cq, batch_shape(a), {m, qcols}, a.device());
  }
  if (needs_grad({a})) {
    const bool supported = mode != "r" && m >= n;
    std::vector<Tensor> outs = mode == "r" ? std::vector<Tensor>{r} : std::vector<Tensor>{q, r};
    record("linalg_qr", {a}, outs,
           [sq = mode == "r" ? SavedTensor() : SavedTensor::output(q, 0),
            sr = SavedTensor::output(r, mode == "r" ? 0 : 1), supported,
            mode](const Grads& g, Node& self) -> Grads {
             KILN_CHECK(supported, Runtime,
                        "[linalg.qr] The derivative of linalg.qr is "
                        "implemented for mode='reduced' or 'complete' with m >= n only (mode='",
                        mode, "'); use mode='reduced' to differentiate through linalg.qr");
             // gA = (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q.
             Tensor Q = sq.unpack(self), R = sr.unpack(self);
             Tensor gq = g[0], gr = g[1];
             Tensor M = sub(matmul(R, mT(gr)), matmul(mT(gq), Q));
             Tensor low = tril(M, -1);
             Tensor sym = add(add(low, mT(low)), tril(triu(M)));
             Tensor c = add(gq, matmul(Q, sym));
             return {linalg_solve_triangular(mT(R), c, false, false)};
           });
  }
  return {q, r};
}

std::tuple<Tensor, Tensor, Tensor> linalg_svd(const Tensor& a, bool full_matrices) {
  const char* op = "linalg.svd";
  check_linalg_input(a, op, false);
  const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  const int64_t uc = full_matrices ? m : k, vr = full_matrices ? n : k;
  Tensor u, s, vh;
  {
    GradModeGuard no_grad(false);
    Tensor ca = cpu_batch(a);
    const int64_t B = ca.size(0);
    Tensor cu = empty({B, m, uc}, a.dtype(), Device()), cs = empty({B, k}, a.dtype(), Device());
    Tensor cv = empty({B, vr, n}, a.dtype(), Device());
    require_kernel(cpu_kernels().linalg_svd, op, Device())(cu, cs, cv, ca, full_matrices);
    const Shape batch = batch_shape(a);
    u = unbatch(cu, batch, {m, uc}, a.device());
    s = unbatch(cs, batch, {k}, a.device());
    vh = unbatch(cv, batch, {vr, n}, a.device());
  }
  if (needs_grad({a}))
    record("linalg_svd", {a}, {u, s, vh},
           [su = SavedTensor::output(u, 0), ss = SavedTensor::output(s, 1),
            sv = SavedTensor::output(vh, 2), k, m, n](const Grads& g, Node& self) -> Grads {
             // Real SVD backward for distinct singular values (full matrices use the first
             // k singular vectors, as PyTorch):
             // gA = U [(skew(U^T gU) / E) S + S (skew(V^T gV) / E) + diag(gS)] V^T
             //      + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T),
             // E_jk = S_k^2 - S_j^2 off the diagonal.
             Tensor U = narrow(su.unpack(self), -1, 0, k), S = ss.unpack(self);
             Tensor Vh = narrow(sv.unpack(self), -2, 0, k);
             Tensor gU = narrow(g[0], -1, 0, k), gS = g[1], gVh = narrow(g[2], -2, 0, k);
             Tensor s2 = mul(S, S);
             Tensor e = sub(unsqueeze(s2, -2), unsqueeze(s2, -1));
             Tensor id = eye(k, std::nullopt, S.dtype(), S.device());
             Tensor f = mul(reciprocal(add(e, id)), sub(ones_like(id), id));
             Tensor uhgu = matmul(mT(U), gU), vhgv = matmul(Vh, mT(gVh));
             Tensor inner = add(scale_cols(mul(sub(uhgu, mT(uhgu)), f), S),
                                scale_rows(mul(sub(vhgv, mT(vhgv)), f), S));
             inner = add(inner, mul(unsqueeze(gS, -1), id));
             Tensor ga = matmul(U, matmul(inner, Vh));
             Tensor sinv = reciprocal(S);
             if (m > k) {
               Tensor t = scale_cols(gU, sinv);
               ga = add(ga, matmul(sub(t, matmul(U, matmul(mT(U), t))), Vh));
             }
             if (n > k) {
               Tensor t = scale_rows(gVh, sinv);
               ga = add(ga, matmul(U, sub(t, matmul(matmul(t, mT(Vh)), Vh))));
             }
             return {ga};
           });
  return {u, s, vh};
}

Tensor linalg_svdvals(const Tensor& a) {
  check_linalg_input(a, "linalg.svdvals", false);
  if (!needs_grad({a})) {
    GradModeGuard no_grad(false);
    Tensor ca = cpu_batch(a);
    const int64_t k = std::min(a.size(-2), a.size(-1));
    Tensor cs = empty({ca.size(0), k}, a.dtype(), Device());
    require_kernel(cpu_kernels().linalg_svd, "linalg.svdvals", Device())(Tensor(), cs, Tensor(), ca,
                                                                         false);
    return unbatch(cs, batch_shape(a), {k}, a.device());
  }
  // gA = U diag(gS) V^T; U and V come from a recorded svd so double backward flows
  // through them, and repeated singular values stay harmless here.
  auto [u, s, vh] = linalg_svd(a, false);
  Tensor out = detach(s);
  record("linalg_svdvals", {a}, {out}, [u = u, vh = vh](const Grads& g, Node&) -> Grads {
    return {matmul(scale_cols(u, g[0]), vh)};
  });
  return out;
}

std::tuple<Tensor, Tensor> linalg_eigh(const Tensor& a, const std::string& uplo) {
  const char* op = "linalg.eigh";
  check_linalg_input(a, op, true);
  KILN_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u", Runtime, "[", op,
             "] Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  const int64_t n = a.size(-1);
  Tensor w, v;
  {
    GradModeGuard no_grad(false);
    Tensor ca = cpu_batch(a);
    Tensor cw = empty({ca.size(0), n}, a.dtype(), Device());
    Tensor cv = empty({ca.size(0), n, n}, a.dtype(), Device());
    require_kernel(cpu_kernels().linalg_eigh, op, Device())(cw, cv, ca, uplo == "U" || uplo == "u");
    w = unbatch(cw, batch_shape(a), {n}, a.device());
    v = unbatch(cv, batch_shape(a), {n, n}, a.device());
  }
  if (needs_grad({a}))
    record("linalg_eigh", {a}, {w, v},
           [sw = SavedTensor::output(w, 0), sv = SavedTensor::output(v, 1), n](
               const Grads& g, Node& self) -> Grads {
             // Distinct eigenvalues: gA = V (diag(gL) + skew(V^T gV) / 2 / E) V^T with
             // E_ij = L_j - L_i off the diagonal.
             Tensor L = sw.unpack(self), V = sv.unpack(self);
             Tensor vhgv = matmul(mT(V), g[1]);
             vhgv = mul(sub(vhgv, mT(vhgv)), 0.5);
             Tensor id = eye(n, std::nullopt, L.dtype(), L.device());
             Tensor e = sub(unsqueeze(L, -2), unsqueeze(L, -1));
             Tensor f = mul(reciprocal(add(e, id)), sub(ones_like(id), id));
             Tensor inner = add(mul(vhgv, f), mul(unsqueeze(g[0], -1), id));
             return {matmul(V, matmul(inner, mT(V)))};
           });
  return {w, v};
}

Tensor linalg_eigvalsh(const Tensor& a, const std::string& uplo) {
  if (!needs_grad({a})) {
    GradModeGuard no_grad(false);
    check_linalg_input(a, "linalg.eigvalsh", true);
    KILN_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u", Runtime,
               "[linalg.eigvalsh] Expected UPLO argument to be 'L' or 'U', but got ", uplo);
    Tensor ca = cpu_batch(a);
    Tensor cw = empty({ca.size(0), a.size(-1)}, a.dtype(), Device());
    require_kernel(cpu_kernels().linalg_eigh, "linalg.eigvalsh", Device())(
        cw, Tensor(), ca, uplo == "U" || uplo == "u");
    return unbatch(cw, batch_shape(a), {a.size(-1)}, a.device());
  }
  // gA = V diag(gL) V^T, V from a recorded eigh (as svdvals).
  auto [w, v] = linalg_eigh(a, uplo);
  Tensor out = detach(w);
  record("linalg_eigvalsh", {a}, {out},
         [v = v](const Grads& g, Node&) -> Grads { return {matmul(scale_cols(v, g[0]), mT(v))}; });
  return out;
}

Tensor linalg_solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left,
                               bool unitriangular) {
  const char* op = "linalg.solve_triangular";
  check_linalg_input(a, op, true);
  KILN_CHECK(b.dim() >= 2, Runtime, "[", op,
             "] The input tensor B must have at least 2 dimensions, got shape ", b.sizes());
  if (!left) return mT(linalg_solve_triangular(mT(a), mT(b), !upper, true, unitriangular));
  SolveBatches s = solve_batches(a, b, op);
  Tensor x;
  {
    GradModeGuard no_grad(false);
    require_kernel(cpu_kernels().linalg_solve_triangular, op, Device())(s.cx, s.ca, upper,
                                                                        unitriangular);
    x = unbatch(s.cx, s.batch, {b.size(-2), b.size(-1)}, a.device());
  }
  if (needs_grad({a, b}))
    record("linalg_solve_triangular", {a, b}, {x},
           [sa = SavedTensor(a), sx = SavedTensor::output(x, 0), upper, unitriangular](
               const Grads& g, Node& self) -> Grads {
             // Only a's triangle is read, so its gradient keeps that triangle.
             Tensor gb =
                 linalg_solve_triangular(mT(sa.unpack()), g[0], !upper, true, unitriangular);
             Tensor ga = neg(matmul(gb, mT(sx.unpack(self))));
             return {tri(ga, upper, unitriangular ? 1 : 0), gb};
           });
  return x;
}

std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_lstsq(const Tensor& a, const Tensor& b,
                                                        std::optional<double> rcond,
                                                        std::optional<std::string> driver) {
  const char* op = "linalg.lstsq";
  check_linalg_input(a, op, false);
  const std::string drv = driver.value_or("gelsy");
  KILN_CHECK(drv == "gels" || drv == "gelsy" || drv == "gelsd" || drv == "gelss", Runtime, "[", op,
             "] parameter `driver` should be one of (gels, gelsy, gelsd, gelss), got ", drv);
  KILN_CHECK(b.dim() >= 1, Runtime, "[", op, "] B must have at least 1 dimension, got shape ",
             b.sizes());
  const bool vector = b.dim() == a.dim() - 1;
  const Tensor bm = vector ? unsqueeze(b, -1) : b;
  KILN_CHECK(bm.dim() >= 2 && a.size(-2) == bm.size(-2), Runtime, "[", op,
             "] Incompatible shapes of A and B for the equation AX = B (", a.sizes(), " and ",
             b.sizes(), ")");
  KILN_CHECK(a.dtype() == b.dtype() && a.device() == b.device(), Runtime, "[", op,
             "] Expected A and B to have the same dtype and device, got ", a.dtype(), " on ",
             a.device(), " and ", b.dtype(), " on ", b.device());
  const int64_t m = a.size(-2), n = a.size(-1), k = bm.size(-1);
  const double eps = a.dtype() == DType::Float64 ? std::numeric_limits<double>::epsilon()
                                                 : std::numeric_limits<float>::epsilon();
  const double rc = rcond.value_or(eps * std::max(m, n));
  const bool use_svd = drv == "gelsd" || drv == "gelss";
  const Shape batch = broadcast_shapes(batch_shape(a), batch_shape(bm), op);
  Tensor x, rank, sv;
  bool full_rank = true;
  {
    GradModeGuard no_grad(false);
    Shape sa = batch, sb = batch;
    sa.insert(sa.end(), {m, n});
    sb.insert(sb.end(), {m, k});
    Tensor ca = cpu_batch(expand(a, sa)), cb = cpu_batch(expand(bm, sb));
    const int64_t B = ca.size(0);
    Tensor cx = empty({B, n, k}, a.dtype(), Device()), cr = empty({B}, DType::Int64, Device());
    Tensor cs = empty({B, std::min(m, n)}, a.dtype(), Device());
    require_kernel(cpu_kernels().linalg_lstsq, op, Device())(cx, cr, cs, ca, cb, rc, use_svd);
    for (int64_t i = 0; i < B; ++i) full_rank = full_rank && cr.data<int64_t>()[i] == n;
    x = unbatch(cx, batch, {n, k}, a.device());
    rank =
        drv == "gels" ? empty({0}, DType::Int64, a.device()) : unbatch(cr, batch, {}, a.device());
    sv = use_svd ? unbatch(cs, batch, {std::min(m, n)}, a.device())
                 : empty({0}, a.dtype(), a.device());
  }
  // The gradient is pinv(A)'s: exact where A has full rank.
  if (needs_grad({a, b})) x = matmul(linalg_pinv(a), bm);
  // Residuals only for tall full-rank systems and drivers other than gelsy, as PyTorch.
  Tensor residuals = empty({0}, a.dtype(), a.device());
  if (m > n && drv != "gelsy" && (full_rank || drv == "gels")) {
    Tensor r = sub(matmul(a, x), bm);
    residuals = sum(mul(r, r), std::vector<int64_t>{-2});
  }
  if (vector) x = squeeze(x, {{-1}});
  return {x, residuals, rank, sv};
}

}  // namespace kiln
