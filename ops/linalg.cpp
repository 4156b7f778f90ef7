#include "ops/linalg.h"

#include <algorithm>

#include "autograd/function.h"
#include "core/error.h"
#include "core/promotion.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/export_trace.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

void check_matmul_dtypes(const Tensor& a, const Tensor& b, const char* op) {
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, "[", op,
             "] expected both operands to have the same dtype, but got ", a.dtype(), " and ",
             b.dtype());
  KILN_CHECK(is_floating(a.dtype()), NotImplemented, "[", op,
             "] not implemented for dtype ", a.dtype(), "; convert with .float()");
}

// GEMM kernels need each matrix to have a unit stride in one of its two dims.
Tensor gemm_ready(const Tensor& t) {
  const int64_t s1 = t.stride(1), s2 = t.stride(2);
  if ((s2 == 1 && s1 >= t.size(2) && s1 > 0) || (s1 == 1 && s2 >= t.size(1) && s2 > 0)) return t;
  return contiguous(t);
}

// Whether t's matrices are stored column by column (a transposed view).
bool column_major(const Tensor& t) {
  return t.size(1) > 1 && t.size(2) > 1 && t.stride(1) == 1 && t.stride(2) != 1;
}

}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b) {
  tracing::OpScope scope("bmm");
  if (auto ac = autocast_args("bmm", {a, b})) return scope.out(bmm((*ac)[0], (*ac)[1]), a, b);
  KILN_CHECK(a.dim() == 3 && b.dim() == 3, Runtime, "[bmm] batch1 and batch2 must be 3-D tensors, "
             "got shapes ", a.sizes(), " and ", b.sizes());
  KILN_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), Runtime,
             "[bmm] shapes ", a.sizes(), " and ", b.sizes(), " cannot be multiplied (batch ",
             a.size(0), " vs ", b.size(0), ", inner ", a.size(2), " vs ", b.size(1), ")");
  check_matmul_dtypes(a, b, "bmm");
  Device dev = common_device({a, b}, "bmm");
  Tensor out = make_tensor({a.size(0), a.size(1), b.size(2)}, a.dtype(), dev);
  if (out.numel() > 0) {
    if (a.size(2) == 0) {
      backend(dev).fill(out, 0);
    } else {
      require_kernel(backend(dev).bmm, "bmm", dev)(out, gemm_ready(detach(a)), gemm_ready(detach(b)));
    }
  }
  if (needs_grad({a, b})) {
    // Each gradient is computed only when its input needs one, and laid out like that input:
    // the gradient of a transposed view (linear's weight.t()) comes out transposed, so the
    // view's own backward hands the weight a contiguous gradient with no copy (cuBLAS reads
    // either layout for free).
    const bool a_t = column_major(a), b_t = column_major(b);
    SavedTensor sa(a), sb(b);
    record("bmm", {a, b}, {out}, [sa, sb, a_t, b_t](const Grads& g, Node& self) -> Grads {
      Tensor ga, gb;
      if (self.next_edges[0].valid()) {
        ga = a_t ? mT(bmm(sb.unpack(), mT(g[0]))) : bmm(g[0], mT(sb.unpack()));
      }
      if (self.next_edges[1].valid()) {
        gb = b_t ? mT(bmm(mT(g[0]), sa.unpack())) : bmm(mT(sa.unpack()), g[0]);
      }
      return {ga, gb};
    });
  }
  return scope.out(out, a, b);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  tracing::OpScope scope("mm");
  if (auto ac = autocast_args("mm", {a, b})) return scope.out(mm((*ac)[0], (*ac)[1]), a, b);
  KILN_CHECK(a.dim() == 2 && b.dim() == 2, Runtime, "[mm] expected 2-D tensors, got shapes ",
             a.sizes(), " and ", b.sizes());
  KILN_CHECK(a.size(1) == b.size(0), Runtime, "[mm] mat1 and mat2 shapes cannot be multiplied (",
             a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  return scope.out(squeeze(bmm(unsqueeze(a, 0), unsqueeze(b, 0)), std::vector<int64_t>{0}), a, b);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  tracing::OpScope scope("matmul");
  if (auto ac = autocast_args("matmul", {a, b})) return scope.out(matmul((*ac)[0], (*ac)[1]), a, b);
  KILN_CHECK(a.dim() > 0 && b.dim() > 0, Runtime,
             "[matmul] both arguments to matmul need to be at least 1D, but they are ", a.dim(),
             "D and ", b.dim(), "D");
  if (a.dim() == 1 && b.dim() == 1) return scope.out(dot(a, b), a, b);
  if (a.dim() == 2 && b.dim() == 2) return scope.out(mm(a, b), a, b);
  if (a.dim() == 2 && b.dim() == 1) return scope.out(mv(a, b), a, b);
  if (a.dim() >= 3 && b.dim() <= 2) {
    // [..., m, k] @ [k, n] (or [k]) is one GEMM over all rows, as in PyTorch: broadcasting b
    // over a's batch would run a batched GEMM against an expanded weight, whose gradient is a
    // [batch, k, n] tensor summed afterwards.
    KILN_CHECK(a.size(-1) == b.size(0), Runtime, "[matmul] shapes ", a.sizes(), " and ",
               b.sizes(), " cannot be multiplied (", a.size(-1), " vs ", b.size(0),
               " in the contracted dimension)");
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);
    Tensor rows = reshape(a, {checked_numel(out_shape, "matmul"), a.size(-1)});
    if (b.dim() == 1) return scope.out(reshape(mv(rows, b), out_shape), a, b);
    out_shape.push_back(b.size(1));
    return scope.out(reshape(mm(rows, b), out_shape), a, b);
  }
  // Promote vectors to matrices, broadcast the batch dims, multiply, undo.
  Tensor x = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor y = b.dim() == 1 ? unsqueeze(b, 1) : b;
  const int64_t m = x.size(-2), k = x.size(-1), k2 = y.size(-2), n = y.size(-1);
  KILN_CHECK(k == k2, Runtime, "[matmul] shapes ", a.sizes(), " and ", b.sizes(),
             " cannot be multiplied (", k, " vs ", k2, " in the contracted dimension)");
  Shape xb(x.sizes().begin(), x.sizes().end() - 2), yb(y.sizes().begin(), y.sizes().end() - 2);
  Shape batch = broadcast_shapes(xb, yb, "matmul");
  int64_t nb = checked_numel(batch, "matmul");
  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(m);
  if (b.dim() > 1) out_shape.push_back(n);
  if (checked_numel(yb, "matmul") == 1) {
    // b is one matrix with size-1 batch dims ([1, k, n]): x's rows fold into one GEMM as above,
    // instead of a batched GEMM against b broadcast over x's batch.
    Tensor rows = reshape(x, {checked_numel(xb, "matmul") * m, k});
    return scope.out(reshape(mm(rows, reshape(y, {k, n})), out_shape), a, b);
  }
  Shape xs = batch, ys = batch;
  xs.insert(xs.end(), {m, k});
  ys.insert(ys.end(), {k, n});
  Tensor out = bmm(reshape(expand(x, xs), {nb, m, k}), reshape(expand(y, ys), {nb, k, n}));
  return scope.out(reshape(out, out_shape), a, b);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  if (auto ac = autocast_args("dot", {a, b})) return dot((*ac)[0], (*ac)[1]);
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, Runtime,
             "[dot] 1D tensors expected, but got ", a.dim(), "D and ", b.dim(), "D tensors");
  KILN_CHECK(a.size(0) == b.size(0), Runtime, "[dot] inconsistent tensor size, expected tensor [",
             a.size(0), "] and src [", b.size(0), "] to have the same number of elements");
  return reshape(bmm(reshape(a, {1, 1, a.size(0)}), reshape(b, {1, b.size(0), 1})), {});
}

