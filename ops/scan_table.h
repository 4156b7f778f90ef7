// The scan op table, a sibling of the elementwise tables in ops/op_table.h: every scan op
// appears here once. The kernels' functor visitor (ops/math/scan_functors.h), the op's name,
// the C++ declarations (ops/reduce.h) and definitions (ops/scan.cpp), the Python bindings
// (python/bind_reduce.cpp), the autocast table (ops/autocast_policy.cpp) and the test harness
// (kiln._C._op_table()["scan"]) expand from it.
#pragma once

#include "ops/backend.h"
#include "ops/op_table.h"

namespace kiln {

// _(name, ScanOp, functor, signature, autocast, saves):
//   ScanOp     the kernel contract's enum value (ops/backend.h)
//   functor    its combine step in ops/math/scan_functors.h (Note [Scan functors])
//   signature  Accumulate: (x, dim, dtype=None) -> Tensor; integer and bool inputs accumulate
//                          in int64 (cumsum)
//              Indexed:    (x, dim) -> (values, indices); values keep x's dtype (cummax)
//              Floating:   (x, dim) -> Tensor; floating inputs only (logcumsumexp)
//   autocast   as in ops/op_table.h
//   saves      what its backward (scan_backward in ops/scan.cpp) reads: Nothing,
//              InputOutput (x and the result) or Indices (the running extreme's positions)
#define KILN_SCAN_OPS(_)                                                 \
  _(cumsum, Sum, SumScan, Accumulate, Float32, Nothing)                  \
  _(cumprod, Prod, ProdScan, Accumulate, Float32, InputOutput)           \
  _(cummax, Max, MaxScan, Indexed, None, Indices)                        \
  _(cummin, Min, MinScan, Indexed, None, Indices)                        \
  _(logcumsumexp, LogSumExp, LogAddExpScan, Floating, None, InputOutput)

enum class ScanSignature : int8_t { Accumulate, Indexed, Floating };
enum class ScanSaves : int8_t { Nothing, InputOutput, Indices };

// The table's columns by op; inline, as the kernels (below the front ends, Note [Layers]) name
// the op in their errors.
#define KILN_SCAN_COLUMN(fn, Result, value, fallback) \
  inline Result fn(ScanOp op) {                       \
    switch (op) {                                     \
      KILN_SCAN_OPS(value)                            \
    }                                                 \
    return fallback;                                  \
  }
#define KILN_SCAN_NAME(name, op, functor, signature, autocast, saves) \
  case ScanOp::op:                                                    \
    return #name;
#define KILN_SCAN_SIGNATURE(name, op, functor, signature, autocast, saves) \
  case ScanOp::op:                                                         \
    return ScanSignature::signature;
#define KILN_SCAN_AUTOCAST(name, op, functor, signature, autocast, saves) \
  case ScanOp::op:                                                        \
    return AutocastPolicy::autocast;
#define KILN_SCAN_SAVES(name, op, functor, signature, autocast, saves) \
  case ScanOp::op:                                                     \
    return ScanSaves::saves;
KILN_SCAN_COLUMN(op_name, const char*, KILN_SCAN_NAME, "scan")
KILN_SCAN_COLUMN(op_signature, ScanSignature, KILN_SCAN_SIGNATURE, ScanSignature::Floating)
KILN_SCAN_COLUMN(op_autocast, AutocastPolicy, KILN_SCAN_AUTOCAST, AutocastPolicy::None)
KILN_SCAN_COLUMN(op_saves, ScanSaves, KILN_SCAN_SAVES, ScanSaves::Nothing)
#undef KILN_SCAN_SAVES
#undef KILN_SCAN_AUTOCAST
#undef KILN_SCAN_SIGNATURE
#undef KILN_SCAN_NAME
#undef KILN_SCAN_COLUMN

}  // namespace kiln
