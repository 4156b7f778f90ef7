#include "ops/shape.h"

#include <algorithm>
#include <map>

#include "autograd/function.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/promotion.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/backend.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/export_trace.h"
#include "ops/index.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

// Kernel copy without autograd; src has dst's shape (any dtype and strides).
void copy_raw(const Tensor& dst, const Tensor& src) {
  if (dst.numel() > 0) backend(dst.device()).copy(dst, src);
}

// Checks the (non-empty) list shares one device and returns the promoted dtype.
DType list_dtype(const std::vector<Tensor>& tensors, const char* op) {
  DType dtype = tensors[0].dtype();
  for (size_t i = 1; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].device() == tensors[0].device(), Runtime, "[", op,
               "] Expected all tensors to be on the same device, but found at least two devices, ",
               tensors[0].device(), " and ", tensors[i].device(), "!");
    dtype = promote_types(dtype, tensors[i].dtype());
  }
  return dtype;
}

bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  tracing::OpScope scope("cat");
  if (auto ac = autocast_args("cat", tensors)) return scope.out(cat(ac->all(), dim), tensors, dim);
  KILN_CHECK(!tensors.empty(), Value, "[cat] expected a non-empty list of Tensors");
  DType dtype = list_dtype(tensors, "cat");
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].dim() > 0, Runtime, "[cat] zero-dimensional tensor (at position ", i,
               ") cannot be concatenated");
    if (!ref && !is_legacy_empty(tensors[i])) ref = &tensors[i];
  }
  Device dev = tensors[0].device();
  // Offsets of each input along dim in the result; -1 for skipped inputs.
  std::vector<int64_t> offsets(tensors.size(), -1), lengths(tensors.size(), 0);
  Tensor out;
  int64_t d = 0;
  if (!ref) {
    // Nothing to join: PyTorch returns an empty tensor whatever dim says.
    out = make_tensor({0}, dtype, dev);
  } else {
    d = wrap_dim(dim, ref->dim(), "cat");
    Shape shape = ref->sizes();
    shape[d] = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      if (is_legacy_empty(t)) continue;
      KILN_CHECK(t.dim() == ref->dim(), Runtime,
                 "[cat] Tensors must have same number of dimensions: got ", ref->dim(), " and ",
                 t.dim(), " (shapes ", ref->sizes(), " and ", t.sizes(), " at position ", i, ")");
      for (int64_t k = 0; k < t.dim(); ++k) {
        KILN_CHECK(k == d || t.sizes()[k] == ref->sizes()[k], Runtime,
                   "[cat] Sizes of tensors must match except in dimension ", d, ". Expected size ",
                   ref->sizes()[k], " but got size ", t.sizes()[k], " for tensor number ", i,
                   " in the list (shapes ", ref->sizes(), " and ", t.sizes(), ")");
      }
      offsets[i] = shape[d];
      lengths[i] = t.sizes()[d];
      KILN_CHECK(!add_overflows(shape[d], lengths[i], &shape[d]), Runtime,
                 "[cat] Storage size calculation overflowed: the sizes along dim ", d,
                 " sum past int64 at tensor number ", i, " (shape ", t.sizes(), ")");
    }
    out = make_tensor(shape, dtype, dev, "cat");
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (offsets[i] >= 0) copy_raw(narrow(out, d, offsets[i], lengths[i]), tensors[i]);
    }
  }
  if (needs_grad(tensors)) {
    record("cat", tensors, {out}, [d, offsets, lengths](const Grads& g, Node&) -> Grads {
      Grads r(offsets.size());
      for (size_t i = 0; i < offsets.size(); ++i) {
        r[i] = offsets[i] >= 0 ? narrow(g[0], d, offsets[i], lengths[i])
                               : zeros({0}, g[0].dtype(), g[0].device());
      }
      return r;
    });
  }
  return scope.out(out, tensors, dim);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  profiler::RecordScope profile("stack");
  if (auto ac = autocast_args("stack", tensors)) return stack(ac->all(), dim);
  KILN_CHECK(!tensors.empty(), Runtime, "[stack] stack expects a non-empty TensorList");
  DType dtype = list_dtype(tensors, "stack");
  const Shape& shape = tensors[0].sizes();
  for (size_t i = 1; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].sizes() == shape, Runtime,
               "[stack] stack expects each tensor to be equal size, but got ", shape,
               " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
  }
  int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  Shape out_shape = shape;
  out_shape.insert(out_shape.begin() + d, static_cast<int64_t>(tensors.size()));
  Tensor out = make_tensor(out_shape, dtype, tensors[0].device());
  for (size_t i = 0; i < tensors.size(); ++i) {
    copy_raw(select(out, d, static_cast<int64_t>(i)), tensors[i]);
  }
  if (needs_grad(tensors)) {
    record("stack", tensors, {out}, [d](const Grads& g, Node&) -> Grads {
      Grads r(g[0].sizes()[d]);
      for (size_t i = 0; i < r.size(); ++i) r[i] = select(g[0], d, static_cast<int64_t>(i));
      return r;
    });
  }
  return out;
}