Tensor mv(const Tensor& a, const Tensor& v) {
  if (auto ac = autocast_args("mv", {a, v})) return mv((*ac)[0], (*ac)[1]);
  KILN_CHECK(a.dim() == 2 && v.dim() == 1, Runtime, "[mv] expected a matrix and a vector, got ",
             a.sizes(), " and ", v.sizes());
  KILN_CHECK(a.size(1) == v.size(0), Runtime, "[mv] size mismatch, got input (", a.size(0), "x",
             a.size(1), ") and vec (", v.size(0), ")");
  return squeeze(mm(a, unsqueeze(v, 1)), std::vector<int64_t>{1});
}

Tensor outer(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, Runtime, "[outer] expected 1-D tensors, got ",
             a.sizes(), " and ", b.sizes());
  return mul(unsqueeze(a, 1), unsqueeze(b, 0));
}

namespace {

// beta * input + alpha * product, the tail of the add*mm family. The input broadcasts to the
// product's shape (never the other way); beta == 0 ignores it entirely, so NaNs in it do not
// propagate, as in PyTorch.
Tensor add_scaled_product(const char* op, const Tensor& input, const Tensor& prod, Scalar beta,
                          Scalar alpha) {
  KILN_CHECK(broadcast_shapes(input.sizes(), prod.sizes(), op) == prod.sizes(), Runtime, "[", op,
             "] input of shape ", input.sizes(), " cannot be broadcast to the product shape ",
             prod.sizes());
  // No promotion, as in PyTorch: a float32 input beside float64 matrices is a mistake.
  KILN_CHECK(input.dtype() == prod.dtype(), Runtime, "[", op, "] input and the product must have "
             "the same dtype, but got ", scalar_type_name(input.dtype()), " and ",
             scalar_type_name(prod.dtype()));
  Tensor scaled = alpha.to_double() == 1.0 ? prod : mul(prod, alpha);
  if (beta.to_double() == 0.0) return scaled;
  return add(beta.to_double() == 1.0 ? input : mul(input, beta), scaled);
}

// baddbmm / addbmm operands: two 3-D batches whose products line up.
void check_batches(const char* op, const Tensor& b1, const Tensor& b2) {
  KILN_CHECK(b1.dim() == 3 && b2.dim() == 3, Runtime, "[", op, "] batch1 and batch2 must be 3-D "
             "tensors, got shapes ", b1.sizes(), " and ", b2.sizes());
  KILN_CHECK(b1.size(0) == b2.size(0) && b1.size(2) == b2.size(1), Runtime, "[", op,
             "] batch1 of shape ", b1.sizes(), " and batch2 of shape ", b2.sizes(),
             " cannot be multiplied (batch ", b1.size(0), " vs ", b2.size(0), ", inner ",
             b1.size(2), " vs ", b2.size(1), ")");
}

}  // namespace

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, Scalar beta, Scalar alpha) {
  if (auto ac = autocast_args("addmm", {input, m1, m2}))
    return addmm((*ac)[0], (*ac)[1], (*ac)[2], beta, alpha);
  return add_scaled_product("addmm", input, mm(m1, m2), beta, alpha);
}

Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta,
               Scalar alpha) {
  if (auto ac = autocast_args("baddbmm", {input, b1, b2}))
    return baddbmm((*ac)[0], (*ac)[1], (*ac)[2], beta, alpha);
  check_batches("baddbmm", b1, b2);
  return add_scaled_product("baddbmm", input, bmm(b1, b2), beta, alpha);
}

