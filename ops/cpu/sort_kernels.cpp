// sort / topk rows, their gather-scatter backward, and unique's grouping.
#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

namespace {

template <typename C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return v != v;
  } else {
    return false;
  }
}

}  // namespace

void sort_kernel(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending,
                 int64_t k) {
  const int64_t outer = in.size(0), n = in.size(1);
  dispatch_all(in.dtype(), "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = acc_t<T>;
    const T* src = in.data<T>();
    T* vals = values.data<T>();
    int64_t* idx = indices.data<int64_t>();
#pragma omp parallel for if (outer > 1 && outer * n > 32768)
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = src + o * n;
      std::vector<int64_t> perm(n);
      std::iota(perm.begin(), perm.end(), int64_t(0));
      // A strict total order (ties broken by position) makes the result
      // stable for std::sort and std::partial_sort alike.
      auto before = [&](int64_t a, int64_t b) {
        const C x = static_cast<C>(row[a]), y = static_cast<C>(row[b]);
        const bool xn = is_nan(x), yn = is_nan(y);
        if (xn != yn) return descending ? xn : yn;
        if (!xn && x != y) return descending ? y < x : x < y;
        return a < b;
      };
      if (k < n) {
        std::partial_sort(perm.begin(), perm.begin() + k, perm.end(), before);
      } else {
        std::sort(perm.begin(), perm.end(), before);
      }
      for (int64_t j = 0; j < k; ++j) {
        vals[o * k + j] = row[perm[j]];
        idx[o * k + j] = perm[j];
      }
    }
  });
}

void gather_rows_kernel(const Tensor& out, const Tensor& src, const Tensor& index, bool scatter) {
  const int64_t outer = index.size(0), k = index.size(1);
  const int64_t n = scatter ? out.size(1) : src.size(1);
  dispatch_all(out.dtype(), "gather_rows", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = src.data<T>();
    T* o = out.data<T>();
    const int64_t* ix = index.data<int64_t>();
    for (int64_t r = 0; r < outer; ++r) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = ix[r * k + j];
        if (scatter) {
          o[r * n + i] = s[r * k + j];
        } else {
          o[r * k + j] = s[r * n + i];
        }
      }
    }
  });
}

int64_t unique_sorted_kernel(const Tensor& out, const Tensor& inverse, const Tensor& counts,
                             const Tensor& sorted, const Tensor& perm) {
  const int64_t n = sorted.numel();
  return dispatch_all(sorted.dtype(), "unique", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = acc_t<T>;
    const T* s = sorted.data<T>();
    const int64_t* p = perm.data<int64_t>();
    T* o = out.data<T>();
    int64_t* inv = inverse.data<int64_t>();
    int64_t* cnt = counts.data<int64_t>();
    int64_t group = -1;
    for (int64_t i = 0; i < n; ++i) {
      // NaN != NaN, so every NaN is its own group, as in PyTorch.
      if (i == 0 || !(static_cast<C>(s[i]) == static_cast<C>(s[i - 1]))) {
        ++group;
        o[group] = s[i];
        cnt[group] = 0;
      }
      ++cnt[group];
      inv[p[i]] = group;
    }
    return group + 1;
  });
}

}  // namespace kiln::cpu
