// Reductions over dims: sum, mean, prod, the max/min family and all/any.
// Statistics (var, std, norms, logsumexp) are in reduce_stats.cpp, scans in scan.cpp.
#include "ops/reduce.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>

#include "autograd/function.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/export_trace.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {
using Grads = std::vector<Tensor>;

Tensor constant(double v, const Tensor& like) {
  return scalar_tensor(Scalar(v), like.dtype(), like.device());
}

// Integer and bool inputs sum and multiply in int64, as in PyTorch.
DType accumulate_dtype(const Tensor& x, std::optional<DType> dtype) {
  return dtype ? *dtype : (is_floating(x.dtype()) ? x.dtype() : DType::Int64);
}

// Note [Extreme gradients]: amax/amin and the full max()/min() split the gradient evenly
// among tied extremes (PyTorch's rule); max/min along a dim send it to the returned index
// only. A NaN result takes the gradient to the NaN positions.
Tensor evenly_distribute(const Tensor& g, const Tensor& x, const Tensor& out,
                         const std::vector<int64_t>& dims, bool keepdim) {
  Tensor o = unsqueeze_reduced(out, x.sizes(), dims, keepdim);
  Tensor mask = logical_or(eq(x, o), logical_and(isnan(x), isnan(o)));
  Tensor count = sum(mask, dims, true);
  Tensor share = div(unsqueeze_reduced(g, x.sizes(), dims, keepdim), count);
  return mul(share, to_dtype(mask, share.dtype()));
}

// amax/amin and full max()/min(): Max/Min over `dims` with the tie-splitting gradient.
Tensor extreme(ReduceOp op, const Tensor& x, const DimList& dims, bool keepdim, const char* name) {
  Tensor out = reduce_compute(op, x, dims, keepdim, x.dtype(), name);
  if (is_floating(x.dtype()) && needs_grad({x})) {
    std::vector<int64_t> wrapped = reduction_dims(dims, x.dim(), name);
    record(name, {x}, {out}, [sx = SavedTensor(x), so = SavedTensor::output(out, 0), wrapped,
                              keepdim](const Grads& g, Node& self) -> Grads {
      return {evenly_distribute(g[0], sx.unpack(), so.unpack(self), wrapped, keepdim)};
    });
  }
  return out;
}

// x as contiguous [outer, n] rows with `dim` last (a 0-d tensor is one row of one).
Tensor rows_along(const Tensor& x, int64_t dim) {
  if (x.dim() == 0) return reshape(x, {1, 1});
  int64_t outer = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != dim) outer *= x.sizes()[i];
  return reshape(contiguous(movedim(x, dim, x.dim() - 1)), {outer, x.sizes()[dim]});
}

// Values and int64 indices of the extreme along wrapped `dim`, without autograd.
std::pair<Tensor, Tensor> arg_compute(ReduceOp op, const Tensor& x, int64_t dim, bool keepdim,
                                      const char* name) {
  if (x.dim() > 0)
    KILN_CHECK(x.sizes()[dim] != 0, Index, "[", name, "] Expected reduction dim ", dim,
               " to have non-zero size (input shape ", x.sizes(), ")");
  GradModeGuard no_grad(false);
  Tensor rows = rows_along(x, dim);
  Tensor values = make_tensor({rows.size(0)}, x.dtype(), x.device());
  Tensor indices = make_tensor({rows.size(0)}, DType::Int64, x.device());
  if (rows.numel() > 0)
    require_kernel(backend(x.device()).arg_reduce, name, x.device())(op, values, indices, rows);
  std::vector<int64_t> dims;
  if (x.dim() > 0) dims.push_back(dim);
  Shape shape = reduced_shape(x.sizes(), dims, keepdim);
  return {reshape(values, shape), reshape(indices, shape)};
}

