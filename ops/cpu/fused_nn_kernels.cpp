// Note [Fused nn kernels]: softmax / log_softmax, layer_norm / rms_norm and cross entropy as
// one pass per row instead of a chain of reductions and elementwise ops, each of which reads
// and writes the whole tensor. The kernels take contiguous [rows, cols] tensors; front ends
// (ops/nn_functional.cpp, ops/normalization.cpp, ops/loss.cpp) move the reduced dim last and
// flatten. Rows run in parallel (OpenMP); each row is max-subtracted before exp, and half
// types accumulate in float. The forward saves per-row statistics (mean and rstd, lse) so
// the backward reads each input once more at most. A plain backward calls the fused backward
// kernel; with create_graph the front ends use composite formulas so double backward works.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/cpu/vec_math.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

namespace {

// Rows per parallel chunk: enough work to amortize a thread's start.
bool parallel_rows(int64_t rows, int64_t cols) { return rows > 1 && rows * cols > (1 << 14); }

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Row sums over kLanes independent partial sums, added up in a fixed order at the end: the
// compiler vectorizes them without reassociating floats, and a row's result depends only on
// its length, not on the thread count.
constexpr int kLanes = 8;

template <typename A, typename F>
[[gnu::always_inline]] inline A lane_sum(int64_t n, F term) {
  A lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] += term(j + k);
  for (; j < n; ++j) lane[0] += term(j);
  A s = 0;
  for (A v : lane) s += v;
  return s;
}

// The row maximum, skipping NaN (a NaN still turns the whole row NaN through exp(x - m)).
template <typename A, typename T>
[[gnu::always_inline]] inline A row_max(const T* x, int64_t n) {
  A lane[kLanes];
  for (A& v : lane) v = -std::numeric_limits<A>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] = A(x[j + k]) > lane[k] ? A(x[j + k]) : lane[k];
  for (; j < n; ++j) lane[0] = A(x[j]) > lane[0] ? A(x[j]) : lane[0];
  A m = lane[0];
  for (A v : lane) m = v > m ? v : m;
  return m;
}

template <typename T>
[[gnu::always_inline]] inline void softmax_row(const T* x, T* y, int64_t cols, bool log) {
  using A = acc_t<T>;
  const A m = row_max<A>(x, cols);
  if (!log && std::is_same_v<T, A>) {
    // Keep exp in the output (full precision there) and scale it: one exp per element.
    const A s = lane_sum<A>(cols, [&](int64_t j) {
      const A e = exp_any(A(x[j]) - m);
      y[j] = T(e);
      return e;
    });
    const A inv = A(1) / s;
    for (int64_t j = 0; j < cols; ++j) y[j] = T(A(y[j]) * inv);
    return;
  }
  const A s = lane_sum<A>(cols, [&](int64_t j) { return exp_any(A(x[j]) - m); });
  if (log) {
    const A log_s = std::log(s);
    for (int64_t j = 0; j < cols; ++j) y[j] = T(A(x[j]) - m - log_s);
  } else {
    const A inv = A(1) / s;
    for (int64_t j = 0; j < cols; ++j) y[j] = T(exp_any(A(x[j]) - m) * inv);
  }
}

template <typename T>
[[gnu::always_inline]] inline void softmax_backward_row(T* gi, const T* g, const T* y, int64_t cols,
                                                        bool log) {
  using A = acc_t<T>;
  if (log) {
    const A s = lane_sum<A>(cols, [&](int64_t j) { return A(g[j]); });
    for (int64_t j = 0; j < cols; ++j) gi[j] = T(A(g[j]) - exp_any(A(y[j])) * s);
  } else {
    const A s = lane_sum<A>(cols, [&](int64_t j) { return A(g[j]) * A(y[j]); });
    for (int64_t j = 0; j < cols; ++j) gi[j] = T(A(y[j]) * (A(g[j]) - s));
  }
}