Tensor addbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta,
              Scalar alpha) {
  if (auto ac = autocast_args("addbmm", {input, b1, b2}))
    return addbmm((*ac)[0], (*ac)[1], (*ac)[2], beta, alpha);
  check_batches("addbmm", b1, b2);
  // The sum over the batch of b1[i] @ b2[i] is one GEMM over the batch-and-inner dim:
  // [n, B * m] @ [B * m, p].
  const int64_t batch = b1.size(0), n = b1.size(1), m = b1.size(2), p = b2.size(2);
  Tensor lhs = reshape(permute(b1, {1, 0, 2}), {n, batch * m});
  Tensor rhs = reshape(b2, {batch * m, p});
  return add_scaled_product("addbmm", input, mm(lhs, rhs), beta, alpha);
}

Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, Scalar beta,
             Scalar alpha) {
  if (auto ac = autocast_args("addmv", {input, mat, vec}))
    return addmv((*ac)[0], (*ac)[1], (*ac)[2], beta, alpha);
  return add_scaled_product("addmv", input, mv(mat, vec), beta, alpha);
}

Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, Scalar beta,
            Scalar alpha) {
  if (auto ac = autocast_args("addr", {input, vec1, vec2}))
    return addr((*ac)[0], (*ac)[1], (*ac)[2], beta, alpha);
  return add_scaled_product("addr", input, outer(vec1, vec2), beta, alpha);
}

