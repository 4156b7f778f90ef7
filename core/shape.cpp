#include "core/shape.h"

#include <algorithm>
#include <ostream>

#include "core/error.h"

namespace kiln {

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os << ']';
}

void fail_invalid_sizes(const Shape& sizes, const char* op) {
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, Runtime, "[", op, "] Trying to create tensor with negative dimension ", s,
               ": ", sizes);
  }
  fail(ErrorKind::Runtime, "[", op, "] Storage size calculation overflowed with sizes=", sizes);
}

int64_t checked_storage_extent(const Shape& sizes, const Shape& strides, int64_t offset,
                               const char* op) {
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;
  int64_t last = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t reach;
    KILN_CHECK(
        !mul_overflows(sizes[i] - 1, strides[i], &reach) && !add_overflows(last, reach, &last),
        Runtime, "[", op, "] Storage size calculation overflowed with sizes=", sizes,
        " and strides=", strides);
  }
  KILN_CHECK(last < INT64_MAX, Runtime, "[", op,
             "] Storage size calculation overflowed with sizes=", sizes, " and strides=", strides);
  return last + 1;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  KILN_CHECK(dim >= -n && dim < n, Index, "[", op,
             "] Dimension out of range (expected to be in range of [", -n, ", ", n - 1,
             "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    KILN_CHECK(std::find(out.begin(), out.end(), w) == out.end(), Runtime, "[", op, "] dim ", w,
               " appears multiple times in the list of dims");
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, Runtime, "[", op, "] The size of tensor a (", da,
               ") must match the size of tensor b (", db, ") at non-singleton dimension ", i,
               "; shapes ", a, " and ", b, " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape infer_size(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KILN_CHECK(infer_at < 0, Runtime, "[", op, "] only one dimension can be inferred, got shape ",
                 shape);
      infer_at = static_cast<int64_t>(i);
    } else {
      KILN_CHECK(shape[i] >= 0, Runtime, "[", op, "] invalid shape dimension ", shape[i], " in ",
                 shape);
    }
  }
  if (infer_at >= 0) out[infer_at] = 1;
  // The known sizes must be valid on their own; the inferred one then keeps the product in range.
  int64_t known;
  KILN_CHECK(numel_fits(out, &known), Runtime, "[", op,
             "] Storage size calculation overflowed with sizes=", shape);
  if (infer_at >= 0) {
    KILN_CHECK(known != 0 || numel != 0, Runtime, "[", op,
               "] cannot reshape tensor of 0 elements into shape ", shape,
               " because the unspecified dimension size -1 can be any value and is ambiguous");
    KILN_CHECK(known != 0 && numel % known == 0, Runtime, "[", op, "] shape '", shape,
               "' is invalid for input of size ", numel);
    out[infer_at] = numel / known;
  } else {
    KILN_CHECK(known == numel, Runtime, "[", op, "] shape '", shape,
               "' is invalid for input of size ", numel);
  }
  return out;
}

bool compute_view_strides(const Shape& sizes, const Shape& strides, const Shape& shape,
                          Shape* out) {
  // Walk groups of old dims that are contiguous among themselves and match
  // them against runs of new dims with the same element count.
  out->assign(shape.size(), 0);
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0 || sizes.empty()) {
    int64_t acc = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      (*out)[i] = acc;
      acc *= std::max<int64_t>(shape[i], 1);
    }
    return true;
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        (*out)[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace kiln
