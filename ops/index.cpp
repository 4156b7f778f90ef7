// Note [Index offsets]: every indexing op here turns its indices into a
// contiguous int64 tensor of element offsets from the target's data_ptr, laid
// out in the result's shape, computed with kiln's own int64 ops. The backend
// then needs only "take" and "put" loops, and offsets follow the target's
// strides, so writes through views (x[:, 1][idx] = v) land in the base.
//
// Note [Deferred index errors]
// Checking an index tensor on the host means copying it there, which stalls the GPU on every
// x[idx], index_select, gather, embedding or cross_entropy (DESIGN.md decision 6) and breaks
// CUDA graph capture. So when the index and the target are on one GPU, the check runs there:
// the index_check kernel (ops/backend.h) wraps each index and turns it into its offset term,
// an index out of range becomes a negative term that the take/put kernels skip (take writes
// 0, put writes nothing), and the first such index is written to the device's error record, a
// small struct in host-mapped pinned memory (cuda/internal.h). kiln reads the record whenever
// it waits for that device anyway -- a copy to the host (.item(), .tolist(), .cpu(), printing),
// kiln.cuda.synchronize(), Stream/Event.synchronize() -- and raises IndexError with the message
// the CPU's eager check gives, noting that it surfaced at a synchronization, then clears the
// record. Unlike a device-side assert this leaves the CUDA context usable. The same record
// serves embedding (a bad index becomes -1: row_gather writes a zero row, row_scatter_add
// skips it), nll_loss (a bad target becomes ignore_index) and cross_entropy (its fused kernels
// check their targets themselves and treat a bad one as ignored). An index tensor on the host
// is still checked there, eagerly, as is everything on the CPU: that costs no wait.
#include "ops/index.h"

#include <algorithm>

#include "autograd/function.h"
#include "core/determinism.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

// How an op reports an index outside [-size, size) (or [0, size) without negatives): the
// kind of error the CPU's eager check raises, and the wording (ops/backend.h).
struct Bounds {
  const char* op;  // a string literal (see IndexCheck::op)
  ErrorKind kind;
  bool allow_negative;
  IndexErrorStyle style = IndexErrorStyle::Dim;
};

// What index_check writes for an index out of range. An offset is the sum of at most one
// term per dim and in-range positions, so one holding such a term stays negative (64 of them
// stay above INT64_MIN, and in-range offsets are below 2^56) and take/put skip it.
constexpr int64_t kInvalidTerm = -(int64_t(1) << 56);

// The offset terms of `idx` (int32 or int64) for a dim of `size` elements `stride` apart: a
// contiguous int64 tensor on `dev` of idx's shape, each index wrapped when negative and
// allowed, times stride. With idx and the target on one GPU the check is deferred (Note
// [Deferred index errors]); otherwise the index is read and checked on the host now.
Tensor index_terms(const Tensor& idx, int64_t size, int64_t dim, int64_t stride, const Bounds& b,
                   Device dev) {
  GradModeGuard no_grad(false);
  if (idx.device().is_cuda() && idx.device() == dev) {
    IndexCheck check;
    check.op = b.op;
    check.style = b.style;
    check.size = size;
    check.allow_negative = b.allow_negative;
    check.dim = dim;
    check.stride = stride;
    check.invalid = kInvalidTerm;
    Tensor out = make_tensor(idx.sizes(), DType::Int64, dev);
    if (out.numel() > 0)
      require_kernel(backend(dev).index_check, b.op, dev)(out, contiguous(detach(idx)), check);
    return out;
  }
  Tensor h = contiguous(to_dtype(to_device(detach(idx), Device()), DType::Int64));
  Tensor out = make_tensor(idx.sizes(), DType::Int64, Device());
  const int64_t* src = h.data<int64_t>();
  int64_t* dst = out.data<int64_t>();
  for (int64_t i = 0, n = h.numel(); i < n; ++i) {
    const int64_t v = src[i];
    if (v >= size || v < (b.allow_negative ? -size : 0))
      fail(b.kind, index_error_message(b.op, b.style, v, size, dim));
    dst[i] = (v < 0 ? v + size : v) * stride;
  }
  return dev == out.device() ? out : to_device(out, dev);
}

