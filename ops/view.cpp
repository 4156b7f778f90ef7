#include "ops/view.h"

#include <algorithm>
#include <numeric>

#include "autograd/function.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/export_trace.h"
#include "ops/index.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

// Records a view op whose backward is `bw(grad)`.
template <typename F>
Tensor record_view(const char* name, const Tensor& in, Tensor out, F bw) {
  if (needs_grad({in})) {
    record(name, {in}, {out}, [bw](const Grads& g, Node&) -> Grads { return {bw(g[0])}; });
  }
  return out;
}

// The gradient of a select/slice: zeros of the input's shape with `g` written
// into the part `take` extracts. Recorded as its own op (backward: take again)
// so that create_graph differentiates through it; writing g with copy_ into a
// fresh buffer would drop g's history.
template <typename F>
Tensor embed_grad(const char* name, const Tensor& g, const Shape& in_shape, F take) {
  Tensor z = zeros(in_shape, g.dtype(), g.device());
  {
    GradModeGuard no_grad(false);
    copy_(take(z), g);
  }
  if (needs_grad({g})) {
    record(name, {g}, {z}, [take](const Grads& gg, Node&) -> Grads { return {take(gg[0])}; });
  }
  return z;
}

}  // namespace

Tensor view(const Tensor& t, const Shape& shape) {
  tracing::OpScope scope("view");
  Shape target = infer_size(shape, t.numel(), "view");
  Shape strides;
  if (t.is_contiguous()) strides = contiguous_strides(target);
  KILN_CHECK(t.is_contiguous() || compute_view_strides(t.sizes(), t.strides(), target, &strides), Runtime,
             "[view] size ", target, " is not compatible with input of shape ", t.sizes(),
             " and strides ", t.strides(),
             " (at least one dimension spans across two contiguous subspaces). Use .reshape(...) "
             "instead.");
  Shape in_shape = t.sizes();
  return scope.out(record_view("view", t, make_view(t, target, strides, t.storage_offset()),
                               [in_shape](const Tensor& g) { return reshape(g, in_shape); }),
                   t, shape);
}

// Note [Viewing as another dtype]
// The bytes stay where they are; only the element type and, when the element sizes
// differ, the last dim change: each element splits into (or several merge into) elements of
// the new size along the last dim, which therefore must be contiguous (stride 1), and on
// merging the last size, the offset and the other strides must be multiples of the ratio
// so every new element starts on its boundary. As in PyTorch the result carries no
// gradient (a bit pattern has no derivative) but shares the version counter.
Tensor view_dtype(const Tensor& t, DType dtype) {
  const int64_t from = static_cast<int64_t>(itemsize(t.dtype()));
  const int64_t to = static_cast<int64_t>(itemsize(dtype));
  Shape sizes = t.sizes(), strides = t.strides();
  int64_t offset = t.storage_offset();
  const char* a = dtype_name(t.dtype());
  const char* b = dtype_name(dtype);
  if (from != to) {
    KILN_CHECK(t.dim() > 0, Runtime, "[view] self.dim() cannot be 0 to view ", a, " as ", b,
               " (different element sizes)");
    KILN_CHECK(t.strides().back() == 1, Runtime, "[view] self.stride(-1) must be 1 to view ",
               a, " as ", b, " (different element sizes), but got ", t.strides().back());
  }
  if (from > to) {
    const int64_t ratio = from / to;
    for (size_t i = 0; i + 1 < strides.size(); ++i) strides[i] *= ratio;
    sizes.back() *= ratio;
    offset *= ratio;
  } else if (from < to) {
    const int64_t ratio = to / from;
    KILN_CHECK(sizes.back() % ratio == 0, Runtime, "[view] self.size(-1) must be divisible by ",
               ratio, " to view ", a, " as ", b, " (different element sizes), but got ",
               sizes.back());
    KILN_CHECK(offset % ratio == 0, Runtime, "[view] self.storage_offset() must be divisible by ",
               ratio, " to view ", a, " as ", b, " (different element sizes), but got ", offset);
    for (size_t i = 0; i + 1 < strides.size(); ++i) {
      KILN_CHECK(strides[i] % ratio == 0, Runtime, "[view] self.stride(", i,
                 ") must be divisible by ", ratio, " to view ", a, " as ", b,
                 " (different element sizes), but got ", strides[i]);
      strides[i] /= ratio;
    }
    sizes.back() /= ratio;
    offset /= ratio;
  }
  Tensor out = make_view(t, sizes, strides, offset);
  out.impl()->dtype_ = dtype;
  return out;
}

