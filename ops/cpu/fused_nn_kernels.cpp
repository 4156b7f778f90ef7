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
#include "ops/dispatch.h"

namespace kiln::cpu {

namespace {

// Rows per parallel chunk: enough work to amortize a thread's start.
bool parallel_rows(int64_t rows, int64_t cols) { return rows > 1 && rows * cols > (1 << 14); }

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <typename T>
void softmax_rows(const Tensor& out, const Tensor& in, bool log) {
  using A = acc_t<T>;
  const int64_t rows = in.size(0), cols = in.size(1);
  const T* x_all = in.data<T>();
  T* y_all = out.data<T>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = x_all + r * cols;
    T* y = y_all + r * cols;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = 0; j < cols; ++j) m = std::fmax(m, A(x[j]));
    A s = 0;
    if (!log && std::is_same_v<T, A>) {
      // Keep exp in the output (full precision there) and scale it: one exp per element.
      for (int64_t j = 0; j < cols; ++j) {
        const A e = std::exp(A(x[j]) - m);
        y[j] = T(e);
        s += e;
      }
      const A inv = A(1) / s;
      for (int64_t j = 0; j < cols; ++j) y[j] = T(A(y[j]) * inv);
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) s += std::exp(A(x[j]) - m);
    if (log) {
      const A log_s = std::log(s);
      for (int64_t j = 0; j < cols; ++j) y[j] = T(A(x[j]) - m - log_s);
    } else {
      const A inv = A(1) / s;
      for (int64_t j = 0; j < cols; ++j) y[j] = T(std::exp(A(x[j]) - m) * inv);
    }
  }
}

template <typename T>
void softmax_backward_rows(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out,
                           bool log) {
  using A = acc_t<T>;
  const int64_t rows = out.size(0), cols = out.size(1);
  const T* g_all = grad_out.data<T>();
  const T* y_all = out.data<T>();
  T* gi_all = grad_in.data<T>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const T* g = g_all + r * cols;
    const T* y = y_all + r * cols;
    T* gi = gi_all + r * cols;
    A s = 0;
    if (log) {
      for (int64_t j = 0; j < cols; ++j) s += A(g[j]);
      for (int64_t j = 0; j < cols; ++j) gi[j] = T(A(g[j]) - std::exp(A(y[j])) * s);
    } else {
      for (int64_t j = 0; j < cols; ++j) s += A(g[j]) * A(y[j]);
      for (int64_t j = 0; j < cols; ++j) gi[j] = T(A(y[j]) * (A(g[j]) - s));
    }
  }
}

template <typename T>
void layer_norm_rows(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                     const Tensor& weight, const Tensor& bias, double eps) {
  using A = acc_t<T>;
  const int64_t rows = in.size(0), cols = in.size(1);
  const T* x_all = in.data<T>();
  const T* w = data_or_null<T>(weight);
  const T* b = data_or_null<T>(bias);
  T* y_all = out.data<T>();
  A* mean_p = mean.defined() ? mean.data<A>() : nullptr;  // null: rms_norm
  A* rstd_p = rstd.data<A>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = x_all + r * cols;
    T* y = y_all + r * cols;
    // Two passes (mean, then centered squares): no cancellation for rows far from zero.
    A s = 0;
    if (mean_p)
      for (int64_t j = 0; j < cols; ++j) s += A(x[j]);
    const A mu = s / A(cols);
    A sq = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const A c = A(x[j]) - mu;
      sq += c * c;
    }
    const A rs = A(1) / std::sqrt(sq / A(cols) + A(eps));
    if (mean_p) mean_p[r] = mu;
    rstd_p[r] = rs;
    for (int64_t j = 0; j < cols; ++j) {
      A v = (A(x[j]) - mu) * rs;
      if (w) v *= A(w[j]);
      if (b) v += A(b[j]);
      y[j] = T(v);
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
    T* gi_all = grad_in.data<T>();
#pragma omp parallel for if (parallel_rows(rows, cols))
    for (int64_t r = 0; r < rows; ++r) {
      const T* x = x_all + r * cols;
      const T* g = g_all + r * cols;
      T* gi = gi_all + r * cols;
      const A mu = mean_p ? mean_p[r] : A(0), rs = rstd_p[r];
      A sum_gy = 0, sum_gy_xhat = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const A gy = w ? A(g[j]) * A(w[j]) : A(g[j]);
        sum_gy += gy;
        sum_gy_xhat += gy * (A(x[j]) - mu) * rs;
      }
      const A a = mean_p ? sum_gy / A(cols) : A(0), c = sum_gy_xhat / A(cols);
      for (int64_t j = 0; j < cols; ++j) {
        const A gy = w ? A(g[j]) * A(w[j]) : A(g[j]);
        gi[j] = T(rs * (gy - a - (A(x[j]) - mu) * rs * c));
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
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = 0; j < cols; ++j) m = std::fmax(m, A(x[j]));
    A s = 0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp(A(x[j]) - m);
    const A l = m + std::log(s);
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
      const A p = std::exp(A(x[j]) - l) - (j == t[r] ? A(1) : A(0));
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
  dispatch_logits_and_loss(logits, grad_loss.dtype(), "cross_entropy_backward", [&](auto t, auto l) {
    cross_entropy_backward_rows<decltype(t), decltype(l)>(grad_logits, grad_loss, logits, lse,
                                                          target, weight, ignore_index);
  });
}

}  // namespace kiln::cpu