// Offsets over the geometry (sizes, strides) from one offset term per advanced-indexed dim
// (index_terms, or any in-range int64 positions times the stride); undefined entries are
// full slices. See Note [Index offsets].
Tensor offsets_for(const Shape& sizes, const Shape& strides, const std::vector<Tensor>& terms,
                   const char* op) {
  const int64_t n = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> pos;
  for (int64_t k = 0; k < n; ++k)
    if (terms[k].defined()) pos.push_back(k);
  Shape b = terms[pos[0]].sizes();
  for (int64_t k : pos) {
    try {
      b = broadcast_shapes(b, terms[k].sizes(), op);
    } catch (const Error&) {
      std::string shapes;
      for (int64_t j : pos) shapes += (shapes.empty() ? "" : ", ") + str_cat(terms[j].sizes());
      fail(ErrorKind::Index, "[", op,
           "] shape mismatch: indexing tensors could not be broadcast together with shapes ",
           shapes);
    }
  }
  Tensor adv;
  for (int64_t k : pos) adv = adv.defined() ? add(adv, terms[k]) : terms[k];
  // NumPy's rule: adjacent advanced indices keep their place, separated ones go first.
  const bool adjacent = pos.back() - pos.front() + 1 == static_cast<int64_t>(pos.size());
  std::vector<int64_t> plain;
  int64_t b_start = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (terms[k].defined()) continue;
    if (adjacent && k < pos.front()) ++b_start;
    plain.push_back(k);
  }
  const int64_t nb = static_cast<int64_t>(b.size());
  const int64_t rank = static_cast<int64_t>(plain.size()) + nb;
  Shape result(rank, 1), s(rank, 1);
  std::copy(b.begin(), b.end(), s.begin() + b_start);
  std::copy(b.begin(), b.end(), result.begin() + b_start);
  Tensor off = reshape(contiguous(expand(adv, b)), s);
  for (size_t i = 0; i < plain.size(); ++i) {
    const int64_t k = plain[i];
    const int64_t p = static_cast<int64_t>(i) < b_start ? i : i + nb;
    Shape ts(rank, 1);
    ts[p] = result[p] = sizes[k];
    Tensor range = arange(Scalar(int64_t(0)), Scalar(sizes[k]), Scalar(int64_t(1)), DType::Int64,
                          off.device());
    off = add(off, reshape(mul(range, Scalar(strides[k])), ts));
  }
  return contiguous(expand(off, result));
}

// Offsets of self[indices] (Python/advanced indexing rules, see index() in index.h).
Tensor index_offsets(const Tensor& self, const std::vector<Tensor>& indices, const char* op) {
  GradModeGuard no_grad(false);
  Shape sizes, strides;
  std::vector<Tensor> terms;
  int64_t d = 0;
  auto too_many = [&](int64_t need) {
    KILN_CHECK(d + need <= self.dim(), Index, "[", op,
               "] too many indices for tensor of dimension ", self.dim());
  };
  for (const Tensor& raw : indices) {
    if (!raw.defined()) {
      too_many(1);
      sizes.push_back(self.size(d));
      strides.push_back(self.stride(d));
      terms.emplace_back();
      ++d;
      continue;
    }
    const DType dt = raw.dtype();
    if (dt == DType::Bool || dt == DType::UInt8) {
      Tensor mask = to_dtype(raw, DType::Bool);
      if (mask.dim() == 0) {
        // A 0-d mask adds a new dim of size 1 (true) or 0 (false).
        sizes.push_back(1);
        strides.push_back(0);
        terms.push_back(mul(select(nonzero(reshape(mask, {1})), 1, 0), Scalar(int64_t(0))));
        continue;
      }
      too_many(mask.dim());
      for (int64_t j = 0; j < mask.dim(); ++j)
        KILN_CHECK(mask.size(j) == self.size(d + j), Index, "[", op, "] The shape of the mask ",
                   mask.sizes(), " at index ", j,
                   " does not match the shape of the indexed tensor ", self.sizes(), " at index ",
                   d + j);
      Tensor nz = to_device(nonzero(mask), self.device());
      for (int64_t j = 0; j < mask.dim(); ++j, ++d) {
        sizes.push_back(self.size(d));
        strides.push_back(self.stride(d));
        terms.push_back(mul(select(nz, 1, j), Scalar(self.stride(d))));
      }
      continue;
    }
    KILN_CHECK(dt == DType::Int64 || dt == DType::Int32, Index, "[", op,
               "] tensors used as indices must be long, int, byte or bool tensors, got ", dt);
    too_many(1);
    sizes.push_back(self.size(d));
    strides.push_back(self.stride(d));
    terms.push_back(index_terms(raw, self.size(d), d, self.stride(d), {op, ErrorKind::Index, true},
                                self.device()));
    ++d;
  }
  for (; d < self.dim(); ++d) {
    sizes.push_back(self.size(d));
    strides.push_back(self.stride(d));
    terms.emplace_back();
  }
  bool any = false;
  for (const Tensor& t : terms) any = any || t.defined();
  if (!any) {
    // Only full slices: every element, in self's own shape.
    std::vector<Tensor> all = terms;
    all.insert(all.begin(), zeros({}, DType::Int64, self.device()));
    Shape s1 = sizes, st1 = strides;
    s1.insert(s1.begin(), 1);
    st1.insert(st1.begin(), 0);
    return offsets_for(s1, st1, all, op);
  }
  return offsets_for(sizes, strides, terms, op);
}

