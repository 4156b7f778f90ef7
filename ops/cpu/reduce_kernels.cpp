// Row reductions over a contiguous [outer, inner] input. Sums accumulate in
// acc_t (float for half types) so float16 sums do not lose precision.
#include <cmath>
#include <type_traits>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

namespace {

// init(row) gives the accumulator's start value (max/min start from the row's first element).
template <typename T, typename Init, typename Step>
void reduce_rows(const Tensor& out, const Tensor& in, Init init, Step step) {
  const int64_t outer = in.size(0), inner = in.size(1);
  const T* src = in.data<T>();
  T* dst = out.data<T>();
  for (int64_t r = 0; r < outer; ++r) {
    const T* row = src + r * inner;
    auto acc = init(row);
    for (int64_t i = 0; i < inner; ++i) acc = step(acc, row[i]);
    dst[r] = T(acc);
  }
}

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

}  // namespace

void reduce_kernel(ReduceOp op, const Tensor& out, const Tensor& in) {
  if (op == ReduceOp::All || op == ReduceOp::Any) {
    KILN_CHECK(in.dtype() == DType::Bool, Runtime, "[reduce] all/any expect bool input");
    bool is_all = op == ReduceOp::All;
    return reduce_rows<bool>(
        out, in, [is_all](const bool*) { return is_all; },
        [is_all](bool acc, bool x) { return is_all ? (acc && x) : (acc || x); });
  }
  dispatch_all(in.dtype(), "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    switch (op) {
      case ReduceOp::Sum:
        return reduce_rows<T>(out, in, [](const T*) { return A(0); },
                              [](A acc, T x) { return A(acc + A(x)); });
      case ReduceOp::Prod:
        return reduce_rows<T>(out, in, [](const T*) { return A(1); },
                              [](A acc, T x) { return A(acc * A(x)); });
      case ReduceOp::Max:
      case ReduceOp::Min:
        return reduce_rows<T>(out, in, [](const T* row) { return A(row[0]); },
                              [op](A acc, T x) { return beats(op, A(x), acc) ? A(x) : acc; });
      default:
        break;
    }
  });
}

void arg_reduce_kernel(ReduceOp op, const Tensor& values, const Tensor& indices,
                       const Tensor& in) {
  dispatch_all(in.dtype(), "arg_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const int64_t outer = in.size(0), inner = in.size(1);
    const T* src = in.data<T>();
    T* val = values.data<T>();
    int64_t* idx = indices.data<int64_t>();
    for (int64_t r = 0; r < outer; ++r) {
      const T* row = src + r * inner;
      int64_t best = 0;
      for (int64_t i = 1; i < inner; ++i)
        if (beats(op, A(row[i]), A(row[best]))) best = i;
      val[r] = row[best];
      idx[r] = best;
    }
  });
}

}  // namespace kiln::cpu
