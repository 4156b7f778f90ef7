// Where kiln's host time per CUDA op goes, without Python: the allocator
// alone (allocate + free of a 1024-float tensor) and a whole kiln::add from
// C++. benchmarks/ops.py prints these beside the Python-level numbers and the
// bare launch floor, so the cost of each layer is visible.
#include <cstdio>

#include "core/tensor.h"
#include "cuda/device.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/creation.h"

#include "benchmarks/malloc_counter.h"
#include "benchmarks/median_timer.h"

constexpr int kIters = 20000;  // calls per timed repeat

int main() {
  using namespace kiln;
  if (!cuda::is_available()) {
    std::printf("cuda_overhead: no CUDA device\n");
    return 1;
  }
  const Device dev(DeviceType::CUDA, 0);
  Tensor a = ones({1024}, DType::Float32, dev), b = ones({1024}, DType::Float32, dev);
  Tensor out = empty_like(a);
  const Backend& cuda = backend(dev);
  // Interleaved rounds: the spread between rounds shows how noisy the host is.
  for (int round = 0; round < 2; ++round) {
    const double alloc = median_us([&] { make_tensor({1024}, DType::Float32, dev); }, kIters);
    const double kernel = median_us([&] { cuda.binary(BinaryOp::add, out, a, b); }, kIters);
    const double add_op = median_us([&] { add(a, b, Scalar(1)); }, kIters);
    std::printf("allocate+free(round %d) %.3f\nbinary kernel entry(round %d) %.3f\n"
                "add(round %d) %.3f\n", round, alloc, round, kernel, round, add_op);
  }
  // Heap allocations per call, host side (kiln's and the CUDA runtime's).
  std::printf("mallocs allocate+free %.2f\nmallocs binary kernel entry %.2f\nmallocs add %.2f\n",
              kiln_bench::allocations_per_call([&] { make_tensor({1024}, DType::Float32, dev); }),
              kiln_bench::allocations_per_call([&] { cuda.binary(BinaryOp::add, out, a, b); }),
              kiln_bench::allocations_per_call([&] { add(a, b, Scalar(1)); }));
  return 0;
}