Tensor take_at(const Tensor& self, const Tensor& offsets, const char* op) {
  Device dev = self.device();
  Tensor out = make_tensor(offsets.sizes(), self.dtype(), dev);
  if (out.numel() > 0) require_kernel(backend(dev).index_take, op, dev)(out, self, offsets);
  return out;
}

// self[offsets] (op)= values, values broadcast to the offsets' shape.
void put_at(const Tensor& self, const Tensor& offsets, const Tensor& values, PutOp put,
            const char* op) {
  GradModeGuard no_grad(false);
  const Shape& target = offsets.sizes();
  bool ok = values.dim() <= offsets.dim();
  for (int64_t i = 1; ok && i <= values.dim(); ++i) {
    int64_t v = values.sizes()[values.dim() - i], t = target[target.size() - i];
    ok = v == 1 || v == t;
  }
  KILN_CHECK(ok, Runtime, "[", op, "] shape mismatch: value tensor of shape ", values.sizes(),
             " cannot be broadcast to indexing result of shape ", target);
  Device dev = self.device();
  // CUDA accumulates with atomics; float sums and products then depend on the arrival
  // order, integer ones do not.
  if (put != PutOp::Assign && dev.is_cuda() && !is_integral(self.dtype(), true))
    alert_not_deterministic(op, dev);
  Tensor v = contiguous(prepare_operand(values, self.dtype(), target, dev));
  if (offsets.numel() > 0) require_kernel(backend(dev).index_put, op, dev)(put, self, offsets, v);
}

Tensor detached_clone(const Tensor& t) {
  GradModeGuard no_grad(false);
  return clone(t);
}

void check_same_dtype(const Tensor& self, const Tensor& src, const char* op) {
  KILN_CHECK(self.dtype() == src.dtype(), Runtime, "[", op,
             "] expected self and source to have the same dtype, but got ", self.dtype(),
             " for self and ", src.dtype(), " for source");
}

// The geometry of a tensor as the gather/scatter family sees it: 0-d acts as 1-d.
Shape dims_of(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.sizes(); }
Shape strides_of(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.strides(); }

// Offsets of target[..., index[i], ...] (index along dim, position elsewhere) for gather/scatter.
Tensor dim_offsets(const Tensor& target, int64_t dim, const Tensor& index, const Bounds& b) {
  GradModeGuard no_grad(false);
  Shape sizes = dims_of(target), strides = strides_of(target), ishape = dims_of(index);
  std::vector<Tensor> terms(ishape.size());
  for (size_t j = 0; j < ishape.size(); ++j) {
    if (static_cast<int64_t>(j) == dim) {
      terms[j] = reshape(index_terms(index, sizes[j], dim, strides[j], b, target.device()), ishape);
      continue;
    }
    Shape s(ishape.size(), 1);
    s[j] = ishape[j];
    Tensor range = arange(Scalar(int64_t(0)), Scalar(ishape[j]), Scalar(int64_t(1)), DType::Int64,
                          target.device());
    terms[j] = reshape(mul(range, Scalar(strides[j])), s);
  }
  return offsets_for(sizes, strides, terms, b.op);
}

// Checks shared by gather and scatter; returns the wrapped dim.
int64_t check_gather_args(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                          const char* op) {
  KILN_CHECK(index.dtype() == DType::Int64, Runtime, "[", op,
             "] Expected dtype int64 for index, got ", index.dtype());
  const int64_t d = wrap_dim(dim, self.dim(), op);
  Shape ss = dims_of(self), is = dims_of(index);
  KILN_CHECK(ss.size() == is.size(), Runtime, "[", op,
             "] Index tensor must have the same number of dimensions as input tensor, got index ",
             index.sizes(), " and input ", self.sizes());
  if (index.numel() == 0) return d;
  for (size_t j = 0; j < ss.size(); ++j)
    KILN_CHECK(static_cast<int64_t>(j) == d || is[j] <= ss[j], Runtime, "[", op,
               "] Size does not match at dimension ", j, ": expected index ", index.sizes(),
               " to be no larger than self ", self.sizes(), " apart from dimension ", d);
  if (src) {
    Shape rs = dims_of(*src);
    KILN_CHECK(rs.size() == is.size(), Runtime, "[", op,
               "] Index tensor must have the same number of dimensions as src tensor, got index ",
               index.sizes(), " and src ", src->sizes());
    for (size_t j = 0; j < rs.size(); ++j)
      KILN_CHECK(is[j] <= rs[j], Runtime, "[", op, "] Size does not match at dimension ", j,
                 ": expected index ", index.sizes(), " to be no larger than src ", src->sizes());
    check_same_dtype(self, *src, op);
  }
  return d;
}

