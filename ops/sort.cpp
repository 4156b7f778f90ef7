#include "ops/sort.h"

#include <limits>

#include "autograd/function.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/index.h"
#include "ops/shape.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

// Kernels see "rows": dim d moved last, contiguous, as [outer, len]. A 0-d
// tensor is one row of one element.
Tensor to_rows(const Tensor& x, int64_t d) {
  Tensor t = detach(x);
  if (t.dim() == 0) return view(t, {1, 1});
  t = contiguous(movedim(t, d, -1));
  int64_t len = t.sizes().back(), outer = 1;
  for (int64_t i = 0; i + 1 < t.dim(); ++i) outer *= t.sizes()[i];
  return view(t, {outer, len});
}

// A result of `shape` being written as rows along dim d.
struct RowsOut {
  Tensor moved;  // shape with d moved last
  Tensor rows;   // moved as [outer, len]
};

RowsOut alloc_rows(const Shape& shape, int64_t d, DType dtype, Device dev) {
  Shape moved = shape;
  if (!shape.empty()) {
    moved.erase(moved.begin() + d);
    moved.push_back(shape[d]);
  }
  RowsOut r{make_tensor(moved, dtype, dev), Tensor()};
  r.rows = to_rows(r.moved, moved.empty() ? 0 : static_cast<int64_t>(moved.size()) - 1);
  return r;
}

// The written result in `shape`'s layout: a fresh contiguous tensor.
Tensor finish(const RowsOut& r, const Shape& shape, int64_t d) {
  if (shape.empty() || d == static_cast<int64_t>(shape.size()) - 1) return r.moved;
  return clone(movedim(r.moved, -1, d));
}

int64_t dim_size(const Tensor& x, int64_t d) { return x.dim() == 0 ? 1 : x.sizes()[d]; }

// The first k of each row in sorted order; no autograd.
std::tuple<Tensor, Tensor> sort_raw(const Tensor& x, int64_t d, bool descending, int64_t k,
                                    const char* op) {
  Shape shape = x.sizes();
  if (x.dim() > 0) shape[d] = k;
  Device dev = x.device();
  RowsOut v = alloc_rows(shape, d, x.dtype(), dev), i = alloc_rows(shape, d, DType::Int64, dev);
  require_kernel(backend(dev).sort, op, dev)(v.rows, i.rows, to_rows(x, d), descending, k);
  return {finish(v, shape, d), finish(i, shape, d)};
}

Tensor scatter_along(const Tensor& src, const Tensor& index, int64_t d, const Shape& shape);

// out[..., j, ...] = src[..., index[..., j, ...], ...] along d.
Tensor gather_along(const Tensor& src, const Tensor& index, int64_t d) {
  Device dev = src.device();
  RowsOut r = alloc_rows(index.sizes(), d, src.dtype(), dev);
  require_kernel(backend(dev).gather_rows, "gather", dev)(r.rows, to_rows(src, d),
                                                          to_rows(index, d), false);
  Tensor out = finish(r, index.sizes(), d);
  if (needs_grad({src})) {
    Shape shape = src.sizes();
    record("gather_rows", {src}, {out},
           [idx = SavedTensor(index), d, shape](const Grads& g, Node&) -> Grads {
             return {scatter_along(g[0], idx.unpack(), d, shape)};
           });
  }
  return out;
}

// A zero tensor of `shape` with src's entries placed at `index` along d
// (distinct indices per row): the gradient of picking entries out of a tensor.
Tensor scatter_along(const Tensor& src, const Tensor& index, int64_t d, const Shape& shape) {
  Device dev = src.device();
  RowsOut r = alloc_rows(shape, d, src.dtype(), dev);
  if (r.moved.numel() > 0) backend(dev).fill(r.moved, Scalar(0));
  require_kernel(backend(dev).gather_rows, "scatter", dev)(r.rows, to_rows(src, d),
                                                           to_rows(index, d), true);
  Tensor out = finish(r, shape, d);
  if (needs_grad({src})) {
    record("scatter_rows", {src}, {out},
           [idx = SavedTensor(index), d](const Grads& g, Node&) -> Grads {
             return {gather_along(g[0], idx.unpack(), d)};
           });
  }
  return out;
}

