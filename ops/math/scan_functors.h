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
// Adding a scan op: its line in KILN_SCAN_OPS (ops/scan_table.h, which names the functor), its
// ScanOp value (ops/backend.h), the functor here, its backward case in ops/scan.cpp and its test
// case (tests/python/scan_cases.py); visit_scan, the names, declarations, bindings and autocast
// entries expand from the table.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/backend.h"
#include "ops/math/functors.h"
#include "ops/math/host_device.h"
#include "ops/scan_table.h"

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

template <typename A>
using MaxScan = ExtremumScan<A, true>;
template <typename A>
using MinScan = ExtremumScan<A, false>;

// f(functor) for `op` on A (the functor KILN_SCAN_OPS names), or f(Unsupported{}) where the op
// is not defined on A.
KILN_HD_TEMPLATE
template <typename A, typename F>
KILN_HD decltype(auto) visit_scan(ScanOp op, F&& f) {
  switch (op) {
#define KILN_SCAN_VISIT(name, op, functor, signature, autocast, saves) \
  case ScanOp::op:                                                     \
    return accepted<A>(f, functor<A>{});
    KILN_SCAN_OPS(KILN_SCAN_VISIT)
#undef KILN_SCAN_VISIT
  }
  return f(Unsupported{});
}

}  // namespace kiln::math