// The leading index.shape block of src (scatter reads only that part).
Tensor leading_block(const Tensor& src, const Tensor& index) {
  Tensor s = src;
  for (int64_t j = 0; j < index.dim(); ++j) s = narrow(s, j, 0, index.size(j));
  return s;
}

// g (shaped like index) placed in the leading block of zeros shaped like src.
Tensor pad_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  std::vector<Tensor> ranges;
  for (int64_t j = 0; j < g.dim(); ++j) {
    Shape s(g.dim(), 1);
    s[j] = g.size(j);
    ranges.push_back(reshape(
        arange(Scalar(int64_t(0)), Scalar(g.size(j)), Scalar(int64_t(1)), DType::Int64, g.device()),
        s));
  }
  return index_put(zeros(shape, g.dtype(), g.device()), ranges, g);
}

PutOp parse_reduce(const std::optional<std::string>& reduce, const char* op) {
  if (!reduce) return PutOp::Assign;
  if (*reduce == "add") return PutOp::Add;
  if (*reduce == "multiply") return PutOp::Mul;
  fail(ErrorKind::Runtime, "[", op, "] reduce argument must be either add or multiply, got '",
       *reduce, "'");
}

// target[index along dim] (put)= values; values is src (tensor) or a filled tensor.
void scatter_into(const Tensor& target, int64_t dim, const Tensor& index, const Tensor* src,
                  Scalar value, PutOp put, const char* op) {
  const int64_t d = check_gather_args(target, dim, index, src, op);
  if (index.numel() == 0) return;
  Tensor off = dim_offsets(target, d, index, {op, ErrorKind::Runtime, false});
  GradModeGuard no_grad(false);
  Tensor values = src ? leading_block(reshape(*src, dims_of(*src)), reshape(index, dims_of(index)))
                      : scalar_tensor(value, target.dtype(), target.device());
  put_at(target, off, values, put, op);
}

Tensor scatter_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                    Scalar value, PutOp put, const char* op) {
  Tensor out = detached_clone(self);
  scatter_into(out, dim, index, src, value, put, op);
  std::vector<Tensor> inputs = {self};
  if (src) inputs.push_back(*src);
  if (!needs_grad(inputs)) return out;
  KILN_CHECK(put != PutOp::Mul, NotImplemented, "[", op,
             "] the backward of reduce='multiply' is not implemented");
  const int64_t d = wrap_dim(dim, self.dim(), op);
  const bool has_src = src != nullptr;
  Shape src_shape = src ? src->sizes() : Shape{};
  record(put == PutOp::Add ? "scatter_add" : "scatter", inputs, {out},
         [index, d, put, has_src, src_shape](const Grads& g, Node&) -> Grads {
           Tensor gs = put == PutOp::Add ? g[0] : scatter(g[0], d, index, Scalar(0));
           if (!has_src) return {gs};
           // src may be larger than index: only its leading block received gradient.
           Tensor gi = gather(g[0], d, index);
           if (gi.sizes() == src_shape) return {gs, gi};
           Shape padded = src_shape.empty() ? Shape{1} : src_shape;
           return {gs, reshape(pad_to(reshape(gi, dims_of(index)), padded), src_shape)};
         });
  return out;
}

Tensor scalar_value(Scalar value, const Tensor& like) {
  return scalar_tensor(value, like.dtype(), like.device());
}

// Checks of index_select/index_add's index; returns it as 1-D.
Tensor vector_index(const Tensor& index, const char* op) {
  KILN_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, Index, "[", op,
             "] Expected dtype int32 or int64 for index, got ", index.dtype());
  KILN_CHECK(index.dim() <= 1, Index, "[", op, "] Index is supposed to be a vector, got shape ",
             index.sizes());
  return reshape(index, {index.numel()});
}

// Offsets of target with the 1-D `index` along dim (index_select / index_add / index_fill /
// index_copy); the bounds rule defaults to index_select's.
Tensor select_offsets(const Tensor& target, int64_t d, const Tensor& index, const char* op,
                      Bounds bounds = {nullptr, ErrorKind::Index, false, IndexErrorStyle::Self}) {
  GradModeGuard no_grad(false);
  bounds.op = op;
  std::vector<Tensor> terms(target.dim());
  terms[d] = index_terms(index, target.size(d), d, target.stride(d), bounds, target.device());
  return offsets_for(target.sizes(), target.strides(), terms, op);
}

}  // namespace

