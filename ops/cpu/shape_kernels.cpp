// tril / triu.
#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"
#include "ops/math/convert.h"

namespace kiln::cpu {

void triangle_kernel(const Tensor& out, const Tensor& in, int64_t diagonal, bool upper) {
  const int64_t rows = in.size(-2), cols = in.size(-1);
  const int64_t batch = in.numel() / (rows * cols);
  dispatch_all(in.dtype(), upper ? "triu" : "tril", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    const T zero = math::convert<T>(0);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t row = (b * rows + i) * cols;
        for (int64_t j = 0; j < cols; ++j) {
          const bool keep = upper ? j - i >= diagonal : j - i <= diagonal;
          dst[row + j] = keep ? src[row + j] : zero;
        }
      }
    }
  });
}

}  // namespace kiln::cpu