Tensor inner(const Tensor& a, const Tensor& b) {
  if (a.dim() == 0 || b.dim() == 0) return mul(a, b);
  const int64_t k = a.size(-1);
  KILN_CHECK(k == b.size(-1), Runtime, "[inner] the last dimension must match on both input "
             "tensors but got shapes ", a.sizes(), " and ", b.sizes());
  const Shape rows_a(a.sizes().begin(), a.sizes().end() - 1);
  const Shape rows_b(b.sizes().begin(), b.sizes().end() - 1);
  Shape shape = rows_a;
  shape.insert(shape.end(), rows_b.begin(), rows_b.end());
  // Explicit row counts: -1 cannot be inferred when k == 0.
  return reshape(mm(reshape(a, {checked_numel(rows_a, "inner"), k}),
                    t(reshape(b, {checked_numel(rows_b, "inner"), k}))),
                 shape);
}

Tensor diag(const Tensor& x, int64_t k) {
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, Runtime, "[diag] expected a 1-D or 2-D tensor, got "
             "shape ", x.sizes());
  // A copy, as in PyTorch: diagonal() is the view.
  if (x.dim() == 2) return clone(diagonal(x, k));
  const int64_t n = x.size(0) + (k >= 0 ? k : -k);
  Tensor out = zeros({n, n}, x.dtype(), x.device());
  // Writing through the view makes `out` differentiable in x (Note [In-place on views]).
  copy_(diagonal(out, k), x);
  return out;
}

Tensor trace(const Tensor& x) {
  KILN_CHECK(x.dim() == 2, Runtime, "[trace] expected a matrix, but got tensor of shape ",
             x.sizes());
  return sum(diagonal(x));
}

Tensor kron(const Tensor& a, const Tensor& b) {
  // Pad to one rank r, interleave as a -> [a0, 1, a1, 1, ...] and b -> [1, b0, 1, b1, ...];
  // their broadcast product holds a_i * b_j at [i0, j0, i1, j1, ...], which merges into
  // [a0 * b0, a1 * b1, ...] with a reshape.
  const int64_t r = std::max(a.dim(), b.dim());
  Shape sa(r - a.dim(), 1), sb(r - b.dim(), 1);
  sa.insert(sa.end(), a.sizes().begin(), a.sizes().end());
  sb.insert(sb.end(), b.sizes().begin(), b.sizes().end());
  Shape ia, ib, out;
  for (int64_t i = 0; i < r; ++i) {
    ia.insert(ia.end(), {sa[i], 1});
    ib.insert(ib.end(), {1, sb[i]});
    int64_t size;
    KILN_CHECK(!mul_overflows(sa[i], sb[i], &size), Runtime,
               "[kron] Storage size calculation overflowed for shapes ", a.sizes(), " and ",
               b.sizes());
    out.push_back(size);
  }
  return reshape(mul(reshape(a, ia), reshape(b, ib)), out);
}

Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim, const char* op) {
  KILN_CHECK(a.dim() == b.dim(), Runtime, "[", op, "] inputs must have the same number of "
             "dimensions, got shapes ", a.sizes(), " and ", b.sizes());
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, "[", op, "] expected input and other to have the "
             "same dtype, got ", scalar_type_name(a.dtype()), " and ",
             scalar_type_name(b.dtype()));
  const int64_t d = wrap_dim(dim, a.dim(), op);
  KILN_CHECK(a.size(d) == 3 && b.size(d) == 3, Runtime, "[", op, "] inputs dimension ", d,
             " must have length 3. Got ", a.size(d), " and ", b.size(d), " (shapes ", a.sizes(),
             " and ", b.sizes(), ")");
  broadcast_shapes(a.sizes(), b.sizes(), op);
  // Component i of a x b is a[i+1] b[i+2] - a[i+2] b[i+1] (indices mod 3): rolling by -1
  // and -2 lines those components up, so the whole product is two broadcast products.
  auto shifted = [d](const Tensor& t, int64_t by) { return roll(t, {-by}, {d}); };
  return sub(mul(shifted(a, 1), shifted(b, 2)), mul(shifted(a, 2), shifted(b, 1)));
}

Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim) {
  // Only torch.cross is on PyTorch's autocast promote list, not linalg.cross.
  if (auto ac = autocast_args("cross", {a, b})) return cross((*ac)[0], (*ac)[1], dim);
  if (dim) return linalg_cross(a, b, *dim, "cross");
  for (int64_t i = 0; i < a.dim(); ++i)
    if (a.size(i) == 3) return linalg_cross(a, b, i, "cross");
  fail(ErrorKind::Runtime, "[cross] no dimension of size 3 in input (shape ", a.sizes(), ")");
}

}  // namespace kiln