// Writes the row's mean (unless `mean` is null: rms_norm) and rstd, and the normalized row.
template <typename T>
[[gnu::always_inline]] inline void layer_norm_row(T* y, acc_t<T>* mean, acc_t<T>* rstd, const T* x,
                                                  const T* w, const T* b, int64_t cols,
                                                  double eps) {
  using A = acc_t<T>;
  // Two passes (mean, then centered squares): no cancellation for rows far from zero.
  const A mu = mean ? lane_sum<A>(cols, [&](int64_t j) { return A(x[j]); }) / A(cols) : A(0);
  const A sq = lane_sum<A>(cols, [&](int64_t j) {
    const A c = A(x[j]) - mu;
    return c * c;
  });
  const A rs = A(1) / std::sqrt(sq / A(cols) + A(eps));
  if (mean) *mean = mu;
  *rstd = rs;
  for (int64_t j = 0; j < cols; ++j) {
    A v = (A(x[j]) - mu) * rs;
    if (w) v *= A(w[j]);
    if (b) v += A(b[j]);
    y[j] = T(v);
  }
}

template <typename T>
[[gnu::always_inline]] inline void layer_norm_backward_row(T* gi, const T* g, const T* x,
                                                           const T* w, acc_t<T> mu, acc_t<T> rs,
                                                           bool centred, int64_t cols) {
  using A = acc_t<T>;
  auto gy = [&](int64_t j) { return w ? A(g[j]) * A(w[j]) : A(g[j]); };
  const A sum_gy = centred ? lane_sum<A>(cols, gy) : A(0);
  const A sum_gy_xhat = lane_sum<A>(cols, [&](int64_t j) { return gy(j) * (A(x[j]) - mu) * rs; });
  const A a = sum_gy / A(cols), c = sum_gy_xhat / A(cols);
  for (int64_t j = 0; j < cols; ++j) gi[j] = T(rs * (gy(j) - a - (A(x[j]) - mu) * rs * c));
}

// The float rows, compiled for AVX2 too (Note [AVX2 clones of hot loops]); other dtypes call
// the templates directly.
KILN_AVX2_CLONES void softmax_row_f32(const float* x, float* y, int64_t cols, bool log) {
  softmax_row(x, y, cols, log);
}
KILN_AVX2_CLONES void softmax_backward_row_f32(float* gi, const float* g, const float* y,
                                               int64_t cols, bool log) {
  softmax_backward_row(gi, g, y, cols, log);
}
KILN_AVX2_CLONES void layer_norm_row_f32(float* y, float* mean, float* rstd, const float* x,
                                         const float* w, const float* b, int64_t cols, double eps) {
  layer_norm_row(y, mean, rstd, x, w, b, cols, eps);
}
KILN_AVX2_CLONES void layer_norm_backward_row_f32(float* gi, const float* g, const float* x,
                                                  const float* w, float mu, float rs, bool centred,
                                                  int64_t cols) {
  layer_norm_backward_row(gi, g, x, w, mu, rs, centred, cols);
}

template <typename T>
void softmax_rows(const Tensor& out, const Tensor& in, bool log) {
  const int64_t rows = in.size(0), cols = in.size(1);
  const T* x = in.data<T>();
  T* y = out.data<T>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    if constexpr (std::is_same_v<T, float>) {
      softmax_row_f32(x + r * cols, y + r * cols, cols, log);
    } else {
      softmax_row(x + r * cols, y + r * cols, cols, log);
    }
  }
}

template <typename T>
void softmax_backward_rows(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out,
                           bool log) {
  const int64_t rows = out.size(0), cols = out.size(1);
  const T* g = grad_out.data<T>();
  const T* y = out.data<T>();
  T* gi = grad_in.data<T>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * cols;
    if constexpr (std::is_same_v<T, float>) {
      softmax_backward_row_f32(gi + o, g + o, y + o, cols, log);
    } else {
      softmax_backward_row(gi + o, g + o, y + o, cols, log);
    }
  }
}

template <typename T>
void layer_norm_rows(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                     const Tensor& weight, const Tensor& bias, double eps) {
  using A = acc_t<T>;
  const int64_t rows = in.size(0), cols = in.size(1);
  const T* x = in.data<T>();
  const T* w = data_or_null<T>(weight);
  const T* b = data_or_null<T>(bias);
  T* y = out.data<T>();
  A* mean_p = mean.defined() ? mean.data<A>() : nullptr;  // null: rms_norm
  A* rstd_p = rstd.data<A>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    A* mu = mean_p ? mean_p + r : nullptr;
    if constexpr (std::is_same_v<T, float>) {
      layer_norm_row_f32(y + r * cols, mu, rstd_p + r, x + r * cols, w, b, cols, eps);
    } else {
      layer_norm_row(y + r * cols, mu, rstd_p + r, x + r * cols, w, b, cols, eps);
    }
  }
}