// values = x picked at `indices` along d; `reduced` when d was dropped (keepdim=False).
void record_selection(const char* op, const Tensor& x, const Tensor& values, const Tensor& indices,
                      int64_t d, bool reduced) {
  if (!needs_grad({x})) return;
  reduced = reduced && x.dim() > 0;
  Shape shape = x.sizes();
  record(op, {x}, {values, indices},
         [idx = SavedTensor(indices), d, shape, reduced](const Grads& g, Node&) -> Grads {
           Tensor i = idx.unpack();
           if (!reduced) return {scatter_along(g[0], i, d, shape)};
           return {scatter_along(unsqueeze(g[0], d), unsqueeze(i, d), d, shape)};
         });
}

// Entry `pos` (a tensor broadcastable along d, or one position for all rows)
// of sorted rows, with dim d dropped unless keepdim.
std::tuple<Tensor, Tensor> pick(const Tensor& values, const Tensor& indices, const Tensor& pos,
                                int64_t d, bool keepdim) {
  GradModeGuard no_grad(false);
  if (values.dim() == 0) return {values, indices};
  Tensor v = gather_along(values, pos, d), i = gather_along(indices, pos, d);
  if (keepdim) return {v, i};
  return {clone(squeeze(v, std::vector<int64_t>{d})), clone(squeeze(i, std::vector<int64_t>{d}))};
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool /*stable*/) {
  // Always stable: the kernel orders ties by position.
  int64_t d = wrap_dim(dim, x.dim(), "sort");
  auto [values, indices] = sort_raw(x, d, descending, dim_size(x, d), "sort");
  record_selection("sort", x, values, indices, d, false);
  return {values, indices};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  GradModeGuard no_grad(false);
  return std::get<1>(sort(x, dim, descending, stable));
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest,
                                bool /*sorted*/) {
  // Results always come sorted, which sorted=False permits.
  int64_t d = wrap_dim(dim, x.dim(), "topk");
  int64_t n = dim_size(x, d);
  KILN_CHECK(k >= 0 && k <= n, Runtime, "[topk] selected index k out of range: k = ", k,
             " but dimension ", d, " of the input of shape ", x.sizes(), " has size ", n);
  auto [values, indices] = sort_raw(x, d, largest, k, "topk");
  record_selection("topk", x, values, indices, d, false);
  return {values, indices};
}

std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  int64_t d = wrap_dim(dim, x.dim(), "kthvalue");
  int64_t n = dim_size(x, d);
  KILN_CHECK(n > 0, Index, "[kthvalue] Expected reduction dim ", d,
             " to have non-zero size (input shape ", x.sizes(), ")");
  KILN_CHECK(k >= 1 && k <= n, Runtime, "[kthvalue] selected number k out of range: k = ", k,
             " but dimension ", d, " of the input of shape ", x.sizes(), " has size ", n);
  auto [sv, si] = sort_raw(x, d, false, k, "kthvalue");
  Shape pos_shape = sv.sizes();
  if (x.dim() > 0) pos_shape[d] = 1;
  auto [values, indices] =
      pick(sv, si, full(pos_shape, k - 1, DType::Int64, x.device()), d, keepdim);
  record_selection("kthvalue", x, values, indices, d, !keepdim);
  return {values, indices};
}

std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  int64_t d = wrap_dim(dim, x.dim(), "median");
  int64_t n = dim_size(x, d);
  KILN_CHECK(n > 0, Index,
             "[median] median() cannot compute median for a dimension of size 0 "
             "(input shape ",
             x.sizes(), ")");
  auto [sv, si] = sort_raw(x, d, false, n, "median");
  Shape pos_shape = sv.sizes();
  if (x.dim() > 0) pos_shape[d] = 1;
  Tensor pos = full(pos_shape, (n - 1) / 2, DType::Int64, x.device());
  if (is_floating(x.dtype()) && x.dim() > 0) {
    // NaNs sort last; a row holding any gives its first NaN.
    GradModeGuard no_grad(false);
    Tensor nans = sum(isnan(sv), std::vector<int64_t>{d}, true);
    pos = where(gt(nans, Scalar(0)), rsub(nans, Scalar(n)), pos);
  }
  auto [values, indices] = pick(sv, si, pos, d, keepdim);
  record_selection("median", x, values, indices, d, !keepdim);
  return {values, indices};
}