Tensor hstack(const std::vector<Tensor>& tensors) {
  KILN_CHECK(!tensors.empty(), Runtime, "[hstack] expects a non-empty TensorList");
  std::vector<Tensor> ts;
  for (const Tensor& t : tensors) ts.push_back(t.dim() == 0 ? reshape(t, {1}) : t);
  return cat(ts, ts[0].dim() == 1 ? 0 : 1);
}

Tensor vstack(const std::vector<Tensor>& tensors) {
  KILN_CHECK(!tensors.empty(), Runtime, "[vstack] expects a non-empty TensorList");
  std::vector<Tensor> ts;
  for (const Tensor& t : tensors) {
    if (t.dim() == 0)
      ts.push_back(reshape(t, {1, 1}));
    else if (t.dim() == 1)
      ts.push_back(unsqueeze(t, 0));
    else
      ts.push_back(t);
  }
  return cat(ts, 0);
}

Tensor dstack(const std::vector<Tensor>& tensors) {
  KILN_CHECK(!tensors.empty(), Runtime, "[dstack] expects a non-empty TensorList");
  std::vector<Tensor> ts;
  for (const Tensor& t : tensors) {
    if (t.dim() == 0)
      ts.push_back(reshape(t, {1, 1, 1}));
    else if (t.dim() == 1)
      ts.push_back(view(t, {1, t.size(0), 1}));
    else if (t.dim() == 2)
      ts.push_back(unsqueeze(t, 2));
    else
      ts.push_back(t);
  }
  return cat(ts, 2);
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes,
                                     int64_t dim) {
  KILN_CHECK(x.dim() > 0, Runtime, "[split] split expects at least a 1-dimensional tensor");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, Runtime,
               "[split] split_with_sizes expects split_sizes have only non-negative entries, but "
               "got split_sizes=",
               sizes);
    total += s;
  }
  KILN_CHECK(total == x.sizes()[d], Runtime,
             "[split] split_with_sizes expects split_sizes to sum "
             "exactly to ",
             x.sizes()[d], " (input tensor's size at dimension ", d,
             "), but got split_sizes=", sizes);
  std::vector<Tensor> out;
  {
    GradModeGuard no_grad(false);
    int64_t start = 0;
    for (int64_t s : sizes) {
      out.push_back(narrow(x, d, start, s));
      start += s;
    }
  }
  if (needs_grad({x})) {
    // One node for all the pieces, whose backward is one cat of their gradients (zeros for a
    // piece nobody used). A slice node per piece would write an input-sized, zero-filled
    // gradient for each, for the engine to add up: for a transformer's qkv split that was three
    // fills, three copies and two adds of the whole projection per layer.
    std::vector<Shape> shapes;
    for (const Tensor& o : out) shapes.push_back(o.sizes());
    record("split", {x}, out,
           [shapes, d, dtype = x.dtype(), device = x.device()](const std::vector<Tensor>& g,
                                                              Node&) -> std::vector<Tensor> {
             std::vector<Tensor> parts;
             for (size_t i = 0; i < shapes.size(); ++i)
               parts.push_back(i < g.size() && g[i].defined() ? g[i]
                                                              : zeros(shapes[i], dtype, device));
             return {cat(parts, d)};
           });
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  tracing::OpScope scope("split");
  KILN_CHECK(x.dim() > 0, Runtime, "[split] split expects at least a 1-dimensional tensor");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t n = x.sizes()[d];
  KILN_CHECK(split_size >= 0, Runtime,
             "[split] split expects split_size be non-negative, but got split_size=", split_size);
  KILN_CHECK(split_size > 0 || n == 0, Runtime,
             "[split] split_size can only be 0 if dimension size is 0, but got dimension size of ",
             n);
  int64_t count = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  std::vector<int64_t> sizes(count, split_size);
  sizes.back() = n - split_size * (count - 1);
  return scope.outs(split_with_sizes(x, sizes, d), x, split_size, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  tracing::OpScope scope("chunk");
  KILN_CHECK(x.dim() > 0, Runtime, "[chunk] chunk expects at least a 1-dimensional tensor");
  KILN_CHECK(chunks > 0, Runtime,
             "[chunk] chunk expects `chunks` to be greater than 0, got: ", chunks);
  int64_t d = wrap_dim(dim, x.dim(), "chunk");
  int64_t n = x.sizes()[d];
  // An empty dim still yields `chunks` (empty) pieces, as in PyTorch.
  if (n == 0)
    return scope.outs(split_with_sizes(x, std::vector<int64_t>(chunks, 0), d), x, chunks, dim);
  return scope.outs(split(x, (n + chunks - 1) / chunks, d), x, chunks, dim);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  KILN_CHECK(x.dim() > 0, Index, "[unbind] Dimension specified as ", dim,
             " but tensor has no dimensions");
  int64_t d = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.sizes()[d]; ++i) out.push_back(select(x, d, i));
  return out;
}

