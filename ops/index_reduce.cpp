#include "ops/index_reduce.h"

#include "autograd/function.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/binary.h"
#include "ops/conv.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/sort.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;
enum class Reduce { Sum, Prod, Mean, Amax, Amin };

Reduce parse_reduce(const std::string& r, const char* op, bool allow_sum) {
  if (r == "sum" && allow_sum) return Reduce::Sum;
  if (r == "prod") return Reduce::Prod;
  if (r == "mean") return Reduce::Mean;
  if (r == "amax") return Reduce::Amax;
  if (r == "amin") return Reduce::Amin;
  fail(ErrorKind::Runtime, "[", op, "] reduce argument must be one of ",
       allow_sum ? "sum, prod, mean, amax or amin" : "prod, mean, amax or amin", ", got '", r, "'");
}

// A 0-d tensor's value on the host, for the index bounds check.
int64_t host_int(const Tensor& t) {
  GradModeGuard no_grad(false);
  return contiguous(to_device(to_dtype(t, DType::Int64), Device())).data<int64_t>()[0];
}

void check_args(const Tensor& self, int64_t d, const Tensor& index, const Tensor& src,
                const char* op) {
  KILN_CHECK(index.dtype() == DType::Int64, Runtime, "[", op,
             "] Expected dtype int64 for index, got ", index.dtype());
  KILN_CHECK(self.dtype() == src.dtype(), Runtime, "[", op,
             "] expected self and src to have the same dtype, but got ", self.dtype(),
             " for self and ", src.dtype(), " for src");
  KILN_CHECK(self.dim() == index.dim() && src.dim() == index.dim(), Runtime, "[", op,
             "] Index tensor must have the same number of dimensions as self and src, got "
             "index ",
             index.sizes(), ", self ", self.sizes(), " and src ", src.sizes());
  for (int64_t j = 0; j < index.dim(); ++j)
    KILN_CHECK(index.size(j) <= src.size(j) && (j == d || index.size(j) <= self.size(j)), Runtime,
               "[", op, "] Size does not match at dimension ", j, ": index ", index.sizes(),
               " must be no larger than src ", src.sizes(), " and (apart from dim ", d, ") self ",
               self.sizes());
  if (index.numel() == 0) return;
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  const int64_t lo = host_int(amin(index)), hi = host_int(amax(index));
  KILN_CHECK(lo >= 0 && hi < size, Runtime, "[", op, "] index ", lo < 0 ? lo : hi,
             " is out of bounds for dimension ", d, " with size ", size);
}

// The leading index-shaped block of src, which is all that scatter reads.
Tensor leading(const Tensor& src, const Tensor& index) {
  Tensor s = src;
  for (int64_t j = 0; j < index.dim(); ++j) s = narrow(s, j, 0, index.size(j));
  return s;
}

// out (contiguous) with each addressed position set to the largest (take_last) or smallest
// value sent to it: values are sorted, then stably grouped by target, and one element per
// group is written, so no write order matters.
Tensor scatter_extreme(const Tensor& self, int64_t d, const Tensor& index, const Tensor& src,
                       bool is_max, bool include_self) {
  // Floats reduce as max(-x) for amin so NaN (sorted last) still wins, as in PyTorch.
  const bool negate = !is_max && is_floating(self.dtype());
  Tensor v = reshape(contiguous(src), {src.numel()});
  if (negate) v = neg(v);
  // Each element's target as a flat position: gather reads self-shaped position ids.
  Tensor ids = reshape(arange(Scalar(int64_t(0)), Scalar(self.numel()), Scalar(int64_t(1)),
                              DType::Int64, self.device()),
                       self.dim() == 0 ? Shape{1} : self.sizes());
  Tensor k =
      reshape(gather(ids, d, self.dim() == 0 ? reshape(index, {1}) : index), {index.numel()});
  Tensor o1 = argsort(v, 0, false, true);
  v = index_select(v, 0, o1);
  k = index_select(k, 0, o1);
  Tensor o2 = argsort(k, 0, false, true);
  v = index_select(v, 0, o2);
  k = index_select(k, 0, o2);
  const int64_t n = k.numel();
  const bool take_last = is_max || negate;
  Tensor edge = ne(narrow(k, 0, 1, n - 1), narrow(k, 0, 0, n - 1));
  Tensor yes = ones({1}, DType::Bool, k.device());
  Tensor pick = take_last ? cat({edge, yes}, 0) : cat({yes, edge}, 0);
  Tensor keys = masked_select(k, pick), vals = masked_select(v, pick);
  if (negate) vals = neg(vals);
  Tensor flat = reshape(clone(contiguous(self)), {self.numel()});
  if (include_self) {
    Tensor old = index_select(flat, 0, keys);
    vals = is_max ? maximum(vals, old) : minimum(vals, old);
  }
  return reshape(index_put(flat, {keys}, vals), self.sizes());
}

