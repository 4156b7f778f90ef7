#include "ops/shape_extra.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/flags.h"
#include "core/shape.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/index.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/view.h"

namespace kiln {

Tensor atleast_1d(const Tensor& x) { return x.dim() == 0 ? reshape(x, {1}) : x; }

Tensor atleast_2d(const Tensor& x) {
  if (x.dim() == 0) return reshape(x, {1, 1});
  return x.dim() == 1 ? unsqueeze(x, 0) : x;
}

Tensor atleast_3d(const Tensor& x) {
  if (x.dim() == 0) return reshape(x, {1, 1, 1});
  if (x.dim() == 1) return unsqueeze(unsqueeze(x, 0), 2);
  return x.dim() == 2 ? unsqueeze(x, 2) : x;
}

Tensor column_stack(const std::vector<Tensor>& tensors) {
  KILN_CHECK(!tensors.empty(), Runtime, "[column_stack] expects a non-empty TensorList");
  std::vector<Tensor> cols;
  for (const Tensor& t : tensors) cols.push_back(t.dim() <= 1 ? reshape(t, {t.numel(), 1}) : t);
  return hstack(cols);
}

namespace {

// The dim hsplit/vsplit/dsplit split along, after checking x has enough dims.
int64_t split_dim(const Tensor& x, const char* op, int64_t min_dims, int64_t dim) {
  KILN_CHECK(x.dim() >= min_dims, Runtime, "[", op, "] requires a tensor with at least ", min_dims,
             " dimension", min_dims > 1 ? "s" : "", ", but got a tensor with ", x.dim(),
             " dimensions");
  return dim;
}

std::vector<Tensor> split_even(const Tensor& x, int64_t sections, int64_t dim, const char* op) {
  KILN_CHECK(sections != 0 && x.size(dim) % sections == 0, Runtime, "[", op,
             "] attempted to split along dimension ", dim, ", but the size of the dimension ",
             x.size(dim), " is not divisible by the split_size ", sections);
  return tensor_split(x, sections, dim);
}

int64_t hsplit_dim(const Tensor& x) { return split_dim(x, "hsplit", 1, x.dim() == 1 ? 0 : 1); }

}  // namespace

std::vector<Tensor> hsplit(const Tensor& x, int64_t sections) {
  return split_even(x, sections, hsplit_dim(x), "hsplit");
}
std::vector<Tensor> hsplit(const Tensor& x, const std::vector<int64_t>& indices) {
  return tensor_split(x, indices, hsplit_dim(x));
}
std::vector<Tensor> vsplit(const Tensor& x, int64_t sections) {
  return split_even(x, sections, split_dim(x, "vsplit", 2, 0), "vsplit");
}
std::vector<Tensor> vsplit(const Tensor& x, const std::vector<int64_t>& indices) {
  return tensor_split(x, indices, split_dim(x, "vsplit", 2, 0));
}
std::vector<Tensor> dsplit(const Tensor& x, int64_t sections) {
  return split_even(x, sections, split_dim(x, "dsplit", 3, 2), "dsplit");
}
std::vector<Tensor> dsplit(const Tensor& x, const std::vector<int64_t>& indices) {
  return tensor_split(x, indices, split_dim(x, "dsplit", 3, 2));
}

Tensor ravel(const Tensor& x) { return reshape(x, {x.numel()}); }

Tensor argwhere(const Tensor& x) { return nonzero(x); }

Tensor block_diag(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> blocks;
  int64_t cols = 0;
  DType dt = tensors.empty() ? default_dtype() : tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(t.dim() <= 2, Runtime,
               "[block_diag] Input tensors must have 2 or fewer dimensions. "
               "Input ",
               i, " has ", t.dim(), " dimensions");
    KILN_CHECK(t.device() == tensors[0].device(), Runtime,
               "[block_diag] Input tensors must all be on the same device. Input 0 is on device ",
               tensors[0].device(), " and input ", i, " is on device ", t.device());
    blocks.push_back(atleast_2d(t));
    cols += blocks.back().size(1);
    dt = promote_types(dt, t.dtype());
  }
  Device dev = tensors.empty() ? Device() : tensors[0].device();
  if (blocks.empty()) return empty({1, 0}, dt, dev);
  // Each block becomes a full-width row band [zeros | block | zeros], so cat's backward
  // routes every gradient without a scatter.
  std::vector<Tensor> rows;
  int64_t before = 0;
  for (const Tensor& b : blocks) {
    const int64_t r = b.size(0), c = b.size(1);
    rows.push_back(cat(
        {zeros({r, before}, dt, dev), to_dtype(b, dt), zeros({r, cols - before - c}, dt, dev)}, 1));
    before += c;
  }
  return cat(rows, 0);
}

Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  const int64_t nd = x.dim() + 1;
  const int64_t d1 = wrap_dim(dim1, nd, "diag_embed"), d2 = wrap_dim(dim2, nd, "diag_embed");
  KILN_CHECK(d1 != d2, Runtime, "[diag_embed] diagonal dimensions cannot be identical ", dim1, ", ",
             dim2);
  const Tensor& v = x;
  const int64_t n = v.size(-1), k = offset < 0 ? -offset : offset;
  // [..., n] -> [..., n, n] with v on the main diagonal, then zero bands shift it by offset.
  Tensor mask = eye(n, std::nullopt, DType::Bool, v.device());
  Tensor m = where(mask, unsqueeze(v, -1), zeros({}, v.dtype(), v.device()));
  if (k > 0) {
    Shape lead(m.sizes().begin(), m.sizes().end() - 2);
    auto band = [&](int64_t r, int64_t c) {
      Shape s = lead;
      s.push_back(r);
      s.push_back(c);
      return zeros(s, v.dtype(), v.device());
    };
    Tensor side = band(n, k), edge = band(k, n + k);
    m = offset > 0 ? cat({cat({side, m}, -1), edge}, -2) : cat({edge, cat({m, side}, -1)}, -2);
  }
  return movedim(m, {nd - 2, nd - 1}, {d1, d2});
}