Tensor index(const Tensor& self, const std::vector<Tensor>& indices) {
  profiler::RecordScope profile("index");
  profile.inputs(self);
  Tensor out = take_at(self, index_offsets(self, indices, "index"), "index");
  if (needs_grad({self})) {
    Shape shape = self.sizes();
    // Masks alone pick each element at most once, so assigning into zeros equals
    // accumulating and avoids CUDA's atomics (refused under deterministic algorithms).
    const bool repeats = std::any_of(indices.begin(), indices.end(), [](const Tensor& t) {
      return t.defined() && t.dtype() != DType::Bool && t.dtype() != DType::UInt8;
    });
    record("index", {self}, {out}, [indices, shape, repeats](const Grads& g, Node&) -> Grads {
      return {index_put(zeros(shape, g[0].dtype(), g[0].device()), indices, g[0], repeats)};
    });
  }
  return out;
}

Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate) {
  profiler::RecordScope profile("index_put");
  profile.inputs(self, values);
  if (auto ac = autocast_args("index_put", {self, values}))
    return index_put((*ac)[0], indices, (*ac)[1], accumulate);
  check_same_dtype(self, values, "index_put");
  Tensor out = detached_clone(self);
  put_at(out, index_offsets(out, indices, "index_put"), values,
         accumulate ? PutOp::Add : PutOp::Assign, "index_put");
  if (needs_grad({self, values})) {
    record("index_put", {self, values}, {out},
           [indices, accumulate](const Grads& g, Node&) -> Grads {
             Tensor zero = zeros({}, g[0].dtype(), g[0].device());
             Tensor gs = accumulate ? g[0] : index_put(g[0], indices, zero);
             return {gs, index(g[0], indices)};
           });
  }
  return out;
}

const Tensor& index_put_(const Tensor& self, const std::vector<Tensor>& indices,
                         const Tensor& values, bool accumulate) {
  check_same_dtype(self, values, "index_put_");
  return apply_inplace(
      self, {values}, "index_put_",
      [&](const Tensor& s) { return index_put(s, indices, values, accumulate); },
      [&] {
        put_at(self, index_offsets(self, indices, "index_put_"), values,
               accumulate ? PutOp::Add : PutOp::Assign, "index_put_");
      });
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  profiler::RecordScope profile("gather");
  profile.inputs(self, index);
  const int64_t d = check_gather_args(self, dim, index, nullptr, "gather");
  Tensor out =
      index.numel() == 0
          ? make_tensor(index.sizes(), self.dtype(), self.device())
          : reshape(
                take_at(self, dim_offsets(self, d, index, {"gather", ErrorKind::Runtime, false}),
                        "gather"),
                index.sizes());
  if (needs_grad({self})) {
    Shape shape = self.sizes();
    record("gather", {self}, {out}, [index, d, shape](const Grads& g, Node&) -> Grads {
      return {scatter_add(zeros(shape, g[0].dtype(), g[0].device()), d, index, g[0])};
    });
  }
  return out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
               const std::optional<std::string>& reduce) {
  return scatter_impl(self, dim, index, &src, Scalar(), parse_reduce(reduce, "scatter"), "scatter");
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, Scalar value,
               const std::optional<std::string>& reduce) {
  return scatter_impl(self, dim, index, nullptr, value, parse_reduce(reduce, "scatter"), "scatter");
}

const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                       const std::optional<std::string>& reduce) {
  PutOp put = parse_reduce(reduce, "scatter_");
  return apply_inplace(
      self, {src}, "scatter_", [&](const Tensor& s) { return scatter(s, dim, index, src, reduce); },
      [&] { scatter_into(self, dim, index, &src, Scalar(), put, "scatter_"); });
}

const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, Scalar value,
                       const std::optional<std::string>& reduce) {
  PutOp put = parse_reduce(reduce, "scatter_");
  return apply_inplace(
      self, {}, "scatter_", [&](const Tensor& s) { return scatter(s, dim, index, value, reduce); },
      [&] { scatter_into(self, dim, index, nullptr, value, put, "scatter_"); });
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  profiler::RecordScope profile("scatter_add");
  profile.inputs(self, index, src);
  if (auto ac = autocast_args("scatter_add", {self, src}))
    return scatter_add((*ac)[0], dim, index, (*ac)[1]);
  return scatter_impl(self, dim, index, &src, Scalar(), PutOp::Add, "scatter_add");
}

