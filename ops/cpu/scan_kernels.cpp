// Inclusive scans (cumsum, cumprod) along the rows of a contiguous [outer, n]
// input. The running value is carried wider than the data, as PyTorch's CPU kernels
// do: half types in float, float32 in double, so a long float32 cumprod or cumsum
// rounds once per element instead of compounding (and matches PyTorch's values).
#include <type_traits>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

void scan_kernel(ReduceOp op, const Tensor& out, const Tensor& in) {
  KILN_CHECK(op == ReduceOp::Sum || op == ReduceOp::Prod, Runtime,
             "[scan] only Sum and Prod scans exist");
  dispatch_numeric(in.dtype(), "scan", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = std::conditional_t<std::is_same_v<T, float>, double, acc_t<T>>;
    const int64_t outer = in.size(0), n = in.size(1);
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    const bool is_sum = op == ReduceOp::Sum;
    for (int64_t r = 0; r < outer; ++r) {
      A acc = is_sum ? A(0) : A(1);
      for (int64_t i = 0; i < n; ++i) {
        const A x = A(src[r * n + i]);
        acc = is_sum ? A(acc + x) : A(acc * x);
        dst[r * n + i] = T(acc);
      }
    }
  });
}

}  // namespace kiln::cpu