template <typename T>
void layer_norm_backward_rows(const Tensor& grad_in, const Tensor& grad_weight,
                              const Tensor& grad_bias, const Tensor& grad_out, const Tensor& in,
                              const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  using A = acc_t<T>;
  const int64_t rows = in.size(0), cols = in.size(1);
  const T* x_all = in.data<T>();
  const T* g_all = grad_out.data<T>();
  const T* w = data_or_null<T>(weight);
  const A* mean_p = mean.defined() ? mean.data<A>() : nullptr;  // null: rms_norm
  const A* rstd_p = rstd.data<A>();
  if (grad_in.defined()) {
    T* gi = grad_in.data<T>();
#pragma omp parallel for if (parallel_rows(rows, cols))
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t o = r * cols;
      const A mu = mean_p ? mean_p[r] : A(0);
      if constexpr (std::is_same_v<T, float>) {
        layer_norm_backward_row_f32(gi + o, g_all + o, x_all + o, w, mu, rstd_p[r], mean_p, cols);
      } else {
        layer_norm_backward_row(gi + o, g_all + o, x_all + o, w, mu, rstd_p[r], mean_p, cols);
      }
    }
  }
  if (!grad_weight.defined() && !grad_bias.defined()) return;
  // Column sums over a fixed number of row chunks, then over chunks: the result does not
  // depend on the thread count.
  const int64_t chunks = std::min<int64_t>(rows, 64);
  const int64_t per_chunk = chunks > 0 ? (rows + chunks - 1) / chunks : 0;
  std::vector<A> part_w(grad_weight.defined() ? chunks * cols : 0);
  std::vector<A> part_b(grad_bias.defined() ? chunks * cols : 0);
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t k = 0; k < chunks; ++k) {
    A* pw = part_w.empty() ? nullptr : part_w.data() + k * cols;
    A* pb = part_b.empty() ? nullptr : part_b.data() + k * cols;
    for (int64_t r = k * per_chunk; r < std::min(rows, (k + 1) * per_chunk); ++r) {
      const T* x = x_all + r * cols;
      const T* g = g_all + r * cols;
      const A mu = mean_p ? mean_p[r] : A(0), rs = rstd_p[r];
      for (int64_t j = 0; j < cols; ++j) {
        if (pw) pw[j] += A(g[j]) * (A(x[j]) - mu) * rs;
        if (pb) pb[j] += A(g[j]);
      }
    }
  }
  T* gw = grad_weight.defined() ? grad_weight.data<T>() : nullptr;
  T* gb = grad_bias.defined() ? grad_bias.data<T>() : nullptr;
  for (int64_t j = 0; j < cols; ++j) {
    A sw = 0, sb = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      if (gw) sw += part_w[k * cols + j];
      if (gb) sb += part_b[k * cols + j];
    }
    if (gw) gw[j] = T(sw);
    if (gb) gb[j] = T(sb);
  }
}

// L, the loss and weight dtype, is T or (half T under autocast) float.
template <typename T, typename L>
void cross_entropy_rows(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                        const Tensor& target, const Tensor& weight, int64_t ignore_index) {
  using A = acc_t<T>;
  const int64_t rows = logits.size(0), cols = logits.size(1);
  const T* x_all = logits.data<T>();
  const int64_t* t = target.data<int64_t>();
  const L* w = data_or_null<L>(weight);
  L* loss_p = loss.data<L>();
  A* lse_p = lse.data<A>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = x_all + r * cols;
    const A m = row_max<A>(x, cols);
    const A l = m + std::log(lane_sum<A>(cols, [&](int64_t j) { return exp_any(A(x[j]) - m); }));
    lse_p[r] = l;
    if (t[r] == ignore_index) {
      loss_p[r] = L(0);
    } else {
      const A wt = w ? A(w[t[r]]) : A(1);
      loss_p[r] = L(wt * (l - A(x[t[r]])));
    }
  }
}