const Tensor& scatter_add_(const Tensor& self, int64_t dim, const Tensor& index,
                           const Tensor& src) {
  return apply_inplace(
      self, {src}, "scatter_add_", [&](const Tensor& s) { return scatter_add(s, dim, index, src); },
      [&] { scatter_into(self, dim, index, &src, Scalar(), PutOp::Add, "scatter_add_"); });
}

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  profiler::RecordScope profile("index_select");
  profile.inputs(self, index);
  Tensor idx = vector_index(index, "index_select");
  if (self.dim() == 0) {
    KILN_CHECK(idx.numel() == 1, Index,
               "[index_select] index of a 0-d tensor must have one element, got ", index.sizes());
    return reshape(index_select(reshape(self, {1}), 0, idx), {});
  }
  const int64_t d = wrap_dim(dim, self.dim(), "index_select");
  Tensor out = take_at(self, select_offsets(self, d, idx, "index_select"), "index_select");
  if (needs_grad({self})) {
    Shape shape = self.sizes();
    record("index_select", {self}, {out}, [idx, d, shape](const Grads& g, Node&) -> Grads {
      return {index_add(zeros(shape, g[0].dtype(), g[0].device()), d, idx, g[0])};
    });
  }
  return out;
}

namespace {
void index_add_into(const Tensor& target, int64_t dim, const Tensor& index, const Tensor& source,
                    Scalar alpha, const char* op) {
  Tensor idx = vector_index(index, op);
  KILN_CHECK(target.dim() > 0, Index, "[", op, "] expects self to have at least one dimension");
  const int64_t d = wrap_dim(dim, target.dim(), op);
  check_same_dtype(target, source, op);
  KILN_CHECK(source.dim() == target.dim() || (source.dim() == 0 && target.dim() == 1), Index, "[",
             op, "] source ", source.sizes(), " must have as many dimensions as self ",
             target.sizes());
  Shape want = target.sizes();
  want[d] = idx.numel();
  KILN_CHECK(
      checked_numel(want, op) == source.numel() && (source.dim() == 0 || source.sizes() == want),
      Runtime, "[", op, "] source ", source.sizes(), " must match self ", target.sizes(),
      " except along dimension ", d, ", which must have index's ", idx.numel(), " elements");
  GradModeGuard no_grad(false);
  Tensor values = reshape(source, want);
  if (!(alpha.is_integral() && alpha.to_int() == 1)) values = mul(values, alpha);
  put_at(target, select_offsets(target, d, idx, op), values, PutOp::Add, op);
}
}  // namespace

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha) {
  Tensor out = detached_clone(self);
  index_add_into(out, dim, index, source, alpha, "index_add");
  if (needs_grad({self, source})) {
    const int64_t d = wrap_dim(dim, self.dim(), "index_add");
    Shape src_shape = source.sizes();
    record("index_add", {self, source}, {out},
           [index, d, alpha, src_shape](const Grads& g, Node&) -> Grads {
             return {g[0], reshape(mul(index_select(g[0], d, index), alpha), src_shape)};
           });
  }
  return out;
}

const Tensor& index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                         Scalar alpha) {
  return apply_inplace(
      self, {source}, "index_add_",
      [&](const Tensor& s) { return index_add(s, dim, index, source, alpha); },
      [&] { index_add_into(self, dim, index, source, alpha, "index_add_"); });
}