Tensor reshape(const Tensor& t, const Shape& shape) {
  tracing::OpScope scope("reshape");
  Shape target = infer_size(shape, t.numel(), "reshape");
  Shape strides;
  if (compute_view_strides(t.sizes(), t.strides(), target, &strides))
    return scope.out(view(t, target), t, shape);
  return scope.out(view(clone(t), target), t, shape);
}

Tensor expand(const Tensor& t, const Shape& shape) {
  tracing::OpScope scope("expand");
  const int64_t nd = static_cast<int64_t>(shape.size());
  KILN_CHECK(nd >= t.dim(), Runtime, "[expand] the number of sizes provided (", nd,
             ") must be greater or equal to the number of dimensions in the tensor (", t.dim(),
             ")");
  Shape sizes(nd), strides(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t j = i - (nd - t.dim());
    int64_t want = shape[i];
    if (j >= 0) {
      int64_t have = t.sizes()[j];
      if (want == -1) want = have;
      KILN_CHECK(have == want || have == 1, Runtime, "[expand] the expanded size of the tensor (",
                 want, ") must match the existing size (", have, ") at non-singleton dimension ",
                 i, ".  Target sizes: ", shape, ".  Tensor sizes: ", t.sizes());
      sizes[i] = want;
      strides[i] = have == want ? t.strides()[j] : 0;
    } else {
      KILN_CHECK(want >= 0, Runtime, "[expand] the expanded size of the tensor (", want,
                 ") isn't allowed in a leading, non-existing dimension ", i);
      sizes[i] = want;
      strides[i] = 0;
    }
  }
  if (sizes == t.sizes()) return scope.out(t, t, shape);
  checked_numel(sizes, "expand");
  // The engine sums broadcast gradients down to the input's shape.
  return scope.out(record_view("expand", t, make_view(t, sizes, strides, t.storage_offset()),
                               [](const Tensor& g) { return g; }),
                   t, shape);
}

Tensor permute(const Tensor& t, const std::vector<int64_t>& dims) {
  tracing::OpScope scope("permute");
  KILN_CHECK(static_cast<int64_t>(dims.size()) == t.dim(), Runtime,
             "[permute] number of dims don't match in permute: input has ", t.dim(),
             " dims but dims has ", dims.size(), " entries");
  std::vector<int64_t> wrapped(dims.size());
  std::vector<bool> seen(dims.size(), false);
  Shape sizes(dims.size()), strides(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], t.dim(), "permute");
    KILN_CHECK(!seen[d], Runtime, "[permute] repeated dim ", d, " in dims ", Shape(dims));
    seen[d] = true;
    wrapped[i] = d;
    sizes[i] = t.sizes()[d];
    strides[i] = t.strides()[d];
  }
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[wrapped[i]] = static_cast<int64_t>(i);
  return scope.out(record_view("permute", t, make_view(t, sizes, strides, t.storage_offset()),
                               [inverse](const Tensor& g) { return permute(g, inverse); }),
                   t, dims);
}

Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1) {
  tracing::OpScope scope("transpose");
  if (t.dim() == 0) {
    wrap_dim(dim0, 0, "transpose");
    wrap_dim(dim1, 0, "transpose");
    return scope.out(t, t, dim0, dim1);
  }
  int64_t a = wrap_dim(dim0, t.dim(), "transpose"), b = wrap_dim(dim1, t.dim(), "transpose");
  std::vector<int64_t> dims(t.dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[a], dims[b]);
  return scope.out(permute(t, dims), t, dim0, dim1);
}

Tensor t(const Tensor& x) {
  tracing::OpScope scope("t");
  KILN_CHECK(x.dim() <= 2, Runtime, "[t] t() expects a tensor with <= 2 dimensions, but self is ",
             x.dim(), "D");
  return scope.out(x.dim() < 2 ? x : transpose(x, 0, 1), x);
}

