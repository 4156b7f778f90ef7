// Inclusive scans (cumsum, cumprod) along the rows of a contiguous [outer, n]
// input. Half types carry the running value in float so long float16 cumsums
// round once per element instead of compounding.
#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

void scan_kernel(ReduceOp op, const Tensor& out, const Tensor& in) {
  KILN_CHECK(op == ReduceOp::Sum || op == ReduceOp::Prod, Runtime,
             "[scan] only Sum and Prod scans exist");
  dispatch_numeric(in.dtype(), "scan", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
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