namespace {
// index_fill and index_copy treat a 0-d self as 1-d, as PyTorch does.
Tensor as_vector(const Tensor& t) { return t.dim() == 0 ? reshape(t, {1}) : t; }

void index_fill_into(const Tensor& target, int64_t dim, const Tensor& index, const Tensor& value,
                     const char* op) {
  KILN_CHECK(index.dtype() == DType::Int64, Index, "[", op,
             "] Expected dtype int64 for index, got ", index.dtype());
  KILN_CHECK(index.dim() <= 1, Runtime, "[", op,
             "] Index has to be a vector or a scalar, got shape ", index.sizes());
  KILN_CHECK(value.dim() == 0, Runtime, "[", op,
             "] only supports a 0-dimensional value tensor, but got tensor with ", value.dim(),
             " dimension(s)");
  const int64_t d = wrap_dim(dim, target.dim(), op);
  Tensor t = as_vector(target);
  GradModeGuard no_grad(false);
  // Unlike index_select, index_fill accepts negative indices.
  Tensor off = select_offsets(t, d, reshape(index, {index.numel()}), op,
                              {op, ErrorKind::Index, true, IndexErrorStyle::Dim});
  put_at(t, off, value, PutOp::Assign, op);
}

void index_copy_into(const Tensor& target, int64_t dim, const Tensor& index, const Tensor& source,
                     const char* op) {
  KILN_CHECK(index.dim() <= 1, Index, "[", op, "] Index should have dimension 1 or 0, got ",
             index.sizes());
  KILN_CHECK(index.dtype() == DType::Int64, Index, "[", op,
             "] Expected a long tensor for index, but got ", index.dtype());
  const int64_t d = wrap_dim(dim, target.dim(), op);
  check_same_dtype(target, source, op);
  // The slices (all dims but d) must agree; a 0-d source stands for a single element.
  Shape self_slice = target.sizes(), src_slice = source.sizes();
  if (!self_slice.empty()) self_slice.erase(self_slice.begin() + d);
  if (!src_slice.empty() && d < source.dim()) src_slice.erase(src_slice.begin() + d);
  KILN_CHECK(self_slice == src_slice && (source.dim() == 0 || d < source.dim()), Index, "[", op,
             "] source and self must have the same slice shapes outside dimension ", d,
             ", got source ", source.sizes(), " and self ", target.sizes());
  const int64_t slots = source.dim() == 0 ? 1 : source.size(d);
  KILN_CHECK(index.numel() == slots, Index, "[", op, "] the number of indices (", index.numel(),
             ") must equal source.size(", d, ") (", slots, ")");
  Tensor t = as_vector(target);
  Shape want = t.sizes();
  want[d] = index.numel();
  GradModeGuard no_grad(false);
  Tensor off = select_offsets(t, d, reshape(index, {index.numel()}), op,
                              {op, ErrorKind::Index, false, IndexErrorStyle::Dim});
  put_at(t, off, reshape(source, want), PutOp::Assign, op);
}
}  // namespace

Tensor index_fill(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  Tensor out = detached_clone(self);
  index_fill_into(out, dim, index, value, "index_fill");
  if (needs_grad({self, value})) {
    const int64_t d = wrap_dim(dim, self.dim(), "index_fill");
    record("index_fill", {self, value}, {out}, [index, d](const Grads& g, Node&) -> Grads {
      Tensor gs = index_fill(g[0], d, index, Scalar(0));
      // g - gs is g at the filled positions (each once, however often index repeats it).
      return {gs, sum(sub(g[0], gs))};
    });
  }
  return out;
}

Tensor index_fill(const Tensor& self, int64_t dim, const Tensor& index, Scalar value) {
  return index_fill(self, dim, index, scalar_value(value, self));
}

const Tensor& index_fill_(const Tensor& self, int64_t dim, const Tensor& index,
                          const Tensor& value) {
  return apply_inplace(
      self, {value}, "index_fill_",
      [&](const Tensor& s) { return index_fill(s, dim, index, value); },
      [&] { index_fill_into(self, dim, index, value, "index_fill_"); });
}

const Tensor& index_fill_(const Tensor& self, int64_t dim, const Tensor& index, Scalar value) {
  return index_fill_(self, dim, index, scalar_value(value, self));
}

Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  Tensor out = detached_clone(self);
  index_copy_into(out, dim, index, source, "index_copy");
  if (needs_grad({self, source})) {
    const int64_t d = wrap_dim(dim, self.dim(), "index_copy");
    Shape src_shape = source.sizes();
    record("index_copy", {self, source}, {out},
           [index, d, src_shape](const Grads& g, Node&) -> Grads {
             return {index_fill(g[0], d, index, Scalar(0)),
                     reshape(index_select(g[0], d, index), src_shape)};
           });
  }
  return out;
}

const Tensor& index_copy_(const Tensor& self, int64_t dim, const Tensor& index,
                          const Tensor& source) {
  return apply_inplace(
      self, {source}, "index_copy_",
      [&](const Tensor& s) { return index_copy(s, dim, index, source); },
      [&] { index_copy_into(self, dim, index, source, "index_copy_"); });
}

namespace {
void check_mask_value(const Tensor& mask, const Tensor& value, const char* op) {
  KILN_CHECK(mask.dtype() == DType::Bool, Runtime, "[", op,
             "] only supports boolean masks, but got mask with dtype ", mask.dtype());
  KILN_CHECK(value.dim() == 0, Runtime, "[", op,
             "] only supports a 0-dimensional value tensor, but got tensor with ", value.dim(),
             " dimension(s)");
}
}  // namespace

Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value) {
  profiler::RecordScope profile("masked_fill");
  profile.inputs(self, mask, value);
  check_mask_value(mask, value, "masked_fill");
  broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill");
  return where(mask, to_dtype(value, self.dtype()), self);
}

