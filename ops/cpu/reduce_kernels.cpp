// Reductions of a contiguous [outer, R, inner] input over its middle dim (the ops/backend.h
// contract). Sums accumulate in acc_t (float for half types) so float16 sums do not lose
// precision. Chunks and strips have fixed sizes, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

namespace {

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    return std::isnan(static_cast<float>(v));
  }
}

// True when x should replace the current extreme: NaN wins and sticks, ties keep the first.
template <typename A>
bool beats(ReduceOp op, A x, A best) {
  if (is_nan(best)) return false;
  if (is_nan(x)) return true;
  return op == ReduceOp::Max ? x > best : x < best;
}

// Combining steps. init(first) is the start value of an accumulator: the identity, or for the
// idempotent max/min the slice's first element (they have no identity in every dtype).
template <typename A>
struct SumF {
  static constexpr bool kSelect = false;
  A init(A) const { return A(0); }
  A operator()(A a, A b) const { return A(a + b); }
};
template <typename A>
struct ProdF {
  static constexpr bool kSelect = false;
  A init(A) const { return A(1); }
  A operator()(A a, A b) const { return A(a * b); }
};
template <typename A, bool kMax>
struct ExtremeF {
  static constexpr bool kSelect = true;
  A init(A first) const { return first; }
  // A NaN b replaces a, and once a is NaN no b compares past it.
  A operator()(A a, A b) const { return ((kMax ? b > a : b < a) || b != b) ? b : a; }
  // Without NaN: a compare-select the compiler turns into vector max/min.
  A select(A a, A b) const { return (kMax ? b > a : b < a) ? b : a; }
};
struct AllF {
  static constexpr bool kSelect = false;
  bool init(bool) const { return true; }
  bool operator()(bool a, bool b) const { return a && b; }
};
struct AnyF {
  static constexpr bool kSelect = false;
  bool init(bool) const { return false; }
  bool operator()(bool a, bool b) const { return a || b; }
};

// Independent lanes let the compiler vectorize a contiguous row without reassociating floats.
template <typename T, typename F>
acc_t<T> reduce_row(const T* x, int64_t n, F f) {
  using A = acc_t<T>;
  constexpr int kLanes = 8;
  if constexpr (F::kSelect && !std::is_integral_v<A>) {
    // Max/min of floats: plain selects, with x - x summed alongside; that sum turns NaN only
    // when the row holds a NaN or an infinity, which then take the careful loop below.
    A best[kLanes], poison[kLanes];
    for (int k = 0; k < kLanes; ++k) {
      best[k] = A(x[0]);
      poison[k] = A(0);
    }
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int k = 0; k < kLanes; ++k) {
        const A v = A(x[i + k]);
        best[k] = f.select(best[k], v);
        poison[k] += v - v;
      }
    }
    for (; i < n; ++i) {
      const A v = A(x[i]);
      best[0] = f.select(best[0], v);
      poison[0] += v - v;
    }
    A p = 0, acc = best[0];
    for (int k = 0; k < kLanes; ++k) {
      p += poison[k];
      acc = f.select(acc, best[k]);
    }
    if (p == A(0)) return acc;
  }
  A lane[kLanes];
  const A start = f.init(A(x[0]));
  for (A& v : lane) v = start;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] = f(lane[k], A(x[i + k]));
  for (; i < n; ++i) lane[0] = f(lane[0], A(x[i]));
  A acc = lane[0];
  for (int k = 1; k < kLanes; ++k) acc = f(acc, lane[k]);
  return acc;
}

constexpr int64_t kParallelWork = 1 << 15;  // elements below which threads cost more than they save
constexpr int64_t kChunk = 1 << 14;         // a long row splits into chunks of this many elements
constexpr int64_t kStrip = 256;             // outputs one task accumulates when inner > 1

// inner == 1: each output is a contiguous row; long rows split into chunks reduced in parallel,
// their partials combined in order.
template <typename T, typename F>
void reduce_rows(T* dst, const T* src, int64_t outer, int64_t r, F f) {
  using A = acc_t<T>;
  const int64_t chunks = (r + kChunk - 1) / kChunk;
  if (chunks <= 1) {
#pragma omp parallel for if (outer * r > kParallelWork)
    for (int64_t o = 0; o < outer; ++o) dst[o] = T(reduce_row(src + o * r, r, f));
    return;
  }
  // Not std::vector: vector<bool> packs bits, and threads write neighbouring partials.
  std::unique_ptr<A[]> part(new A[outer * chunks]);
#pragma omp parallel for if (outer * r > kParallelWork)
  for (int64_t i = 0; i < outer * chunks; ++i) {
    const int64_t o = i / chunks, c = i % chunks;
    part[i] = reduce_row(src + o * r + c * kChunk, std::min(kChunk, r - c * kChunk), f);
  }
  for (int64_t o = 0; o < outer; ++o) {
    A acc = part[o * chunks];
    for (int64_t c = 1; c < chunks; ++c) acc = f(acc, part[o * chunks + c]);
    dst[o] = T(acc);
  }
}

