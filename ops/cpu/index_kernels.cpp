// Offset-based gather/scatter: every index op (Python indexing, gather, scatter,
// index_select, index_add, take, put) reduces to element offsets computed by the
// front end (ops/index.cpp), so these three loops are the whole CPU backend.
#include <type_traits>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

void index_take_kernel(const Tensor& out, const Tensor& in, const Tensor& offsets) {
  dispatch_all(in.dtype(), "index", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = in.data<T>();
    const int64_t* off = offsets.data<int64_t>();
    T* dst = out.data<T>();
    const int64_t n = offsets.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[off[i]];
  });
}

void index_put_kernel(PutOp op, const Tensor& self, const Tensor& offsets, const Tensor& values) {
  dispatch_all(self.dtype(), "index_put_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = self.data<T>();
    const int64_t* off = offsets.data<int64_t>();
    const T* src = values.data<T>();
    const int64_t n = offsets.numel();
    // Sequential on purpose: repeated offsets must see each other's updates.
    switch (op) {
      case PutOp::Assign:
        for (int64_t i = 0; i < n; ++i) dst[off[i]] = src[i];
        break;
      case PutOp::Add:
        if constexpr (std::is_same_v<T, bool>) {
          for (int64_t i = 0; i < n; ++i) dst[off[i]] = dst[off[i]] || src[i];
        } else {
          for (int64_t i = 0; i < n; ++i) dst[off[i]] = T(dst[off[i]] + src[i]);
        }
        break;
      case PutOp::Mul:
        if constexpr (std::is_same_v<T, bool>) {
          for (int64_t i = 0; i < n; ++i) dst[off[i]] = dst[off[i]] && src[i];
        } else {
          for (int64_t i = 0; i < n; ++i) dst[off[i]] = T(dst[off[i]] * src[i]);
        }
        break;
    }
  });
}

void nonzero_kernel(const Tensor& out, const Tensor& mask) {
  const bool* m = mask.data<bool>();
  const int64_t nd = mask.dim(), numel = mask.numel();
  const Shape& sizes = mask.sizes();
  int64_t* dst = out.data<int64_t>();
  std::vector<int64_t> coord(nd, 0);
  for (int64_t i = 0; i < numel; ++i) {
    if (m[i]) {
      for (int64_t d = 0; d < nd; ++d) *dst++ = coord[d];
    }
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++coord[d] < sizes[d]) break;
      coord[d] = 0;
    }
  }
}

}  // namespace kiln::cpu
