// kiln's host cost per op without Python, on the CPU: time and heap
// allocations per call of make_tensor and of kiln::add on 1-element tensors.
// The front end, promotion, allocation and autograd checks are the ones a
// CUDA op runs (only the kernel differs), so this tracks the per-op overhead
// on a machine without a GPU. benchmarks/cpu_overhead.py prints the Python
// side; docs/benchmarks.md ("host overhead (CPU-side)") records both.
#include <cstdio>
#include <functional>

#include "core/tensor.h"
#include "ops/binary.h"
#include "ops/creation.h"

#include "benchmarks/malloc_counter.h"
#include "benchmarks/median_timer.h"

constexpr int kIters = 200000;  // calls per timed repeat

int main() {
  using namespace kiln;
  Tensor a = ones({1}, DType::Float32, Device()), b = ones({1}, DType::Float32, Device());
  Tensor x = ones({1024}, DType::Float32, Device()), y = ones({1024}, DType::Float32, Device());
  struct Case {
    const char* name;
    std::function<void()> fn;
  };
  const Case cases[] = {
      {"make_tensor({1})", [] { make_tensor({1}, DType::Float32, Device()); }},
      {"add(a, b), 1 element", [&] { add(a, b); }},
      {"add(a, 2), 1 element", [&] { add(a, Scalar(2)); }},
      {"add(x, y), 1024 elements", [&] { add(x, y); }},
  };
  std::printf("%-28s %10s %12s\n", "C++ call", "us/call", "mallocs/call");
  for (const Case& c : cases)
    std::printf("%-28s %10.3f %12.2f\n", c.name, median_us(c.fn, kIters),
                kiln_bench::allocations_per_call(c.fn));
  return 0;
}