std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim) {
  KILN_CHECK(x.dim() > 0, Runtime, "[tensor_split] expected at least a 1-dimensional tensor, "
             "but got a tensor with ", x.dim(), " dims");
  KILN_CHECK(sections > 0, Runtime, "[tensor_split] number of sections must be larger than 0, "
             "got ", sections);
  const int64_t d = wrap_dim(dim, x.dim(), "tensor_split");
  const int64_t n = x.size(d), small = n / sections, larger = n % sections;
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t i = 0; i < sections; ++i) {
    const int64_t len = small + (i < larger ? 1 : 0);
    out.push_back(slice(x, d, start, start + len));
    start += len;
  }
  return out;
}

std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<int64_t>& indices,
                                 int64_t dim) {
  KILN_CHECK(x.dim() > 0, Runtime, "[tensor_split] expected at least a 1-dimensional tensor, "
             "but got a tensor with ", x.dim(), " dims");
  const int64_t d = wrap_dim(dim, x.dim(), "tensor_split");
  std::vector<Tensor> out;
  std::optional<int64_t> start = 0;
  for (int64_t index : indices) {
    out.push_back(slice(x, d, start, index));
    start = index;
  }
  out.push_back(slice(x, d, start, std::nullopt));
  return out;
}

std::vector<Tensor> tensor_split(const Tensor& x, const Tensor& indices_or_sections, int64_t dim) {
  const Tensor& ios = indices_or_sections;
  KILN_CHECK(ios.device().is_cpu(), Runtime, "[tensor_split] expected tensor_indices_or_sections "
             "to be on cpu, but it's on ", ios.device());
  KILN_CHECK(ios.dtype() == DType::Int64, Runtime, "[tensor_split] expected "
             "tensor_indices_or_sections to have dtype of long, but got ",
             scalar_type_name(ios.dtype()));
  KILN_CHECK(ios.dim() <= 1, Runtime, "[tensor_split] expected tensor_indices_or_sections to be a "
             "zero-dimensional or one-dimensional tensor, but got a tensor with ", ios.dim(),
             " dims (shape ", ios.sizes(), ")");
  Tensor values = contiguous(ios);
  const int64_t* p = values.data<int64_t>();
  if (ios.dim() == 0) return tensor_split(x, p[0], dim);
  return tensor_split(x, std::vector<int64_t>(p, p + values.numel()), dim);
}

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> ds = wrap_dims(dims, x.dim(), "flip");
  // Reading through a view with negated strides and copying out reverses the
  // data with the ordinary strided copy kernel (so every backend's copy must
  // accept negative strides); the view never escapes.
  Shape strides = x.strides();
  int64_t offset = x.storage_offset();
  for (int64_t d : ds) {
    if (x.dim() == 0 || x.sizes()[d] <= 1) continue;
    offset += (x.sizes()[d] - 1) * strides[d];
    strides[d] = -strides[d];
  }
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  copy_raw(out, make_view(detach(x), x.sizes(), strides, offset));
  if (needs_grad({x})) {
    record("flip", {x}, {out}, [ds](const Grads& g, Node&) -> Grads { return {flip(g[0], ds)}; });
  }
  return out;
}