Tensor mT(const Tensor& x) {
  KILN_CHECK(x.dim() >= 2, Runtime,
             "[mT] tensor.mT is only supported on matrices or batches of matrices. Got ", x.dim(),
             "-D tensor.");
  return transpose(x, -2, -1);
}

Tensor squeeze(const Tensor& x, std::optional<std::vector<int64_t>> dims) {
  tracing::OpScope scope("squeeze");
  std::vector<bool> drop(x.dim(), false);
  if (dims) {
    for (int64_t d : *dims) {
      int64_t w = wrap_dim(d, x.dim(), "squeeze");
      if (x.dim() > 0 && x.sizes()[w] == 1) drop[w] = true;
    }
  } else {
    for (int64_t i = 0; i < x.dim(); ++i) drop[i] = x.sizes()[i] == 1;
  }
  Shape sizes, strides;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (drop[i]) continue;
    sizes.push_back(x.sizes()[i]);
    strides.push_back(x.strides()[i]);
  }
  if (sizes.size() == static_cast<size_t>(x.dim())) return scope.out(x, x, dims);
  Shape in_shape = x.sizes();
  return scope.out(record_view("squeeze", x, make_view(x, sizes, strides, x.storage_offset()),
                               [in_shape](const Tensor& g) { return reshape(g, in_shape); }),
                   x, dims);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  tracing::OpScope scope("unsqueeze");
  int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t st = d < x.dim() ? x.sizes()[d] * x.strides()[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return scope.out(
      record_view("unsqueeze", x, make_view(x, sizes, strides, x.storage_offset()),
                  [d](const Tensor& g) { return squeeze(g, std::vector<int64_t>{d}); }),
      x, dim);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  tracing::OpScope scope("select");
  KILN_CHECK(x.dim() > 0, Index, "[select] select() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, x.dim(), "select");
  int64_t size = x.sizes()[d];
  KILN_CHECK(index >= -size && index < size, Index, "[select] index ", index,
             " is out of bounds for dimension ", d, " with size ", size);
  if (index < 0) index += size;
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t offset = x.storage_offset() + index * strides[d];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  Shape in_shape = x.sizes();
  return scope.out(record_view("select", x, make_view(x, sizes, strides, offset),
                               [in_shape, d, index](const Tensor& g) {
                                 return embed_grad(
                                     "select_backward", g, in_shape,
                                     [d, index](const Tensor& z) { return select(z, d, index); });
                               }),
                   x, dim, index);
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start_opt,
             std::optional<int64_t> end_opt, int64_t step) {
  tracing::OpScope scope("slice");
  KILN_CHECK(x.dim() > 0, Index, "[slice] slice() cannot be applied to a 0-dim tensor.");
  KILN_CHECK(step > 0, Value, "[slice] step must be greater than zero, got ", step);
  int64_t d = wrap_dim(dim, x.dim(), "slice");
  int64_t size = x.sizes()[d];
  int64_t start = start_opt.value_or(0), end = end_opt.value_or(size);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t offset = x.storage_offset() + start * strides[d];
  sizes[d] = end > start ? (end - start - 1) / step + 1 : 0;
  // The scaled stride overflows only for a step past the end (x[::2**62]),
  // which leaves at most one element: its stride never scales an index.
  int64_t scaled;
  if (!mul_overflows(strides[d], step, &scaled)) strides[d] = scaled;
  Shape in_shape = x.sizes();
  return scope.out(record_view("slice", x, make_view(x, sizes, strides, offset),
                               [in_shape, d, start, end, step](const Tensor& g) {
                                 return embed_grad("slice_backward", g, in_shape,
                                                   [d, start, end, step](const Tensor& z) {
                                                     return slice(z, d, start, end, step);
                                                   });
                               }),
                   x, dim, start_opt, end_opt, step);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  tracing::OpScope scope("narrow");
  KILN_CHECK(x.dim() > 0, Index, "[narrow] narrow() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, x.dim(), "narrow");
  int64_t size = x.sizes()[d];
  KILN_CHECK(start >= -size && start <= size, Index, "[narrow] start (", start,
             ") is out of range for dimension ", d, " of size ", size);
  if (start < 0) start += size;
  KILN_CHECK(length >= 0 && start + length <= size, Runtime, "[narrow] start (", start,
             ") + length (", length, ") exceeds dimension size (", size, ").");
  return scope.out(slice(x, d, start, start + length, 1), x, dim, start, length);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  tracing::OpScope scope("flatten");
  if (x.dim() == 0) return scope.out(reshape(x, {1}), x, start_dim, end_dim);
  int64_t s = wrap_dim(start_dim, x.dim(), "flatten"), e = wrap_dim(end_dim, x.dim(), "flatten");
  KILN_CHECK(s <= e, Runtime, "[flatten] start_dim (", s, ") cannot come after end_dim (", e, ")");
  if (s == e) return scope.out(x, x, start_dim, end_dim);
  Shape shape(x.sizes().begin(), x.sizes().begin() + s);
  int64_t prod = 1;
  for (int64_t i = s; i <= e; ++i) prod *= x.sizes()[i];
  shape.push_back(prod);
  shape.insert(shape.end(), x.sizes().begin() + e + 1, x.sizes().end());
  return scope.out(reshape(x, shape), x, start_dim, end_dim);
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  tracing::OpScope scope("unflatten");
  int64_t d = wrap_dim(dim, x.dim(), "unflatten");
  KILN_CHECK(!sizes.empty(), Runtime, "[unflatten] sizes must be non-empty");
  Shape inner = infer_size(sizes, x.sizes()[d], "unflatten");
  Shape shape(x.sizes().begin(), x.sizes().begin() + d);
  shape.insert(shape.end(), inner.begin(), inner.end());
  shape.insert(shape.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return scope.out(view(x, shape), x, dim, sizes);
}

Tensor movedim(const Tensor& x, int64_t source, int64_t destination) {
  int64_t s = wrap_dim(source, x.dim(), "movedim"), d = wrap_dim(destination, x.dim(), "movedim");
  std::vector<int64_t> order;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != s) order.push_back(i);
  order.insert(order.begin() + d, s);
  return permute(x, order);
}

Tensor movedim(const Tensor& x, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination) {
  KILN_CHECK(source.size() == destination.size(), Runtime, "[movedim] Invalid source or "
             "destination dims: source (", source, " dims) should contain the same number of "
             "dims as destination (", destination, " dims)");
  const int64_t n = x.dim();
  std::vector<int64_t> order(n, -1);
  std::vector<bool> moved(n, false);
  for (size_t i = 0; i < source.size(); ++i) {
    const int64_t s = wrap_dim(source[i], n, "movedim");
    const int64_t d = wrap_dim(destination[i], n, "movedim");
    KILN_CHECK(!moved[s], Runtime, "[movedim] repeated dim in `source` (", source, ")");
    KILN_CHECK(order[d] < 0, Runtime, "[movedim] repeated dim in `destination` (", destination,
               ")");
    moved[s] = true;
    order[d] = s;
  }
  int64_t next = 0;
  for (int64_t& o : order) {
    if (o >= 0) continue;
    while (moved[next]) ++next;
    o = next++;
  }
  return permute(x, order);
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  const int64_t d1 = wrap_dim(dim1, x.dim(), "diagonal"), d2 = wrap_dim(dim2, x.dim(), "diagonal");
  KILN_CHECK(d1 != d2, Runtime, "[diagonal] diagonal dimensions cannot be identical, got dim1=",
             dim1, " and dim2=", dim2, " for input of shape ", x.sizes());
  const int64_t n1 = x.sizes()[d1], n2 = x.sizes()[d2];
  const int64_t len = std::max<int64_t>(
      0, offset >= 0 ? std::min(n1, n2 - offset) : std::min(n1 + offset, n2));
  int64_t start = x.storage_offset();
  if (len > 0) start += offset >= 0 ? offset * x.strides()[d2] : -offset * x.strides()[d1];
  Shape sizes, strides;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i == d1 || i == d2) continue;
    sizes.push_back(x.sizes()[i]);
    strides.push_back(x.strides()[i]);
  }
  sizes.push_back(len);
  strides.push_back(x.strides()[d1] + x.strides()[d2]);
  const Shape in_shape = x.sizes();
  return record_view("diagonal", x, make_view(x, sizes, strides, start),
                     [in_shape, offset, d1, d2](const Tensor& g) {
                       return embed_grad("diagonal_backward", g, in_shape,
                                         [offset, d1, d2](const Tensor& z) {
                                           return diagonal(z, offset, d1, d2);
                                         });
                     });
}

Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step) {
  int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), "unfold");
  int64_t len = x.dim() == 0 ? 1 : x.sizes()[d];
  KILN_CHECK(size <= len, Runtime, "[unfold] maximum size for tensor at dimension ", d, " is ", len,
             " but size is ", size);
  KILN_CHECK(size >= 0, Runtime, "[unfold] size is ", size, " but must be >= 0");
  KILN_CHECK(step > 0, Runtime, "[unfold] step is ", step, " but must be > 0");
  Shape sizes = x.sizes(), strides = x.strides();
  if (x.dim() == 0) {
    sizes = {1};
    strides = {1};
  }
  int64_t st = strides[d];
  const int64_t windows = (len - size) / step + 1;
  sizes[d] = windows;
  // As in slice, the stride overflows only when the step leaves one window.
  int64_t scaled;
  if (!mul_overflows(st, step, &scaled)) strides[d] = scaled;
  sizes.push_back(size);
  strides.push_back(st);
  // Overlapping windows can hold more elements than the input (a 2**62-long expanded row).
  checked_numel(sizes, "unfold");
  Tensor out = make_view(x, sizes, strides, x.storage_offset());
  Shape in_shape = x.sizes();
  if (x.dim() == 0) {
    return record_view("unfold", x, out, [](const Tensor& g) { return reshape(g, {}); });
  }
  // Windows overlap when step < size, so an input element sums the gradients
  // of all its copies: offset k of every window reads positions k, k + step, ...
  return record_view("unfold", x, out, [in_shape, d, windows, size, step](const Tensor& g) {
    Tensor total;
    for (int64_t k = 0; k < size; ++k) {
      Tensor placed = embed_grad("unfold_backward", select(g, -1, k), in_shape,
                                 [d, k, windows, step](const Tensor& z) {
                                   return slice(z, d, k, k + (windows - 1) * step + 1, step);
                                 });
      total = total.defined() ? add(total, placed) : placed;
    }
    return total;
  });
}

Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides,
                  std::optional<int64_t> storage_offset) {
  KILN_CHECK(sizes.size() == strides.size(), Runtime, "[as_strided] mismatch in length of sizes (",
             sizes.size(), ") and strides (", strides.size(), ")");
  int64_t offset = storage_offset.value_or(x.storage_offset());
  KILN_CHECK(offset >= 0, Runtime, "[as_strided] Tensor: invalid storage offset ", offset);
  for (size_t i = 0; i < sizes.size(); ++i) {
    KILN_CHECK(sizes[i] >= 0 && strides[i] >= 0, Runtime,
               "[as_strided] sizes and strides must be non-negative, got ", sizes, " and ",
               strides);
  }
  checked_numel(sizes, "as_strided");
  const int64_t storage_numel = static_cast<int64_t>(x.storage()->nbytes / x.itemsize());
  KILN_CHECK(checked_storage_extent(sizes, strides, offset, "as_strided") <= storage_numel, Runtime,
             "[as_strided] view of sizes ", sizes, ", strides ", strides, " and storage offset ",
             offset, " is out of bounds for storage of ", storage_numel, " elements");
  // Backward scatters the gradient into a buffer shaped like the whole
  // storage (index_add sums where the view overlaps itself, as unfold with
  // step < size does), then reads it back through the input's geometry.
  return record_view("as_strided", x, make_view(x, sizes, strides, offset),
                     [=, in_sizes = x.sizes(), in_strides = x.strides(),
                      in_offset = x.storage_offset()](const Tensor& g) -> Tensor {
                       Tensor slots = arange(0, storage_numel, 1, DType::Int64, g.device());
                       Tensor read = reshape(as_strided(slots, sizes, strides, offset), {-1});
                       Tensor flat = zeros({storage_numel}, g.dtype(), g.device());
                       flat = index_add(flat, 0, read, reshape(g, {-1}), Scalar(1));
                       return as_strided(flat, in_sizes, in_strides, in_offset);
                     });
}

}  // namespace kiln