// The number of contributions each position of self receives (self itself counted when
// include_self, or when nothing is scattered there), in self's dtype.
Tensor contributions(const Tensor& self, int64_t d, const Tensor& index, bool include_self) {
  Tensor base = ones_like(self);
  if (!include_self) base = scatter(base, d, index, Scalar(0));
  return scatter_add(base, d, index, ones(index.sizes(), self.dtype(), self.device()));
}

Tensor forward(const Tensor& self, int64_t d, const Tensor& index, const Tensor& src, Reduce r,
               bool include_self) {
  GradModeGuard no_grad(false);
  switch (r) {
    case Reduce::Sum:
      return scatter_add(include_self ? self : scatter(self, d, index, Scalar(0)), d, index, src);
    case Reduce::Prod:
      return scatter(include_self ? self : scatter(self, d, index, Scalar(1)), d, index, src,
                     std::string("multiply"));
    case Reduce::Mean: {
      Tensor s =
          scatter_add(include_self ? self : scatter(self, d, index, Scalar(0)), d, index, src);
      Tensor n = contributions(self, d, index, include_self);
      return is_floating(self.dtype()) ? div(s, n) : floor_divide(s, n);
    }
    case Reduce::Amax:
    case Reduce::Amin:
      return scatter_extreme(self, d, index, src, r == Reduce::Amax, include_self);
  }
  return Tensor();
}

// Gradients of scatter_reduce's prod: g * (product of the other contributors), which is
// out / x unless x is zero; a zero gets the product of the nonzero others when it is the
// only zero of its position.
Grads prod_grads(const Tensor& g, const Tensor& self, int64_t d, const Tensor& index,
                 const Tensor& src, const Tensor& out, bool include_self) {
  Tensor zero = zeros({}, self.dtype(), self.device()), one = ones({}, self.dtype(), self.device());
  Tensor self_zero = eq(self, zero), src_zero = eq(src, zero);
  Tensor zeros_at = scatter_add(include_self ? to_dtype(self_zero, self.dtype())
                                             : scatter(zeros_like(self), d, index, Scalar(0)),
                                d, index, to_dtype(src_zero, self.dtype()));
  Tensor others = forward(where(self_zero, one, self), d, index, where(src_zero, one, src),
                          Reduce::Prod, include_self);
  // Without self, positions that receive src get no self gradient and the rest pass g on.
  Tensor gs = scatter(g, d, index, Scalar(0));
  if (include_self) {
    Tensor gs_nz = div(mul(g, out), where(self_zero, one, self));
    gs = where(self_zero, where(eq(zeros_at, one), mul(g, others), zero), gs_nz);
  }
  Tensor g_at = gather(g, d, index), out_at = gather(out, d, index);
  Tensor gr_nz = div(mul(g_at, out_at), where(src_zero, one, src));
  Tensor gr_z =
      where(eq(gather(zeros_at, d, index), one), mul(g_at, gather(others, d, index)), zero);
  return {gs, where(src_zero, gr_z, gr_nz)};
}

}  // namespace

Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self) {
  const char* op = "scatter_reduce";
  Reduce r = parse_reduce(reduce, op, true);
  const int64_t d = wrap_dim(dim, self.dim(), op);
  check_args(self, d, index, src, op);
  if (index.numel() == 0) return clone(self);
  Tensor s = leading(src, index);
  Tensor out = forward(self, d, index, s, r, include_self);
  if (!needs_grad({self, src})) return out;
  const Shape src_shape = src.sizes();
  record("scatter_reduce", {self, src}, {out},
         [r, d, index, include_self, src_shape, ss = SavedTensor(self), sr = SavedTensor(s),
          so = SavedTensor::output(out, 0)](const Grads& gs, Node& self_node) -> Grads {
           const Tensor& g = gs[0];
           Tensor x = ss.unpack(self_node), y = sr.unpack(self_node);
           Tensor gx, gy;
           if (r == Reduce::Sum) {
             gx = include_self ? g : scatter(g, d, index, Scalar(0));
             gy = gather(g, d, index);
           } else if (r == Reduce::Mean) {
             Tensor n = contributions(x, d, index, include_self);
             Tensor gn = div(g, n);
             gx = include_self ? gn : scatter(g, d, index, Scalar(0));
             gy = gather(gn, d, index);
           } else if (r == Reduce::Prod) {
             Grads pg = prod_grads(g, x, d, index, y, so.unpack(self_node), include_self);
             gx = pg[0];
             gy = pg[1];
           } else {
             // Ties share the gradient evenly, between self and src alike.
             Tensor out = so.unpack(self_node);
             Tensor self_hit = eq(x, out);
             if (!include_self) {
               Tensor untouched = scatter(ones_like(x), d, index, Scalar(0));
               self_hit = logical_and(self_hit, ne(untouched, zeros({}, x.dtype(), x.device())));
             }
             Tensor src_hit = eq(y, gather(out, d, index));
             Tensor n =
                 scatter_add(to_dtype(self_hit, g.dtype()), d, index, to_dtype(src_hit, g.dtype()));
             Tensor gn = div(g, n);
             gx = where(self_hit, gn, zeros({}, g.dtype(), g.device()));
             gy = where(src_hit, gather(gn, d, index), zeros({}, g.dtype(), g.device()));
           }
           if (gy.sizes() != src_shape) {
             // Only src's leading block contributed: pad its gradient with zeros.
             Dims pads;
             for (int64_t j = gy.dim() - 1; j >= 0; --j) {
               pads.push_back(0);
               pads.push_back(src_shape[j] - gy.size(j));
             }
             gy = pad(gy, pads);
           }
           return {gx, gy};
         });
  return out;
}