Tensor median(const Tensor& x) {
  if (x.numel() == 0) {
    // PyTorch's median of nothing is NaN (there is no integer NaN to give).
    KILN_CHECK(is_floating(x.dtype()), Runtime, "[median] median() of an empty ", x.dtype(),
               " tensor is undefined (input shape ", x.sizes(), ")");
    return full({}, std::numeric_limits<double>::quiet_NaN(), x.dtype(), x.device());
  }
  return std::get<0>(median(reshape(x, {x.numel()}), 0, false));
}

namespace {

// unique(dim=d): the distinct slices along d, in lexicographic order. Built
// from sorting and indexing ops, so it runs on every device: stable argsorts
// by each column from the last to the first order the rows, then a row
// starts a group where it differs from the one before it.
std::tuple<Tensor, Tensor, Tensor> unique_dim(const Tensor& x, int64_t dim) {
  GradModeGuard no_grad(false);
  const int64_t d = wrap_dim(dim, x.dim(), "unique");
  const Device dev = x.device();
  Tensor moved = contiguous(movedim(detach(x), d, 0));
  const int64_t n = moved.size(0);
  if (n == 0) {
    return {clone(x), make_tensor({0}, DType::Int64, dev), make_tensor({0}, DType::Int64, dev)};
  }
  Tensor rows = reshape(moved, {n, moved.numel() / n});
  Tensor order = arange(0, n, 1, DType::Int64, dev);
  for (int64_t c = rows.size(1) - 1; c >= 0; --c) {
    Tensor key = index_select(select(rows, 1, c), 0, order);
    order = index_select(order, 0, argsort(key, 0, false, /*stable=*/true));
  }
  Tensor sorted = index_select(rows, 0, order);
  Tensor differs = any(ne(narrow(sorted, 0, 1, n - 1), narrow(sorted, 0, 0, n - 1)),
                       std::vector<int64_t>{1});
  Tensor starts = cat({ones({1}, DType::Bool, dev), differs}, 0);
  Tensor group = sub(cumsum(starts, 0, DType::Int64), Scalar(1));
  Tensor first_rows = reshape(nonzero(starts), {-1});
  const int64_t groups = first_rows.size(0);
  Shape out_shape = moved.sizes();
  out_shape[0] = groups;
  Tensor out = movedim(reshape(index_select(sorted, 0, first_rows), out_shape), 0, d);
  Tensor inverse = scatter(make_tensor({n}, DType::Int64, dev), 0, order, group);
  Tensor counts = index_add(zeros({groups}, DType::Int64, dev), 0, group,
                            ones({n}, DType::Int64, dev));
  return {contiguous(out), inverse, counts};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool /*sorted*/,
                                          std::optional<int64_t> dim) {
  if (dim) return unique_dim(x, *dim);
  // Output is always sorted, which sorted=False permits.
  const int64_t n = x.numel();
  Device dev = x.device();
  auto [sv, perm] = sort_raw(reshape(detach(x), {n}), 0, false, n, "unique");
  Tensor out = make_tensor({n}, x.dtype(), dev), counts = make_tensor({n}, DType::Int64, dev);
  Tensor inverse = make_tensor(x.sizes(), DType::Int64, dev);
  int64_t groups = require_kernel(backend(dev).unique_sorted, "unique", dev)(
      out, view(inverse, {n}), counts, sv, perm);
  return {clone(narrow(out, 0, 0, groups)), inverse, clone(narrow(counts, 0, 0, groups))};
}

}  // namespace kiln