Tensor diagflat(const Tensor& x, int64_t offset) { return diag(reshape(x, {x.numel()}), offset); }

namespace {

// The number of (row, col) pairs of tril_indices / triu_indices, in closed form so that huge
// row and col counts cost nothing and cannot overflow (Note [Checked shape arithmetic]). Row i
// holds the columns [0, min(col, i + offset + 1)) (tril) or [max(0, i + offset), col) (triu);
// the rows with at least one column are [first, last) of triangle_rows.
struct TriangleRows {
  int64_t first, last;
};

TriangleRows triangle_rows(int64_t row, int64_t col, int64_t offset, bool upper) {
  using I = __int128;
  auto clamp = [](I v, I lo, I hi) { return static_cast<int64_t>(std::min(std::max(v, lo), hi)); };
  if (col == 0) return {0, 0};
  if (upper) return {0, clamp(I(col) - offset, 0, row)};
  return {clamp(-I(offset), 0, row), row};
}

unsigned __int128 triangle_count(int64_t row, int64_t col, int64_t offset, bool upper) {
  using U = unsigned __int128;
  using I = __int128;
  const TriangleRows r = triangle_rows(row, col, offset, upper);
  if (r.first >= r.last) return 0;
  // Sum of an arithmetic run of positive column counts from `a` to `b` over `n` rows.
  auto run = [](I a, I b, I n) { return n <= 0 ? U(0) : U(a + b) * U(n) / 2; };
  if (upper) {
    // Rows [first, p) are full; rows [p, last) lose i + offset columns each.
    const I p = std::min<I>(std::max<I>(-I(offset), r.first), r.last);
    return U(p - r.first) * U(col) +
           run(I(col) - p - offset, I(col) - (r.last - 1) - offset, r.last - p);
  }
  // Rows [first, m) hold i + offset + 1 columns; rows [m, last) are full.
  const I m = std::min<I>(std::max<I>(I(col) - offset - 1, r.first), r.last);
  return run(I(r.first) + offset + 1, m - 1 + offset + 1, m - r.first) + U(r.last - m) * U(col);
}

Tensor triangle_indices(int64_t row, int64_t col, int64_t offset, DType dtype, Device device,
                        bool upper, const char* op) {
  KILN_CHECK(row >= 0, Runtime, "[", op, "] row must be non-negative, got ", row);
  KILN_CHECK(col >= 0, Runtime, "[", op, "] col must be non-negative, got ", col);
  KILN_CHECK(dtype == DType::Int64 || dtype == DType::Int32, Runtime, "[", op,
             "] expected dtype int64 or int32, got ", dtype);
  const unsigned __int128 count = triangle_count(row, col, offset, upper);
  KILN_CHECK(count <= static_cast<unsigned __int128>(INT64_MAX / 2), Runtime, "[", op,
             "] row=", row, ", col=", col, " and offset=", offset,
             " give more indices than a tensor can hold: Storage size calculation overflowed");
  const int64_t n = static_cast<int64_t>(count);
  Tensor out = make_tensor({2, n}, DType::Int64, Device());
  int64_t* p = out.data<int64_t>();
  int64_t k = 0;
  // Every row of [first, last) holds at least one column, so this loop is O(n).
  const TriangleRows r = triangle_rows(row, col, offset, upper);
  for (int64_t i = r.first; i < r.last; ++i) {
    const __int128 diag = static_cast<__int128>(i) + offset;
    const int64_t lo = upper ? static_cast<int64_t>(std::max<__int128>(diag, 0)) : 0;
    const int64_t hi = upper ? col : static_cast<int64_t>(std::min<__int128>(diag + 1, col));
    for (int64_t j = lo; j < hi; ++j, ++k) {
      p[k] = i;
      p[n + k] = j;
    }
  }
  return to_device(to_dtype(out, dtype), device);
}

}  // namespace