std::pair<Tensor, Tensor> extreme_dim(ReduceOp op, const Tensor& x, int64_t dim, bool keepdim,
                                      const char* name) {
  const int64_t d = wrap_dim(dim, x.dim(), name);
  auto [values, indices] = arg_compute(op, x, d, keepdim, name);
  if (is_floating(x.dtype()) && needs_grad({x})) {
    Shape in_shape = x.sizes();
    record(name, {x}, {values, indices}, [in_shape, d, keepdim, si = SavedTensor(indices)](
                                             const Grads& g, Node&) -> Grads {
      if (in_shape.empty()) return {g[0]};
      // One-hot of the index along d, built by comparing against positions 0..n-1.
      Shape pos_shape(in_shape.size(), 1);
      pos_shape[d] = in_shape[d];
      Tensor pos = reshape(arange(Scalar(int64_t{0}), Scalar(in_shape[d]), Scalar(int64_t{1}),
                                  DType::Int64, g[0].device()),
                           pos_shape);
      Tensor hit = eq(pos, unsqueeze_reduced(si.unpack(), in_shape, {d}, keepdim));
      Tensor gg = unsqueeze_reduced(g[0], in_shape, {d}, keepdim);
      return {mul(gg, to_dtype(hit, gg.dtype()))};
    });
  }
  return {values, indices};
}

Tensor arg_extreme(ReduceOp op, const Tensor& x, std::optional<int64_t> dim, bool keepdim,
                   const char* name) {
  if (dim) return extreme_dim(op, x, *dim, keepdim, name).second;
  KILN_CHECK(x.numel() > 0, Index, "[", name,
             "] Expected reduction dim to be specified for input.numel() == 0 (input shape ",
             x.sizes(), ")");
  Tensor flat_index = arg_compute(op, reshape(x, {x.numel()}), 0, false, name).second;
  return keepdim ? reshape(flat_index, Shape(x.dim(), 1)) : flat_index;
}

Tensor logical_reduce(ReduceOp op, const Tensor& x, const DimList& dims, bool keepdim,
                      const char* name) {
  Tensor truth = x.dtype() == DType::Bool ? x : ne(x, Scalar(int64_t{0}));
  Tensor out = reduce_compute(op, truth, dims, keepdim, DType::Bool, name);
  // uint8 in, uint8 out: PyTorch keeps this for backward compatibility.
  return x.dtype() == DType::UInt8 ? to_dtype(out, DType::UInt8) : out;
}
}  // namespace