const Tensor& scatter_reduce_(const Tensor& self, int64_t dim, const Tensor& index,
                              const Tensor& src, const std::string& reduce, bool include_self) {
  return assign_inplace(self, {src}, "scatter_reduce_", [&](const Tensor& s) {
    return scatter_reduce(s, dim, index, src, reduce, include_self);
  });
}

Tensor index_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                    const std::string& reduce, bool include_self) {
  const char* op = "index_reduce";
  parse_reduce(reduce, op, false);
  const int64_t d = wrap_dim(dim, self.dim(), op);
  KILN_CHECK(index.dim() <= 1 && (index.dtype() == DType::Int64 || index.dtype() == DType::Int32),
             Index, "[", op, "] index must be a 1-D int64 or int32 tensor, got ", index.sizes(),
             " of dtype ", index.dtype());
  KILN_CHECK(source.dim() == self.dim(), Index, "[", op, "] source ", source.sizes(),
             " must have as many dimensions as self ", self.sizes());
  const int64_t len = index.numel();
  for (int64_t j = 0; j < self.dim(); ++j)
    KILN_CHECK(j == d ? source.size(j) == len : source.size(j) == self.size(j), Runtime, "[", op,
               "] source ", source.sizes(), " must match self ", self.sizes(), " except along dim ",
               d, ", where it must have index's length ", len);
  if (len > 0) {
    const int64_t size = self.dim() == 0 ? 1 : self.size(d);
    const int64_t lo = host_int(amin(index)), hi = host_int(amax(index));
    KILN_CHECK(lo >= 0 && hi < size, Index, "[", op, "] index out of range in self: index ",
               lo < 0 ? lo : hi, " for dimension ", d, " with size ", size);
  }
  if (self.dim() == 0)
    return scatter_reduce(self, 0, reshape(to_dtype(index, DType::Int64), {}), source, reduce,
                          include_self);
  Shape s(self.dim(), 1);
  s[d] = len;
  Tensor idx = expand(reshape(to_dtype(index, DType::Int64), s), source.sizes());
  return scatter_reduce(self, d, idx, source, reduce, include_self);
}

const Tensor& index_reduce_(const Tensor& self, int64_t dim, const Tensor& index,
                            const Tensor& source, const std::string& reduce, bool include_self) {
  return assign_inplace(self, {source}, "index_reduce_", [&](const Tensor& s) {
    return index_reduce(s, dim, index, source, reduce, include_self);
  });
}

namespace {

int64_t count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Tensor masked_scatter_to(const Tensor& self, const Tensor& mask, const Tensor& source,
                         const Shape& shape, const char* op) {
  KILN_CHECK(mask.dtype() == DType::Bool, Runtime, "[", op,
             "] only supports boolean masks, but got mask with dtype ", mask.dtype());
  KILN_CHECK(self.dtype() == source.dtype(), Runtime, "[", op,
             "] expected self and source to have same dtypes but got ", self.dtype(), " and ",
             source.dtype());
  Tensor m = reshape(contiguous(expand(mask, shape)), {count(shape)});
  Tensor nz = nonzero(m);
  Tensor pos = reshape(nz, {nz.size(0)});
  const int64_t k = pos.numel();
  KILN_CHECK(source.numel() >= k, Runtime, "[", op, "] Number of elements of source ",
             source.numel(), " < number of ones in mask ", k);
  Tensor flat = reshape(expand(self, shape), {count(shape)});
  Tensor vals = narrow(reshape(source, {source.numel()}), 0, 0, k);
  return reshape(index_put(flat, {pos}, vals), shape);
}

}  // namespace

Tensor masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source) {
  return masked_scatter_to(self, mask, source,
                           broadcast_shapes(self.sizes(), mask.sizes(), "masked_scatter"),
                           "masked_scatter");
}

const Tensor& masked_scatter_(const Tensor& self, const Tensor& mask, const Tensor& source) {
  Shape b = broadcast_shapes(self.sizes(), mask.sizes(), "masked_scatter_");
  KILN_CHECK(b == self.sizes(), Runtime, "[masked_scatter_] mask ", mask.sizes(),
             " must broadcast to self's shape ", self.sizes());
  return assign_inplace(self, {source}, "masked_scatter_", [&](const Tensor& s) {
    return masked_scatter_to(s, mask, source, s.sizes(), "masked_scatter_");
  });
}

}  // namespace kiln
