// Shape arithmetic shared by all ops: checked sizes, dim wrapping, broadcasting, view sizes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <iterator>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace kiln {

// Sizes and strides: a vector of int64 that keeps up to kInline elements in
// place, so creating a tensor of up to 5 dims allocates nothing for its
// geometry (every op creates at least one). It has the std::vector interface
// kiln uses and converts to and from std::vector<int64_t> both ways.
class Shape {
 public:
  static constexpr size_t kInline = 5;
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  Shape() = default;
  explicit Shape(size_t n) { resize(n); }
  Shape(size_t n, int64_t value) { assign(n, value); }
  Shape(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit
  Shape(const Shape& o) { assign(o.begin(), o.end()); }
  Shape(Shape&& o) noexcept { steal(o); }
  ~Shape() { std::free(heap_); }

  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) {
      std::free(heap_);
      steal(o);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t& operator[](size_t i) const { return data()[i]; }
  int64_t& at(size_t i) { return data()[checked(i)]; }
  const int64_t& at(size_t i) const { return data()[checked(i)]; }
  int64_t& front() { return data()[0]; }
  const int64_t& front() const { return data()[0]; }
  int64_t& back() { return data()[size_ - 1]; }
  const int64_t& back() const { return data()[size_ - 1]; }

  void reserve(size_t n) {
    if (n <= cap_) return;
    size_t cap = std::max(n, 2 * cap_);
    auto* p = static_cast<int64_t*>(std::malloc(cap * sizeof(int64_t)));
    if (!p) throw std::bad_alloc();
    if (size_) std::memcpy(p, data(), size_ * sizeof(int64_t));
    std::free(heap_);
    heap_ = p;
    cap_ = cap;
  }
  void clear() { size_ = 0; }
  void resize(size_t n) { resize(n, 0); }
  void resize(size_t n, int64_t value) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = value;
    size_ = n;
  }
  void assign(size_t n, int64_t value) {
    size_ = 0;
    resize(n, value);
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    size_ = 0;
    reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) data()[size_++] = static_cast<int64_t>(*first);
  }
  void assign(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  void push_back(int64_t v) {
    if (size_ == cap_) reserve(size_ + 1);
    data()[size_++] = v;
  }
  int64_t& emplace_back(int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() { --size_; }
  iterator insert(const_iterator pos, int64_t v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t n, int64_t v) {
    const size_t at = open_gap(pos, n);
    std::fill(data() + at, data() + at + n, v);
    return data() + at;
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  iterator insert(const_iterator pos, It first, It last) {
    // Copied first: the range may alias this shape, and open_gap may move it.
    const Shape values(first, last);
    const size_t at = open_gap(pos, values.size());
    std::copy(values.begin(), values.end(), data() + at);
    return data() + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_t at = static_cast<size_t>(first - begin());
    const size_t n = static_cast<size_t>(last - first);
    std::copy(begin() + at + n, end(), begin() + at);
    size_ -= n;
    return begin() + at;
  }
  void swap(Shape& o) noexcept {
    Shape t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }
  friend bool operator<(const Shape& a, const Shape& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  size_t checked(size_t i) const {
    if (i >= size_) throw std::out_of_range("Shape::at");
    return i;
  }
  void steal(Shape& o) noexcept {
    heap_ = o.heap_;
    size_ = o.size_;
    cap_ = o.cap_;
    if (!heap_) std::memcpy(inline_, o.inline_, size_ * sizeof(int64_t));
    o.heap_ = nullptr;
    o.size_ = 0;
    o.cap_ = kInline;
  }
  // Makes room for n elements at pos; returns pos as an index.
  size_t open_gap(const_iterator pos, size_t n) {
    const size_t at = static_cast<size_t>(pos - begin());
    reserve(size_ + n);
    std::copy_backward(begin() + at, end(), end() + n);
    size_ += n;
    return at;
  }

  int64_t* heap_ = nullptr;  // null: the elements live in inline_
  size_t size_ = 0;
  size_t cap_ = kInline;
  int64_t inline_[kInline];
};

// Shapes print as [2, 3] in messages.
std::ostream& operator<<(std::ostream& os, const Shape& s);

// Note [Checked shape arithmetic]
// Sizes, strides and offsets reach kiln from users (kiln.empty(2**62, 2**62),
// as_strided, x[::2**62], a checkpoint's header), and an int64 product of them
// that wraps is undefined behaviour that in practice gives a tensor whose numel
// or byte count wrapped to something small: the allocation is small and the
// first write lands outside it. So every size, stride and byte count built from
// such input goes through the helpers below, which fail with RuntimeError
// "[op] Storage size calculation overflowed with sizes=[...]" (PyTorch's words).
//
// A tensor's sizes are valid when none is negative and their product with zeros
// counted as ones fits in int64. The second part is stricter than "numel fits"
// (which [0, 2**62, 2**62] passes): that product is the largest stride of the
// contiguous layout, so it must be representable too, and with it any product
// of some of a valid tensor's sizes (a reduction's outer count, a merged dim, a
// view's stride) fits without further checks. NumPy draws the same line. Byte
// counts must fit in int64 as well, PyTorch's bound, since element offsets are
// scaled by the item size in int64 (Tensor::data_ptr). No allocator grants that
// much, but a count that wrapped would reach it looking small.
// Tensors that already exist are valid (TensorImpl checks its sizes), so ops
// check only where new sizes come from outside: factories, view shapes, expand,
// as_strided, repeat, unfold, cat, loaded headers.

// a * b (a + b, a - b) into *out; true when the exact result does not fit in int64.
inline bool mul_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}
inline bool add_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_add_overflow(a, b, out);
}
inline bool sub_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_sub_overflow(a, b, out);
}

