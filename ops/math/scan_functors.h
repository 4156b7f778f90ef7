// The combine step of every scan op (cumsum, cumprod, cummax, cummin, logcumsumexp), written
// once for the CPU and CUDA scan kernels.
//
// Note [Scan functors]
// A scan functor over the compute type A (float for half types) has a State (A, or a value with
// its index for cummax/cummin), `make(x, i)` turning element x at position i of its row into a
// State, and an associative `operator()(earlier, later)`. Associativity is what lets both
// backends scan in parallel: the CPU folds fixed-size chunks, then rescans each from the fold of
// the chunks before it (ops/cpu/scan_kernels.cpp); CUDA hands the functor to CUB's decoupled
// look-back scan (cuda/scan.cu). A float sum's rounding thus follows the blocking, not one
// serial order, exactly as in PyTorch; the CPU's chunks have a fixed size, so its results do
// not depend on the thread count.
// Adding a scan op: a functor here, its case in visit_scan and ScanOp (ops/backend.h), its front
// end and backward in ops/scan.cpp, its binding (python/bind_reduce.cpp) and its tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/backend.h"
#include "ops/math/functors.h"
#include "ops/math/host_device.h"

namespace kiln::math {

template <typename A>
struct SumScan : Any {
  using State = A;
  static constexpr bool indexed = false;
  KILN_HD static State make(A x, int64_t) { return x; }
  KILN_HD State operator()(State a, State b) const { return State(a + b); }
};

template <typename A>
struct ProdScan : Any {
  using State = A;
  static constexpr bool indexed = false;
  KILN_HD static State make(A x, int64_t) { return x; }
  KILN_HD State operator()(State a, State b) const { return State(a * b); }
};

// log(exp(a) + exp(b)) as max + log1p(exp(min - max)), so large values do not overflow; equal
// infinities (both -inf: an empty sum so far) stay as they are instead of giving inf - inf.
template <typename A>
struct LogAddExpScan : Floating {
  using State = A;
  static constexpr bool indexed = false;
  KILN_HD static State make(A x, int64_t) { return x; }
  KILN_HD State operator()(State a, State b) const {
    using std::exp;
    using std::isinf;
    using std::log1p;
    if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
    const A hi = a > b ? a : b, lo = a > b ? b : a;
    if (isinf(hi) && hi == lo) return hi;
    return hi + log1p(exp(lo - hi));
  }
};

// A running extreme and the position it was found at.
template <typename A>
struct Indexed {
  A value;
  int64_t index;
};

// cummax (IsMax) / cummin: the later element wins a tie, so the index is that of the last
// extreme so far, and a NaN wins over everything, the later NaN over an earlier one (PyTorch's
// rules). That is the maximum of (is NaN, value, index) in lexicographic order, so associative.
template <typename A, bool IsMax>
struct ExtremumScan : Any {
  using State = Indexed<A>;
  static constexpr bool indexed = true;
  KILN_HD static State make(A x, int64_t i) { return State{x, i}; }
  KILN_HD State operator()(State a, State b) const {
    if (is_nan(b.value)) return b;
    if (is_nan(a.value)) return a;
    const bool later_wins = IsMax ? !(b.value < a.value) : !(a.value < b.value);
    return later_wins ? b : a;
  }
};

// f(functor) for `op` on A, or f(Unsupported{}) where the op is not defined on A.
KILN_HD_TEMPLATE
template <typename A, typename F>
KILN_HD decltype(auto) visit_scan(ScanOp op, F&& f) {
  switch (op) {
    case ScanOp::Sum:
      return accepted<A>(f, SumScan<A>{});
    case ScanOp::Prod:
      return accepted<A>(f, ProdScan<A>{});
    case ScanOp::Max:
      return accepted<A>(f, ExtremumScan<A, true>{});
    case ScanOp::Min:
      return accepted<A>(f, ExtremumScan<A, false>{});
    case ScanOp::LogSumExp:
      return accepted<A>(f, LogAddExpScan<A>{});
  }
  return f(Unsupported{});
}

// The op's name in errors.
inline const char* scan_op_name(ScanOp op) {
  switch (op) {
    case ScanOp::Sum:
      return "cumsum";
    case ScanOp::Prod:
      return "cumprod";
    case ScanOp::Max:
      return "cummax";
    case ScanOp::Min:
      return "cummin";
    case ScanOp::LogSumExp:
      return "logcumsumexp";
  }
  return "scan";
}

}  // namespace kiln::math
