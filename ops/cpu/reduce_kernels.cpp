// Row reductions over a contiguous [outer, inner] input. Sums accumulate in
// acc_t (float for half types) so float16 sums do not lose precision.
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

namespace {

template <typename T, typename Init, typename Step>
void reduce_rows(const Tensor& out, const Tensor& in, Init init, Step step) {
  const int64_t outer = in.size(0), inner = in.size(1);
  const T* src = in.data<T>();
  T* dst = out.data<T>();
  for (int64_t r = 0; r < outer; ++r) {
    auto acc = init();
    const T* row = src + r * inner;
    for (int64_t i = 0; i < inner; ++i) acc = step(acc, row[i]);
    dst[r] = T(acc);
  }
}

// The identities of max and min: -inf / +inf where T has them, else its extremes.
template <typename T>
T lowest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}
template <typename T>
T highest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::max();
}

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    return std::isnan(static_cast<float>(v));
  }
}

}  // namespace

void reduce_kernel(ReduceOp op, const Tensor& out, const Tensor& in) {
  if (op == ReduceOp::All || op == ReduceOp::Any) {
    KILN_CHECK(in.dtype() == DType::Bool, Runtime, "[reduce] all/any expect bool input");
    bool is_all = op == ReduceOp::All;
    return reduce_rows<bool>(out, in, [is_all] { return is_all; }, [is_all](bool acc, bool x) {
      return is_all ? (acc && x) : (acc || x);
    });
  }
  dispatch_all(in.dtype(), "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    switch (op) {
      case ReduceOp::Sum:
        return reduce_rows<T>(out, in, [] { return A(0); }, [](A acc, T x) { return A(acc + A(x)); });
      case ReduceOp::Prod:
        return reduce_rows<T>(out, in, [] { return A(1); }, [](A acc, T x) { return A(acc * A(x)); });
      case ReduceOp::Max:
        // Start from the identity, not an element: the init runs once per row.
        return reduce_rows<T>(out, in, [] { return lowest_value<A>(); }, [](A acc, T x) {
          if (is_nan(acc)) return acc;
          return (is_nan(x) || A(x) > acc) ? A(x) : acc;
        });
      case ReduceOp::Min:
        return reduce_rows<T>(out, in, [] { return highest_value<A>(); }, [](A acc, T x) {
          if (is_nan(acc)) return acc;
          return (is_nan(x) || A(x) < acc) ? A(x) : acc;
        });
      default:
        break;
    }
  });
}

}  // namespace kiln::cpu