namespace {

// Copies src rolled by shifts[i] along dims[i] into dst: each rolled dim splits
// into two blocks, so 2^len(dims) block copies and no temporaries.
void roll_blocks(const Tensor& dst, const Tensor& src, const std::vector<int64_t>& dims,
                 const std::vector<int64_t>& shifts, size_t i) {
  if (i == dims.size()) {
    copy_raw(dst, src);
    return;
  }
  int64_t d = dims[i], n = src.sizes()[d], k = shifts[i];
  roll_blocks(slice(dst, d, k, n), slice(src, d, 0, n - k), dims, shifts, i + 1);
  roll_blocks(slice(dst, d, 0, k), slice(src, d, n - k, n), dims, shifts, i + 1);
}

}  // namespace

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  if (dims.empty()) {
    KILN_CHECK(shifts.size() == 1, Runtime,
               "[roll] shifts and dimensions must align. shifts: ", shifts.size(), ", dims: 0");
    return reshape(roll(flatten(x), shifts, {0}), x.sizes());
  }
  KILN_CHECK(shifts.size() == dims.size(), Runtime,
             "[roll] shifts and dimensions must align. shifts: ", shifts.size(),
             ", dims: ", dims.size());
  KILN_CHECK(x.dim() > 0, Index, "[roll] Dimension specified as ", dims[0],
             " but tensor has no dimensions");
  // Repeated dims add their shifts; only non-trivial rolls become blocks.
  std::map<int64_t, int64_t> total;
  for (size_t i = 0; i < dims.size(); ++i) total[wrap_dim(dims[i], x.dim(), "roll")] += shifts[i];
  std::vector<int64_t> bdims, bshifts;
  for (auto [d, s] : total) {
    int64_t n = x.sizes()[d];
    int64_t k = n == 0 ? 0 : ((s % n) + n) % n;
    if (k == 0) continue;
    bdims.push_back(d);
    bshifts.push_back(k);
  }
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  roll_blocks(out, detach(x), bdims, bshifts, 0);
  if (needs_grad({x})) {
    std::vector<int64_t> back;
    for (int64_t s : shifts) back.push_back(-s);
    record("roll", {x}, {out},
           [back, dims](const Grads& g, Node&) -> Grads { return {roll(g[0], back, dims)}; });
  }
  return out;
}

