// Counts every heap allocation of a benchmark process: the executable's own
// malloc family takes precedence over libc's for every library it loads
// (libkiln, libstdc++'s operator new, Eigen, the CUDA runtime). Include from
// exactly one source file of an executable.
#pragma once

#include <atomic>
#include <cstddef>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace kiln_bench {
inline std::atomic<long> g_allocations{0};

// Heap allocations per call of f, averaged over `iters` calls after one warm-up call.
template <typename F>
double allocations_per_call(F&& f, int iters = 10000) {
  f();
  const long before = g_allocations.load();
  for (int i = 0; i < iters; ++i) f();
  return static_cast<double>(g_allocations.load() - before) / iters;
}
}  // namespace kiln_bench

extern "C" {
void* malloc(size_t n) noexcept {
  kiln_bench::g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) noexcept {
  kiln_bench::g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) noexcept {
  kiln_bench::g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
void* aligned_alloc(size_t alignment, size_t n) noexcept {
  kiln_bench::g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(alignment, n);
}
void* memalign(size_t alignment, size_t n) noexcept {
  kiln_bench::g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) noexcept {
  kiln_bench::g_allocations.fetch_add(1, std::memory_order_relaxed);
  *out = __libc_memalign(alignment, n);
  return *out ? 0 : 12;  // ENOMEM
}
}