// Sets *numel to the element count of a tensor of `sizes` and returns true when
// the sizes are valid (Note [Checked shape arithmetic]); false otherwise.
inline bool numel_fits(const Shape& sizes, int64_t* numel) {
  int64_t bound = 1;
  bool has_zero = false;
  for (int64_t s : sizes) {
    if (s > 0) {
      if (mul_overflows(bound, s, &bound)) return false;
    } else if (s == 0) {
      has_zero = true;
    } else {
      return false;
    }
  }
  *numel = has_zero ? 0 : bound;
  return true;
}

// RuntimeError "[op] Trying to create tensor with negative dimension" or "[op]
// Storage size calculation overflowed with sizes=...", whichever `sizes` earns.
[[noreturn]] void fail_invalid_sizes(const Shape& sizes, const char* op);

// The element count of a tensor of `sizes`; RuntimeError naming `op` unless the
// sizes are valid (Note [Checked shape arithmetic]).
inline int64_t checked_numel(const Shape& sizes, const char* op) {
  int64_t numel;
  if (!numel_fits(sizes, &numel)) fail_invalid_sizes(sizes, op);
  return numel;
}

// Bytes of a contiguous tensor of `sizes` with items of `itemsize` bytes:
// checked_numel's errors, and the overflow error when they exceed int64.
inline size_t checked_nbytes(const Shape& sizes, size_t itemsize, const char* op) {
  int64_t bytes;
  if (mul_overflows(checked_numel(sizes, op), static_cast<int64_t>(itemsize), &bytes))
    fail_invalid_sizes(sizes, op);
  return static_cast<size_t>(bytes);
}

// Storage elements a view of (sizes, strides, offset) reaches: offset + 1 +
// sum((size - 1) * stride), or 0 when it has no elements. Sizes, strides and
// the offset must be non-negative. RuntimeError "[op] Storage size calculation
// overflowed with sizes=... and strides=..." when that does not fit in int64.
int64_t checked_storage_extent(const Shape& sizes, const Shape& strides, int64_t offset,
                               const char* op);

// Wraps a possibly negative dim into [0, ndim); IndexError naming `op` otherwise.
// A 0-d tensor accepts dims -1 and 0, as in PyTorch.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Wraps a list of dims and rejects repeats. Sorted ascending.
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op);
// NumPy broadcasting; RuntimeError naming `op` and both shapes otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Resolves one -1 in a view/reshape shape for `numel` elements; the result is
// valid (Note [Checked shape arithmetic]).
Shape infer_size(const Shape& shape, int64_t numel, const char* op);
// Strides for viewing (sizes, strides) as `shape` without a copy, or empty if impossible.
bool compute_view_strides(const Shape& sizes, const Shape& strides, const Shape& shape,
                          Shape* out);

}  // namespace kiln