Tensor rot90(const Tensor& x, int64_t k, const std::vector<int64_t>& dims) {
  const int64_t nd = x.dim();
  KILN_CHECK(dims.size() == 2, Runtime, "[rot90] expected total rotation dims == 2, but got dims "
             "= ", dims.size(), " (dims ", Shape(dims), ")");
  KILN_CHECK(nd >= 2, Runtime, "[rot90] expected total dims >= 2, but got total dims = ", nd,
             " (input shape ", x.sizes(), ")");
  // PyTorch 2.15 wraps the dims first (an out-of-range dim is an IndexError), then compares.
  const std::vector<int64_t> wrapped = {wrap_dim(dims[0], nd, "rot90"),
                                        wrap_dim(dims[1], nd, "rot90")};
  KILN_CHECK(wrapped[0] != wrapped[1], Runtime,
             "[rot90] expected rotation dims to be different, but got dim0 = ", wrapped[0],
             " and dim1 = ", wrapped[1]);
  // A quarter turn towards dims[1] is "reverse dims[1], then swap the two"; three quarter
  // turns reverse dims[0] instead. flip copies, so the result never aliases x.
  switch (((k % 4) + 4) % 4) {
    case 1: return transpose(flip(x, {wrapped[1]}), wrapped[0], wrapped[1]);
    case 2: return flip(x, wrapped);
    case 3: return transpose(flip(x, {wrapped[0]}), wrapped[0], wrapped[1]);
    default: return clone(x);
  }
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  const int64_t nd = static_cast<int64_t>(repeats.size());
  KILN_CHECK(nd >= x.dim(), Runtime, "[repeat] Number of dimensions of repeat dims (", nd,
             ") can not be smaller than number of dimensions of tensor (", x.dim(), ")");
  // Each dim i becomes a pair (repeat, size): out viewed as [r0, s0, r1, s1, ...]
  // is the input viewed as [1, s0, 1, s1, ...] and expanded.
  Shape padded(nd - x.dim(), 1);
  padded.insert(padded.end(), x.sizes().begin(), x.sizes().end());
  Shape out_shape, pairs, unit_pairs;
  for (int64_t i = 0; i < nd; ++i) {
    KILN_CHECK(repeats[i] >= 0, Runtime,
               "[repeat] Trying to create tensor with negative "
               "dimension ",
               repeats[i], ": repeats ", Shape(repeats));
    int64_t size;
    KILN_CHECK(!mul_overflows(repeats[i], padded[i], &size), Runtime,
               "[repeat] Storage size calculation overflowed repeating a tensor of shape ",
               x.sizes(), " by ", Shape(repeats));
    out_shape.push_back(size);
    pairs.insert(pairs.end(), {repeats[i], padded[i]});
    unit_pairs.insert(unit_pairs.end(), {1, padded[i]});
  }
  Tensor out = make_tensor(out_shape, x.dtype(), x.device(), "repeat");
  if (out.numel() > 0) copy_raw(view(out, pairs), expand(reshape(detach(x), unit_pairs), pairs));
  if (needs_grad({x})) {
    Shape in_shape = x.sizes();
    std::vector<int64_t> rep_dims;
    for (int64_t i = 0; i < nd; ++i) rep_dims.push_back(2 * i);
    record("repeat", {x}, {out}, [pairs, rep_dims, in_shape](const Grads& g, Node&) -> Grads {
      return {reshape(sum(reshape(g[0], pairs), rep_dims), in_shape)};
    });
  }
  return out;
}

Tensor tile(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> reps(dims);
  if (static_cast<int64_t>(reps.size()) < x.dim())
    reps.insert(reps.begin(), x.dim() - reps.size(), 1);
  return repeat(x, reps);
}

