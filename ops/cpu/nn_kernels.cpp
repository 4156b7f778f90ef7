// Row gather / scatter-add over contiguous 2-D tensors: the forward and
// backward of embedding and the target pick of nll_loss.
#include <omp.h>

#include <cstring>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

void row_gather_kernel(const Tensor& out, const Tensor& src, const Tensor& index) {
  const int64_t n = index.numel();
  const size_t row_bytes = static_cast<size_t>(src.size(1)) * src.itemsize();
  const int64_t* idx = index.data<int64_t>();
  const char* from = static_cast<const char*>(src.data_ptr());
  char* to = static_cast<char*>(out.data_ptr());
  if (row_bytes == 0) return;
#pragma omp parallel for if (n * static_cast<int64_t>(row_bytes) > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(to + i * row_bytes, from + idx[i] * row_bytes, row_bytes);
}

void row_scatter_add_kernel(const Tensor& out, const Tensor& src, const Tensor& index) {
  // Repeated indices add into one output row, so threads split the output rows, not the
  // indices: each thread scans every index and adds the rows it owns, in index order. Every
  // output row sums its sources in the serial order, whatever the thread count.
  dispatch_floating(out.dtype(), "row_scatter_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const int64_t n = index.numel(), width = src.size(1), rows = out.size(0);
    const int64_t* idx = index.data<int64_t>();
    const T* from = src.data<T>();
    T* to = out.data<T>();
#pragma omp parallel if (n * width > (1 << 16) && rows > 1)
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t lo = rows * t / threads, hi = rows * (t + 1) / threads;
      for (int64_t i = 0; i < n; ++i) {
        if (idx[i] < lo || idx[i] >= hi) continue;
        T* dst = to + idx[i] * width;
        const T* row = from + i * width;
        for (int64_t j = 0; j < width; ++j) dst[j] = T(A(dst[j]) + A(row[j]));
      }
    }
  });
}

}  // namespace kiln::cpu
