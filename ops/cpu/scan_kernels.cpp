// Inclusive scans along the rows of a contiguous [outer, n] input: the CPU's loop shape around
// the shared scan functors (Note [Scan functors], ops/math/scan_functors.h). The running value
// is carried wider than the data, as PyTorch's CPU kernels do: half types in float, float32 in
// double, so a long float32 cumprod or cumsum rounds once per element instead of compounding
// (and matches PyTorch's values). CUDA carries float32 in float, as PyTorch's CUDA kernels do.
#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"
#include "ops/math/scan_functors.h"

namespace kiln::cpu {

namespace {

// Rows of up to kScanChunk elements are scanned serially, one row per thread; longer rows are
// cut into chunks of kScanChunk, which threads fold (pass 1) and then rescan starting from the
// fold of the chunks before them (pass 2). The chunking depends on n alone, so results do not
// depend on the thread count. Loops under kScanGrain elements stay on one thread.
constexpr int64_t kScanChunk = int64_t{1} << 15;
constexpr int64_t kScanGrain = int64_t{1} << 16;

template <typename T>
using scan_acc_t = std::conditional_t<std::is_same_v<T, float>, double, acc_t<T>>;

template <typename T, typename Fn>
struct RowScan {
  using A = scan_acc_t<T>;
  using State = typename Fn::State;
  Fn fn;
  const T* in;
  T* out;
  int64_t* indices;  // null unless Fn::indexed
  int64_t n;

  State load(int64_t row, int64_t i) const { return Fn::make(A(in[row * n + i]), i); }

  // Elements [begin, end) of `row`, continuing from `carry` (ignored when `first`).
  void scan(int64_t row, int64_t begin, int64_t end, State carry, bool first) const {
    State acc = first ? load(row, begin) : fn(carry, load(row, begin));
    store(row, begin, acc);
    for (int64_t i = begin + 1; i < end; ++i) {
      acc = fn(acc, load(row, i));
      store(row, i, acc);
    }
  }

  State fold(int64_t row, int64_t begin, int64_t end) const {
    State acc = load(row, begin);
    for (int64_t i = begin + 1; i < end; ++i) acc = fn(acc, load(row, i));
    return acc;
  }

  void store(int64_t row, int64_t i, const State& s) const {
    if constexpr (Fn::indexed) {
      out[row * n + i] = T(s.value);
      indices[row * n + i] = s.index;
    } else {
      out[row * n + i] = T(s);
    }
  }
};

template <typename T, typename Fn>
void scan_rows(const RowScan<T, Fn>& rs, int64_t outer) {
  using State = typename Fn::State;
  const int64_t n = rs.n;
  const bool parallel = outer * n >= kScanGrain;
  if (n <= kScanChunk) {
#pragma omp parallel for if (parallel) schedule(static)
    for (int64_t r = 0; r < outer; ++r) rs.scan(r, 0, n, State{}, true);
    return;
  }
  const int64_t chunks = (n + kScanChunk - 1) / kScanChunk, tasks = outer * chunks;
  std::vector<State> folds(static_cast<size_t>(tasks));
  // Pass 1: every chunk but each row's last (nothing comes after it) is folded.
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t c = t % chunks;
    if (c + 1 < chunks) folds[t] = rs.fold(t / chunks, c * kScanChunk, (c + 1) * kScanChunk);
  }
  // The carry into chunk c is the fold of chunks 0 .. c-1, in order.
  for (int64_t r = 0; r < outer; ++r)
    for (int64_t c = 1; c + 1 < chunks; ++c)
      folds[r * chunks + c] = rs.fn(folds[r * chunks + c - 1], folds[r * chunks + c]);
  // Pass 2: each chunk rescanned from the fold of the chunks before it.
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t r = t / chunks, c = t % chunks;
    const int64_t begin = c * kScanChunk, end = std::min(n, begin + kScanChunk);
    rs.scan(r, begin, end, c > 0 ? folds[t - 1] : State{}, c == 0);
  }
}

}  // namespace

void scan_kernel(ScanOp op, const Tensor& out, const Tensor& indices, const Tensor& in) {
  const int64_t outer = in.size(0), n = in.size(1);
  if (outer == 0 || n == 0) return;
  const char* name = op_name(op);
  dispatch_all(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    math::visit_scan<scan_acc_t<T>>(op, [&](auto fn) {
      using Fn = decltype(fn);
      if constexpr (math::is_unsupported_v<Fn>) {
        fail(ErrorKind::NotImplemented, "[", name, "] not implemented for dtype ", in.dtype());
      } else {
        int64_t* idx = Fn::indexed ? indices.data<int64_t>() : nullptr;
        scan_rows(RowScan<T, Fn>{fn, in.data<T>(), out.data<T>(), idx, n}, outer);
      }
    });
  });
}

}  // namespace kiln::cpu