std::vector<int64_t> reduction_dims(const DimList& dims, int64_t ndim, const char* name) {
  if (!dims || dims->empty()) {
    std::vector<int64_t> all(ndim);
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  if (ndim == 0) {
    for (int64_t d : *dims) wrap_dim(d, 0, name);
    return {};
  }
  return wrap_dims(*dims, ndim, name);
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
    bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced) out.push_back(in[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor unsqueeze_reduced(const Tensor& t, const Shape& in_shape, const std::vector<int64_t>& dims,
                         bool keepdim) {
  if (keepdim || in_shape.empty()) return t;
  return reshape(t, reduced_shape(in_shape, dims, true));
}

namespace {
// Note [Reduction layouts]: the reduce kernels take a contiguous [outer, R, inner] input and
// reduce its middle dim. When x's elements are dense in memory (any dim order, size-1 dims
// ignored) and its kept dims keep their logical order in memory order, x is read in place, as
// runs of kept and reduced dims. One reduced run is one kernel call on a view of x: full
// reductions, leading dims (bias gradients), trailing dims, transposed inputs. Several runs
// (batch-norm statistics over dims (0, 2, 3)) take one call per run, innermost first, each
// writing a smaller contiguous tensor in the output dtype: exact for max/min/all/any, and
// float32/float64/int64 sums keep the precision the kernel accumulates in anyway. Other layouts
// (slices, broadcasts, kept dims out of order in memory) are first copied in logical order.
// Half sums and products over several runs would round between calls: those are copied with
// the reduced dims last instead (inner == 1).
struct Layout {
  std::vector<int64_t> order;  // x's dims in memory order, size-1 dims last
  std::vector<int64_t> sizes;  // runs of merged dims in memory order, alternately kept/reduced
  std::vector<bool> reduced;   // whether each run is reduced
};

std::optional<Layout> dense_layout(const Tensor& x, const std::vector<bool>& reduced) {
  if (x.numel() == 0) return std::nullopt;
  Layout l;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (x.sizes()[i] != 1) l.order.push_back(i);
  const Shape& st = x.strides();
  std::stable_sort(l.order.begin(), l.order.end(),
                   [&](int64_t a, int64_t b) { return st[a] > st[b]; });
  int64_t expected = 1;
  for (auto it = l.order.rbegin(); it != l.order.rend(); ++it) {
    if (st[*it] != expected) return std::nullopt;
    expected *= x.sizes()[*it];
  }
  int64_t last_kept = -1;
  for (int64_t d : l.order) {
    if (!reduced[d]) {
      if (d < last_kept) return std::nullopt;  // the output would need a permute
      last_kept = d;
    }
    if (!l.sizes.empty() && l.reduced.back() == reduced[d]) {
      l.sizes.back() *= x.sizes()[d];
    } else {
      l.sizes.push_back(x.sizes()[d]);
      l.reduced.push_back(reduced[d]);
    }
  }
  for (int64_t i = 0; i < x.dim(); ++i)
    if (x.sizes()[i] == 1) l.order.push_back(i);
  return l;
}

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= v[i];
  return p;
}

// The kernel on a contiguous [outer, R, inner] input; returns the [outer, inner] result.
Tensor reduce_call(ReduceOp op, const Tensor& in, int64_t outer, int64_t inner, const char* name) {
  Tensor out = make_tensor({outer, inner}, in.dtype(), in.device());
  require_kernel(backend(in.device()).reduce, name, in.device())(op, out, in);
  return out;
}
}  // namespace

Tensor reduce_compute(ReduceOp op, const Tensor& x, const DimList& dims_opt, bool keepdim,
                      DType out_dtype, const char* name) {
  std::vector<int64_t> dims = reduction_dims(dims_opt, x.dim(), name);
  Shape out_shape = reduced_shape(x.sizes(), dims, keepdim);
  if (op == ReduceOp::Max || op == ReduceOp::Min) {
    for (int64_t d : dims)
      KILN_CHECK(x.sizes()[d] != 0, Index, "[", name, "] Expected reduction dim ", d,
                 " to have non-zero size (input shape ", x.sizes(),
                 "): max/min of no elements is undefined");
  }
  std::vector<bool> reduced(x.dim(), false);
  for (int64_t d : dims) reduced[d] = true;
  GradModeGuard no_grad(false);
  const bool rounds_between = (out_dtype == DType::Float16 || out_dtype == DType::BFloat16) &&
                              (op == ReduceOp::Sum || op == ReduceOp::Prod);
  auto usable = [&](const std::optional<Layout>& l) {
    return l && !(rounds_between && std::count(l->reduced.begin(), l->reduced.end(), true) > 1);
  };
  Tensor src = x;
  std::optional<Layout> l = dense_layout(x, reduced);
  if (!l && x.numel() > 0) {
    // A copy in logical order (coalesced on both sides) usually makes the input usable.
    src = contiguous(to_dtype(x, out_dtype));
    l = dense_layout(src, reduced);
  }
  if (usable(l)) {
    // A dtype change copies into a tensor laid out in src's memory order, so views still hold.
    Tensor cur = src.dtype() == out_dtype ? src : to_dtype(permute(src, l->order), out_dtype);
    std::vector<int64_t>& sizes = l->sizes;
    std::vector<bool>& red = l->reduced;
    if (std::find(red.begin(), red.end(), true) == red.end()) {
      // Nothing of size > 1 reduced: every element is its own output (one row of columns).
      sizes.insert(sizes.begin(), 1);
      red.insert(red.begin(), true);
    }
    for (;;) {
      auto it = std::find(red.rbegin(), red.rend(), true);
      if (it == red.rend()) break;
      const size_t s = static_cast<size_t>(red.rend() - it) - 1;
      const int64_t outer = product(sizes, 0, s), r = sizes[s];
      const int64_t inner = product(sizes, s + 1, sizes.size());
      Tensor in = make_view(cur, {outer, r, inner}, {r * inner, inner, 1}, cur.storage_offset());
      cur = reduce_call(op, in, outer, inner, name);
      sizes.erase(sizes.begin() + s);
      red.erase(red.begin() + s);
      if (s > 0 && s < sizes.size()) {  // the kept runs on either side now touch
        sizes[s - 1] *= sizes[s];
        sizes.erase(sizes.begin() + s);
        red.erase(red.begin() + s);
      }
    }
    return reshape(cur, out_shape);
  }
  // Kept dims first, reduced dims last, so each output is one contiguous row.
  std::vector<int64_t> order;
  int64_t outer = 1, r = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (!reduced[i]) {
      order.push_back(i);
      outer *= x.sizes()[i];
    }
  }
  for (int64_t d : dims) {
    order.push_back(d);
    r *= x.sizes()[d];
  }
  Tensor in = reshape(contiguous(to_dtype(permute(src, order), out_dtype)), {outer, r, 1});
  return reshape(reduce_call(op, in, outer, 1, name), out_shape);
}

Tensor sum(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  tracing::OpScope scope("sum");
  if (auto ac = autocast_args("sum", {x}, dtype.has_value()))
    return scope.out(sum((*ac)[0], dims, keepdim, dtype), x, dims, keepdim, dtype);
  DType dt = accumulate_dtype(x, dtype);
  Tensor out = reduce_compute(ReduceOp::Sum, x, dims, keepdim, dt, "sum");
  if (is_floating(dt) && needs_grad({x})) {
    std::vector<int64_t> wrapped = reduction_dims(dims, x.dim(), "sum");
    Shape in_shape = x.sizes();
    record("sum", {x}, {out}, [wrapped, in_shape, keepdim](const Grads& g, Node&) -> Grads {
      return {expand(unsqueeze_reduced(g[0], in_shape, wrapped, keepdim), in_shape)};
    });
  }
  return scope.out(out, x, dims, keepdim, dtype);
}

Tensor mean(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  tracing::OpScope scope("mean");
  DType dt = dtype ? *dtype : x.dtype();
  // NotImplementedError, as PyTorch 2.15 raises (a RuntimeError subclass, as older ones raised).
  KILN_CHECK(is_floating(dt), NotImplemented,
             "[mean] mean(): could not infer output dtype. Input dtype must be either a floating "
             "point or complex dtype. Got: ", dt);
  std::vector<int64_t> wrapped = reduction_dims(dims, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t d : wrapped) count *= x.sizes()[d];
  // Half types sum and divide in float32: their sum may overflow where the mean does not.
  if (dt == DType::Float16 || dt == DType::BFloat16)
    return scope.out(
        to_dtype(div(sum(x, dims, keepdim, DType::Float32), Scalar(static_cast<double>(count))),
                 dt),
        x, dims, keepdim, dtype);
  return scope.out(div(sum(x, dims, keepdim, dt), Scalar(static_cast<double>(count))), x, dims,
                   keepdim, dtype);
}

Tensor prod(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  profiler::RecordScope profile("prod");
  profile.inputs(x);
  if (auto ac = autocast_args("prod", {x}, dtype.has_value()))
    return prod((*ac)[0], dims, keepdim, dtype);
  DType dt = accumulate_dtype(x, dtype);
  Tensor out = reduce_compute(ReduceOp::Prod, x, dims, keepdim, dt, "prod");
  if (is_floating(dt) && needs_grad({x})) {
    std::vector<int64_t> wrapped = reduction_dims(dims, x.dim(), "prod");
    // Division-free at zeros: with no zero in a slice the gradient is prod/x; with exactly one
    // zero only that position gets the product of the others; with more, nothing does.
    record("prod", {x}, {out}, [sx = SavedTensor(x), wrapped, keepdim, dt](
                                   const Grads& g, Node&) -> Grads {
      Tensor xc = to_dtype(sx.unpack(), dt);
      Tensor zero = eq(xc, Scalar(0.0));
      Tensor safe = where(zero, constant(1.0, xc), xc);
      Tensor nonzero_prod = prod(safe, wrapped, true);
      Tensor zeros_in_slice = sum(zero, wrapped, true);
      Tensor only_zero = logical_and(eq(zeros_in_slice, Scalar(int64_t{1})), zero);
      Tensor local = where(eq(zeros_in_slice, Scalar(int64_t{0})), div(nonzero_prod, safe),
                           where(only_zero, nonzero_prod, constant(0.0, xc)));
      return {mul(unsqueeze_reduced(g[0], xc.sizes(), wrapped, keepdim), local)};
    });
  }
  return out;
}

Tensor amax(const Tensor& x, const DimList& dims, bool keepdim) {
  profiler::RecordScope profile("amax");
  profile.inputs(x);
  return extreme(ReduceOp::Max, x, dims, keepdim, "amax");
}

Tensor amin(const Tensor& x, const DimList& dims, bool keepdim) {
  profiler::RecordScope profile("amin");
  profile.inputs(x);
  return extreme(ReduceOp::Min, x, dims, keepdim, "amin");
}

Tensor max(const Tensor& x) {
  KILN_CHECK(x.numel() > 0, Runtime,
             "[max] Expected reduction dim to be specified for input.numel() == 0. Specify the "
             "reduction dim with the 'dim' argument (input shape ", x.sizes(), ")");
  return extreme(ReduceOp::Max, x, std::nullopt, false, "max");
}

Tensor min(const Tensor& x) {
  KILN_CHECK(x.numel() > 0, Runtime,
             "[min] Expected reduction dim to be specified for input.numel() == 0. Specify the "
             "reduction dim with the 'dim' argument (input shape ", x.sizes(), ")");
  return extreme(ReduceOp::Min, x, std::nullopt, false, "min");
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(ReduceOp::Max, x, dim, keepdim, "max");
}

std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(ReduceOp::Min, x, dim, keepdim, "min");
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  profiler::RecordScope profile("argmax");
  profile.inputs(x);
  return arg_extreme(ReduceOp::Max, x, dim, keepdim, "argmax");
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  profiler::RecordScope profile("argmin");
  profile.inputs(x);
  return arg_extreme(ReduceOp::Min, x, dim, keepdim, "argmin");
}

Tensor all(const Tensor& x, const DimList& dims, bool keepdim) {
  return logical_reduce(ReduceOp::All, x, dims, keepdim, "all");
}

Tensor any(const Tensor& x, const DimList& dims, bool keepdim) {
  return logical_reduce(ReduceOp::Any, x, dims, keepdim, "any");
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  AutocastSuspend keep_dtype;  // a shape helper, not an op: no float32 sums
  if (x.sizes() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  KILN_CHECK(lead >= 0, Runtime, "[sum_to] cannot sum shape ", x.sizes(), " to ", shape);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else {
      int64_t want = shape[i - lead];
      KILN_CHECK(want == x.sizes()[i] || want == 1, Runtime, "[sum_to] cannot sum shape ",
                 x.sizes(), " to ", shape);
      if (want == 1 && x.sizes()[i] != 1) dims.push_back(i);
    }
  }
  Tensor r = dims.empty() ? x : sum(x, dims, true);
  return lead > 0 || r.sizes() != shape ? reshape(r, shape) : r;
}

}  // namespace kiln