// inner > 1: a task owns a strip of up to kStrip outputs of one outer index and walks R,
// adding one contiguous piece of each of its R rows, so memory is read in order.
template <typename T, typename F>
void reduce_columns(T* dst, const T* src, int64_t outer, int64_t r, int64_t inner, F f) {
  using A = acc_t<T>;
  const int64_t strips = (inner + kStrip - 1) / kStrip;
#pragma omp parallel for if (outer * r * inner > kParallelWork)
  for (int64_t t = 0; t < outer * strips; ++t) {
    const int64_t o = t / strips, j0 = (t % strips) * kStrip;
    const int64_t w = std::min(kStrip, inner - j0);
    const T* base = src + o * r * inner + j0;
    A acc[kStrip];
    for (int64_t j = 0; j < w; ++j) acc[j] = f.init(A(base[j]));
    for (int64_t k = 0; k < r; ++k) {
      const T* row = base + k * inner;
      for (int64_t j = 0; j < w; ++j) acc[j] = f(acc[j], A(row[j]));
    }
    for (int64_t j = 0; j < w; ++j) dst[o * inner + j0 + j] = T(acc[j]);
  }
}

// The index of the first maximum (minimum) of x[0, n), n > 0, or of its first NaN: the vector
// max/min of reduce_row, then a search for the first element equal to it.
template <typename T, bool kMax>
int64_t first_extreme(const T* x, int64_t n) {
  using A = acc_t<T>;
  const A best = reduce_row(x, n, ExtremeF<A, kMax>());
  const bool nan = is_nan(best);
  for (int64_t j = 0; j < n; ++j)
    if (nan ? is_nan(A(x[j])) : A(x[j]) == best) return j;
  return 0;  // not reached: best is one of the elements
}

template <typename T, typename F>
void reduce_typed(const Tensor& out, const Tensor& in, F f) {
  const int64_t outer = in.size(0), r = in.size(1), inner = in.size(2);
  T* dst = out.data<T>();
  if (r == 0) {
    // Only identities reach here: the front end refuses max/min over no elements.
    std::fill(dst, dst + outer * inner, T(f.init(acc_t<T>())));
    return;
  }
  if (inner == 1) return reduce_rows(dst, in.data<T>(), outer, r, f);
  reduce_columns(dst, in.data<T>(), outer, r, inner, f);
}

}  // namespace

void reduce_kernel(ReduceOp op, const Tensor& out, const Tensor& in) {
  if (out.numel() == 0) return;
  if (op == ReduceOp::All || op == ReduceOp::Any) {
    KILN_CHECK(in.dtype() == DType::Bool, Runtime, "[reduce] all/any expect bool input, got ",
               in.dtype());
    if (op == ReduceOp::All) return reduce_typed<bool>(out, in, AllF());
    return reduce_typed<bool>(out, in, AnyF());
  }
  dispatch_all(in.dtype(), "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    switch (op) {
      case ReduceOp::Sum:
        return reduce_typed<T>(out, in, SumF<A>());
      case ReduceOp::Prod:
        return reduce_typed<T>(out, in, ProdF<A>());
      case ReduceOp::Max:
        return reduce_typed<T>(out, in, ExtremeF<A, true>());
      case ReduceOp::Min:
        return reduce_typed<T>(out, in, ExtremeF<A, false>());
      default:
        break;
    }
  });
}

void arg_reduce_kernel(ReduceOp op, const Tensor& values, const Tensor& indices, const Tensor& in) {
  dispatch_all(in.dtype(), "arg_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const int64_t outer = in.size(0), n = in.size(1);
    const T* src = in.data<T>();
    // Like reduce_rows: a long row splits into fixed chunks whose winners are compared in
    // order, so ties still keep the first index and the first NaN still wins.
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::unique_ptr<int64_t[]> best(new int64_t[outer * chunks]);
#pragma omp parallel for if (outer * n > kParallelWork)
    for (int64_t i = 0; i < outer * chunks; ++i) {
      const T* row = src + i / chunks * n;
      const int64_t begin = i % chunks * kChunk, end = std::min(n, begin + kChunk);
      best[i] = begin + (op == ReduceOp::Max ? first_extreme<T, true>(row + begin, end - begin)
                                             : first_extreme<T, false>(row + begin, end - begin));
    }
    T* val = values.data<T>();
    int64_t* idx = indices.data<int64_t>();
    for (int64_t r = 0; r < outer; ++r) {
      const T* row = src + r * n;
      int64_t b = best[r * chunks];
      for (int64_t c = 1; c < chunks; ++c)
        if (beats(op, A(row[best[r * chunks + c]]), A(row[b]))) b = best[r * chunks + c];
      val[r] = row[b];
      idx[r] = b;
    }
  });
}

}  // namespace kiln::cpu