template <typename T, typename L>
void cross_entropy_backward_rows(const Tensor& grad_logits, const Tensor& grad_loss,
                                 const Tensor& logits, const Tensor& lse, const Tensor& target,
                                 const Tensor& weight, int64_t ignore_index) {
  using A = acc_t<T>;
  const int64_t rows = logits.size(0), cols = logits.size(1);
  const T* x_all = logits.data<T>();
  const L* gl = grad_loss.data<L>();
  const A* lse_p = lse.data<A>();
  const int64_t* t = target.data<int64_t>();
  const L* w = data_or_null<L>(weight);
  T* gi_all = grad_logits.data<T>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = x_all + r * cols;
    T* gi = gi_all + r * cols;
    if (t[r] == ignore_index) {
      for (int64_t j = 0; j < cols; ++j) gi[j] = T(0);
      continue;
    }
    const A scale = A(gl[r]) * (w ? A(w[t[r]]) : A(1));
    const A l = lse_p[r];
    for (int64_t j = 0; j < cols; ++j) {
      const A p = exp_any(A(x[j]) - l) - (j == t[r] ? A(1) : A(0));
      gi[j] = T(scale * p);
    }
  }
}

}  // namespace

void softmax_lastdim_kernel(const Tensor& out, const Tensor& in, bool log) {
  dispatch_floating(in.dtype(), "softmax",
                    [&](auto tag) { softmax_rows<typename decltype(tag)::type>(out, in, log); });
}

void softmax_backward_lastdim_kernel(const Tensor& grad_in, const Tensor& grad_out,
                                     const Tensor& out, bool log) {
  dispatch_floating(out.dtype(), "softmax_backward", [&](auto tag) {
    softmax_backward_rows<typename decltype(tag)::type>(grad_in, grad_out, out, log);
  });
}

void layer_norm_forward_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                               const Tensor& in, const Tensor& weight, const Tensor& bias,
                               double eps) {
  dispatch_floating(in.dtype(), "layer_norm", [&](auto tag) {
    layer_norm_rows<typename decltype(tag)::type>(out, mean, rstd, in, weight, bias, eps);
  });
}

void layer_norm_backward_kernel(const Tensor& grad_in, const Tensor& grad_weight,
                                const Tensor& grad_bias, const Tensor& grad_out, const Tensor& in,
                                const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  dispatch_floating(in.dtype(), "layer_norm_backward", [&](auto tag) {
    layer_norm_backward_rows<typename decltype(tag)::type>(grad_in, grad_weight, grad_bias,
                                                           grad_out, in, mean, rstd, weight);
  });
}

namespace {

// Runs f(T{}, L{}) for the logits' dtype T and the loss dtype L (T, or float for half T).
template <typename F>
void dispatch_logits_and_loss(const Tensor& logits, DType loss_dtype, const char* op, F&& f) {
  dispatch_floating(logits.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (loss_dtype == logits.dtype()) {
      f(T{}, T{});
    } else if constexpr (!std::is_same_v<acc_t<T>, T>) {
      f(T{}, acc_t<T>{});
    } else {
      fail(ErrorKind::Runtime, "[", op, "] loss dtype ", loss_dtype, " for ", logits.dtype(),
           " logits");
    }
  });
}

}  // namespace

void cross_entropy_forward_kernel(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                                  const Tensor& target, const Tensor& weight,
                                  int64_t ignore_index) {
  dispatch_logits_and_loss(logits, loss.dtype(), "cross_entropy", [&](auto t, auto l) {
    cross_entropy_rows<decltype(t), decltype(l)>(loss, lse, logits, target, weight, ignore_index);
  });
}

void cross_entropy_backward_kernel(const Tensor& grad_logits, const Tensor& grad_loss,
                                   const Tensor& logits, const Tensor& lse, const Tensor& target,
                                   const Tensor& weight, int64_t ignore_index) {
  dispatch_logits_and_loss(logits, grad_loss.dtype(), "cross_entropy_backward",
                           [&](auto t, auto l) {
                             cross_entropy_backward_rows<decltype(t), decltype(l)>(
                                 grad_logits, grad_loss, logits, lse, target, weight, ignore_index);
                           });
}

}  // namespace kiln::cpu