Tensor tril_indices(int64_t row, int64_t col, int64_t offset, DType dtype, Device device) {
  return triangle_indices(row, col, offset, dtype, device, false, "tril_indices");
}

Tensor triu_indices(int64_t row, int64_t col, int64_t offset, DType dtype, Device device) {
  return triangle_indices(row, col, offset, dtype, device, true, "triu_indices");
}

Tensor combinations(const Tensor& x, int64_t r, bool with_replacement) {
  KILN_CHECK(x.dim() == 1, Runtime, "[combinations] Expect a 1D vector, but got shape ", x.sizes());
  KILN_CHECK(r >= 0, Runtime, "[combinations] Expect a non-negative number, but got ", r);
  if (r == 0) return empty({0}, x.dtype(), x.device());
  // The index tuples are enumerated on the host (odometer order), the values gathered
  // with index_select so the result is differentiable.
  const int64_t n = x.size(0);
  std::vector<std::vector<int64_t>> cols(r);
  std::vector<int64_t> cur(r);
  bool ok = n > 0 && (with_replacement || r <= n);
  for (int64_t i = 0; i < r && ok; ++i) cur[i] = with_replacement ? 0 : i;
  while (ok) {
    for (int64_t i = 0; i < r; ++i) cols[i].push_back(cur[i]);
    int64_t i = r - 1;
    while (i >= 0 && cur[i] == (with_replacement ? n - 1 : n - r + i)) --i;
    if (i < 0) break;
    ++cur[i];
    for (int64_t j = i + 1; j < r; ++j) cur[j] = with_replacement ? cur[i] : cur[j - 1] + 1;
  }
  std::vector<Tensor> picked;
  for (const auto& c : cols) {
    Tensor idx = make_tensor({static_cast<int64_t>(c.size())}, DType::Int64, Device());
    std::copy(c.begin(), c.end(), idx.data<int64_t>());
    picked.push_back(index_select(x, 0, to_device(idx, x.device())));
  }
  return stack(picked, 1);
}

Tensor vander(const Tensor& x, std::optional<int64_t> N, bool increasing) {
  KILN_CHECK(x.dim() == 1, Runtime, "[vander] x must be a one-dimensional tensor, got shape ",
             x.sizes());
  const int64_t n = N.value_or(x.size(0));
  KILN_CHECK(n >= 0, Runtime, "[vander] N must be non-negative, got ", n);
  DType dt = promote_types(x.dtype(), DType::Int64);
  Tensor xs = to_dtype(x, dt);
  if (n == 0) return empty({x.size(0), 0}, dt, x.device());
  // Powers by a running product so integer inputs stay exact.
  Tensor cols =
      cat({ones({x.size(0), 1}, dt, x.device()), expand(unsqueeze(xs, 1), {x.size(0), n - 1})}, 1);
  Tensor out = cumprod(cols, 1);
  return increasing ? out : flip(out, {1});
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  KILN_CHECK(indices.dtype() == DType::Int64, Runtime,
             "[take_along_dim] dtype of indices should be int64 but got ", indices.dtype());
  if (!dim) return gather(reshape(x, {x.numel()}), 0, reshape(indices, {indices.numel()}));
  KILN_CHECK(x.dim() == indices.dim(), Runtime,
             "[take_along_dim] input and indices should have the same number of dimensions, "
             "but got ",
             x.dim(), " dimensions for input ", x.sizes(), ", and ", indices.dim(),
             " dimensions for indices ", indices.sizes());
  if (x.dim() == 0) return gather(x, 0, indices);
  const int64_t d = wrap_dim(*dim, x.dim(), "take_along_dim");
  Shape xs = x.sizes(), is = indices.sizes();
  xs[d] = 1;
  is[d] = 1;
  Shape common = broadcast_shapes(xs, is, "take_along_dim");
  Shape xe = common, ie = common;
  xe[d] = x.size(d);
  ie[d] = indices.size(d);
  return gather(expand(x, xe), d, expand(indices, ie));
}

Tensor empty_strided(const Shape& size, const Shape& stride, DType dtype, Device device) {
  KILN_CHECK(size.size() == stride.size(), Runtime,
             "[empty_strided] mismatch in length of strides and shape: size ", size, " and stride ",
             stride);
  for (size_t i = 0; i < size.size(); ++i) {
    KILN_CHECK(size[i] >= 0, Runtime, "[empty_strided] negative dimension in size ", size);
    KILN_CHECK(stride[i] >= 0, Runtime, "[empty_strided] negative stride in stride ", stride);
  }
  checked_numel(size, "empty_strided");
  const int64_t extent = checked_storage_extent(size, stride, 0, "empty_strided");
  return as_strided(empty({extent}, dtype, device, "empty_strided"), size, stride, 0);
}

}  // namespace kiln