namespace {

Tensor triangle(const Tensor& x, int64_t diagonal, bool upper) {
  const char* op = upper ? "triu" : "tril";
  KILN_CHECK(x.dim() >= 2, Runtime, "[", op, "] input tensor must have at least 2 dimensions, got ",
             "shape ", x.sizes());
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  if (out.numel() > 0) {
    Tensor in = x.is_contiguous() ? detach(x) : contiguous(detach(x));
    require_kernel(backend(x.device()).triangle, op, x.device())(out, in, diagonal, upper);
  }
  if (needs_grad({x})) {
    record(op, {x}, {out}, [diagonal, upper](const Grads& g, Node&) -> Grads {
      return {triangle(g[0], diagonal, upper)};
    });
  }
  return out;
}

const Tensor& triangle_(const Tensor& self, int64_t diagonal, bool upper) {
  return apply_inplace(
      self, {}, upper ? "triu_" : "tril_",
      [&](const Tensor& s) { return triangle(s, diagonal, upper); },
      [&] {
        Tensor r = triangle(detach(self), diagonal, upper);
        copy_raw(self, r);
      });
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true); }
const Tensor& tril_(const Tensor& self, int64_t diagonal) {
  return triangle_(self, diagonal, false);
}
const Tensor& triu_(const Tensor& self, int64_t diagonal) {
  return triangle_(self, diagonal, true);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  KILN_CHECK(repeats >= 0, Runtime, "[repeat_interleave] repeats can not be negative, got ",
             repeats);
  Tensor in = !dim || x.dim() == 0 ? reshape(x, {-1}) : x;
  const int64_t d = dim ? wrap_dim(*dim, in.dim(), "repeat_interleave") : 0;
  // [.., n, ..] -> [.., n, repeats, ..] as a broadcast view, then merged: one copy.
  Tensor u = unsqueeze(in, d + 1);
  Shape target = u.sizes();
  target[d + 1] = repeats;
  checked_numel(target, "repeat_interleave");
  return flatten(expand(u, target), d, d + 1);
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  KILN_CHECK(repeats.dim() <= 1, Runtime, "[repeat_interleave] repeats must be 0-dim or 1-dim "
             "tensor, got shape ", repeats.sizes());
  KILN_CHECK(!is_floating(repeats.dtype()) && repeats.dtype() != DType::Bool, Runtime,
             "[repeat_interleave] repeats must be an integer tensor, got ", repeats.dtype());
  // The output size depends on the counts, so they are read on the host.
  Tensor counts = contiguous(to_device(to_dtype(detach(repeats), DType::Int64), Device()));
  if (counts.numel() == 1) return repeat_interleave(x, counts.data<int64_t>()[0], dim);
  Tensor in = !dim || x.dim() == 0 ? reshape(x, {-1}) : x;
  const int64_t d = dim ? wrap_dim(*dim, in.dim(), "repeat_interleave") : 0;
  KILN_CHECK(counts.numel() == in.size(d), Runtime, "[repeat_interleave] repeats must have the "
             "same size as input along dim, but got repeats of shape ", repeats.sizes(),
             " and input of shape ", in.sizes(), " along dim ", d);
  const int64_t* c = counts.data<int64_t>();
  int64_t total = 0;
  for (int64_t i = 0; i < counts.numel(); ++i) {
    KILN_CHECK(c[i] >= 0, Runtime, "[repeat_interleave] repeats can not be negative, got ", c[i],
               " at position ", i);
    KILN_CHECK(!add_overflows(total, c[i], &total), Runtime,
               "[repeat_interleave] Storage size calculation overflowed: the repeats sum past ",
               "int64 at position ", i);
  }
  Tensor index = empty({total}, DType::Int64, Device(), "repeat_interleave");
  int64_t* out = index.data<int64_t>();
  for (int64_t i = 0; i < counts.numel(); ++i)
    for (int64_t r = 0; r < c[i]; ++r) *out++ = i;
  return index_select(in, d, to_device(index, in.device()));
}

Tensor repeat_interleave(const Tensor& repeats) {
  KILN_CHECK(repeats.dim() <= 1, Runtime, "[repeat_interleave] repeats must be 0-dim or 1-dim "
             "tensor, got shape ", repeats.sizes());
  Tensor positions = arange(Scalar(int64_t(0)), Scalar(repeats.numel()), Scalar(int64_t(1)),
                            DType::Int64, repeats.device());
  return repeat_interleave(positions, reshape(repeats, {-1}), 0);
}

}  // namespace kiln