Tensor masked_fill(const Tensor& self, const Tensor& mask, Scalar value) {
  return masked_fill(self, mask, scalar_value(value, self));
}

const Tensor& masked_fill_(const Tensor& self, const Tensor& mask, const Tensor& value) {
  check_mask_value(mask, value, "masked_fill_");
  Shape shape = broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill_");
  KILN_CHECK(shape == self.sizes(), Runtime, "[masked_fill_] mask of shape ", mask.sizes(),
             " cannot be broadcast to self of shape ", self.sizes());
  return apply_inplace(
      self, {value}, "masked_fill_", [&](const Tensor& s) { return masked_fill(s, mask, value); },
      [&] {
        Device dev = self.device();
        require_kernel(backend(dev).where, "masked_fill_", dev)(
            self, prepare_operand(mask, DType::Bool, shape, dev),
            prepare_operand(value, self.dtype(), shape, dev), self);
      });
}

const Tensor& masked_fill_(const Tensor& self, const Tensor& mask, Scalar value) {
  return masked_fill_(self, mask, scalar_value(value, self));
}

Tensor masked_select(const Tensor& self, const Tensor& mask) {
  KILN_CHECK(mask.dtype() == DType::Bool, Runtime,
             "[masked_select] expected a bool tensor for mask, got ", mask.dtype());
  Shape shape = broadcast_shapes(self.sizes(), mask.sizes(), "masked_select");
  return index(expand(self, shape), {expand(mask, shape)});
}

Tensor nonzero(const Tensor& self) {
  GradModeGuard no_grad(false);
  Tensor mask = contiguous(self.dtype() == DType::Bool ? detach(self) : ne(self, Scalar(0)));
  Tensor count = to_device(sum(mask), Device());
  const int64_t n = count.data<int64_t>()[0];
  Device dev = self.device();
  Tensor out = make_tensor({n, self.dim()}, DType::Int64, dev);
  if (n > 0 && self.dim() > 0) require_kernel(backend(dev).nonzero, "nonzero", dev)(out, mask);
  return out;
}

std::vector<Tensor> nonzero_tuple(const Tensor& self) {
  Tensor nz = nonzero(self);
  if (self.dim() == 0) return {zeros({nz.size(0)}, DType::Int64, self.device())};
  std::vector<Tensor> out;
  for (int64_t j = 0; j < self.dim(); ++j) out.push_back(contiguous(select(nz, 1, j)));
  return out;
}

namespace {
Tensor flat_offsets(const Tensor& self, const Tensor& index, const char* op) {
  KILN_CHECK(index.dtype() == DType::Int64, Runtime, "[", op,
             "] Expected a long tensor for index, but got ", index.dtype());
  return index_terms(index, self.numel(), -1, 1,
                     {op, ErrorKind::Index, true, IndexErrorStyle::Flat}, self.device());
}
}  // namespace

Tensor take(const Tensor& self, const Tensor& index) {
  Tensor src = contiguous(detach(self));
  Tensor out = take_at(src, flat_offsets(src, index, "take"), "take");
  if (needs_grad({self})) {
    Shape shape = self.sizes();
    record("take", {self}, {out}, [index, shape](const Grads& g, Node&) -> Grads {
      return {put(zeros(shape, g[0].dtype(), g[0].device()), index, g[0], true)};
    });
  }
  return out;
}

Tensor put(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  check_same_dtype(self, source, "put");
  KILN_CHECK(source.numel() == index.numel(), Runtime,
             "[put] Expected source and index to have the same number of elements, but got source ",
             source.sizes(), " and index ", index.sizes());
  Tensor out = detached_clone(self);
  Tensor off = flat_offsets(out, index, "put");
  {
    GradModeGuard no_grad(false);
    put_at(out, off, reshape(source, index.sizes()), accumulate ? PutOp::Add : PutOp::Assign,
           "put");
  }
  if (needs_grad({self, source})) {
    Shape src_shape = source.sizes();
    record("put", {self, source}, {out},
           [index, accumulate, src_shape](const Grads& g, Node&) -> Grads {
             Tensor gs = accumulate
                             ? g[0]
                             : put(g[0], index, zeros(src_shape, g[0].dtype(), g[0].device()));
             return {gs, reshape(take(g[0], index), src_shape)};
           });
  }
  return out;
}

const Tensor& put_(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  // put() numbers elements row-major, so it runs out of place and is copied back.
  return assign_inplace(self, {source}, "put_",
                        [&](const Tensor& s) { return put(s, index, source, accumulate); });
}

}  // namespace kiln
