// Batch norm over a contiguous [outer, C, inner] tensor (NCHW: [N, C, H * W]; channels-last:
// [N * H * W, C, 1]). Per-channel sums run over fixed chunks of `outer` in parallel, each chunk
// keeping its own [C] partials in double, and the chunks combine in order, so results do not
// depend on the thread count. The statistics sum x - K with K the channel's first element:
// with the shift, sum(x^2) - sum(x)^2 / n loses no digits to a large mean.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

namespace {

struct Geometry {
  int64_t outer, C, inner;
};

Geometry geometry(const Tensor& in) { return {in.size(0), in.size(1), in.size(2)}; }

// Chunks of `outer` rows: enough to share out, few enough to keep each worth a thread.
int64_t outer_chunks(const Geometry& g) {
  const int64_t numel = g.outer * g.C * g.inner;
  return std::clamp<int64_t>(numel / (1 << 15), 1, std::min<int64_t>(g.outer, 256));
}

// s1[c] += a, s2[c] += b for f(c, offset, a, b) over every element of channel c.
template <typename F>
void channel_sums(const Geometry& g, std::vector<double>& s1, std::vector<double>& s2, F f) {
  const int64_t chunks = outer_chunks(g);
  std::vector<double> part(static_cast<size_t>(chunks * 2 * g.C), 0.0);
#pragma omp parallel for if (chunks > 1)
  for (int64_t k = 0; k < chunks; ++k) {
    double* p1 = part.data() + k * 2 * g.C;
    double* p2 = p1 + g.C;
    const int64_t o0 = g.outer * k / chunks, o1 = g.outer * (k + 1) / chunks;
    for (int64_t o = o0; o < o1; ++o) {
      for (int64_t c = 0; c < g.C; ++c) {
        const int64_t base = (o * g.C + c) * g.inner;
        double a = 0, b = 0;
        for (int64_t i = 0; i < g.inner; ++i) f(c, base + i, a, b);
        p1[c] += a;
        p2[c] += b;
      }
    }
  }
  s1.assign(static_cast<size_t>(g.C), 0.0);
  s2.assign(static_cast<size_t>(g.C), 0.0);
  for (int64_t k = 0; k < chunks; ++k) {
    for (int64_t c = 0; c < g.C; ++c) {
      s1[c] += part[k * 2 * g.C + c];
      s2[c] += part[k * 2 * g.C + g.C + c];
    }
  }
}

// out = (p - P[c]) * A[c] + (q - Q[c]) * B[c] + D[c] over [outer, C, inner]; q may be null
// (then Q and B are unused).
template <typename T, typename A>
void channel_affine(const Geometry& g, T* out, const T* p, const T* q, const std::vector<A>& P,
                    const std::vector<A>& Av, const std::vector<A>& Q, const std::vector<A>& B,
                    const std::vector<A>& D) {
#pragma omp parallel for collapse(2) if (g.outer * g.C * g.inner > (1 << 15))
  for (int64_t o = 0; o < g.outer; ++o) {
    for (int64_t c = 0; c < g.C; ++c) {
      const int64_t base = (o * g.C + c) * g.inner;
      const A pc = P[c], ac = Av[c], dc = D[c];
      if (q) {
        const A qc = Q[c], bc = B[c];
        for (int64_t i = 0; i < g.inner; ++i)
          out[base + i] = T((A(p[base + i]) - pc) * ac + (A(q[base + i]) - qc) * bc + dc);
      } else {
        for (int64_t i = 0; i < g.inner; ++i) out[base + i] = T((A(p[base + i]) - pc) * ac + dc);
      }
    }
  }
}

template <typename S>
std::vector<double> read_channels(const Tensor& t, int64_t C, double fallback) {
  std::vector<double> v(static_cast<size_t>(C), fallback);
  if (t.defined())
    for (int64_t c = 0; c < C; ++c) v[c] = static_cast<double>(t.data<S>()[c]);
  return v;
}

template <typename T>
void forward(const Tensor& out, const Tensor& mean_t, const Tensor& invstd_t, const Tensor& in,
             const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
             const Tensor& running_var, bool training, double momentum, double eps) {
  using A = acc_t<T>;
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Geometry g = geometry(in);
  const T* x = in.data<T>();
  std::vector<double> mean(static_cast<size_t>(g.C)), invstd(static_cast<size_t>(g.C));
  if (training) {
    const int64_t n = g.outer * g.inner;
    std::vector<double> shift(static_cast<size_t>(g.C));
    for (int64_t c = 0; c < g.C; ++c) shift[c] = static_cast<double>(x[c * g.inner]);
    std::vector<double> s1, s2;
    channel_sums(g, s1, s2, [&](int64_t c, int64_t i, double& a, double& b) {
      const double d = static_cast<double>(x[i]) - shift[c];
      a += d;
      b += d * d;
    });
    for (int64_t c = 0; c < g.C; ++c) {
      const double m = s1[c] / static_cast<double>(n);
      const double var = std::max(s2[c] / static_cast<double>(n) - m * m, 0.0);
      mean[c] = shift[c] + m;
      invstd[c] = 1.0 / std::sqrt(var + eps);
      if (running_mean.defined()) {
        S& r = running_mean.data<S>()[c];
        r = S((1.0 - momentum) * r + momentum * mean[c]);
      }
      if (running_var.defined()) {
        S& r = running_var.data<S>()[c];
        r = S((1.0 - momentum) * r + momentum * var * n / static_cast<double>(n - 1));
      }
    }
  } else {
    mean = read_channels<S>(running_mean, g.C, 0.0);
    std::vector<double> var = read_channels<S>(running_var, g.C, 1.0);
    for (int64_t c = 0; c < g.C; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + eps);
  }
  if (mean_t.defined())
    for (int64_t c = 0; c < g.C; ++c) mean_t.data<S>()[c] = S(mean[c]);
  if (invstd_t.defined())
    for (int64_t c = 0; c < g.C; ++c) invstd_t.data<S>()[c] = S(invstd[c]);
  const std::vector<double> w = read_channels<S>(weight, g.C, 1.0);
  const std::vector<double> b = read_channels<S>(bias, g.C, 0.0);
  std::vector<A> P(g.C), Av(g.C), D(g.C), none;
  for (int64_t c = 0; c < g.C; ++c) {
    P[c] = A(mean[c]);
    Av[c] = A(invstd[c] * w[c]);
    D[c] = A(b[c]);
  }
  channel_affine<T, A>(g, out.data<T>(), x, nullptr, P, Av, none, none, D);
}

template <typename T>
void backward(const Tensor& grad_in, const Tensor& grad_weight, const Tensor& grad_bias,
              const Tensor& grad_out, const Tensor& in, const Tensor& mean_t,
              const Tensor& invstd_t, const Tensor& weight, bool training) {
  using A = acc_t<T>;
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Geometry g = geometry(in);
  const T* x = in.data<T>();
  const T* go = grad_out.data<T>();
  const std::vector<double> mean = read_channels<S>(mean_t, g.C, 0.0);
  const std::vector<double> invstd = read_channels<S>(invstd_t, g.C, 1.0);
  const std::vector<double> w = read_channels<S>(weight, g.C, 1.0);
  std::vector<double> sg, sgx;  // sum(g), sum(g * (x - mean))
  if (training || grad_weight.defined() || grad_bias.defined()) {
    channel_sums(g, sg, sgx, [&](int64_t c, int64_t i, double& a, double& b) {
      const double gv = static_cast<double>(go[i]);
      a += gv;
      b += gv * (static_cast<double>(x[i]) - mean[c]);
    });
  }
  for (int64_t c = 0; c < g.C; ++c) {
    if (grad_weight.defined()) grad_weight.data<S>()[c] = S(sgx[c] * invstd[c]);
    if (grad_bias.defined()) grad_bias.data<S>()[c] = S(sg[c]);
  }
  if (!grad_in.defined()) return;
  // grad_in = invstd * w * (g - mean(g) - xhat * mean(g * xhat)) in training, where
  // xhat * mean(g * xhat) = (x - mean) * invstd^2 * sgx / n.
  const double n = static_cast<double>(g.outer * g.inner);
  std::vector<A> P(g.C, A(0)), Av(g.C), Q(g.C), B(g.C, A(0)), D(g.C, A(0));
  for (int64_t c = 0; c < g.C; ++c) {
    Av[c] = A(invstd[c] * w[c]);
    Q[c] = A(mean[c]);
    if (training) {
      P[c] = A(sg[c] / n);
      B[c] = A(-invstd[c] * w[c] * invstd[c] * invstd[c] * sgx[c] / n);
    }
  }
  channel_affine<T, A>(g, grad_in.data<T>(), go, training ? x : nullptr, P, Av, Q, B, D);
}

}  // namespace

void batch_norm_forward_kernel(const Tensor& out, const Tensor& mean, const Tensor& invstd,
                               const Tensor& in, const Tensor& weight, const Tensor& bias,
                               const Tensor& running_mean, const Tensor& running_var, bool training,
                               double momentum, double eps) {
  if (in.numel() == 0) return;
  dispatch_floating(in.dtype(), "batch_norm", [&](auto tag) {
    forward<typename decltype(tag)::type>(out, mean, invstd, in, weight, bias, running_mean,
                                          running_var, training, momentum, eps);
  });
}

void batch_norm_backward_kernel(const Tensor& grad_in, const Tensor& grad_weight,
                                const Tensor& grad_bias, const Tensor& grad_out, const Tensor& in,
                                const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                bool training) {
  if (in.numel() == 0) return;
  dispatch_floating(in.dtype(), "batch_norm_backward", [&](auto tag) {
    backward<typename decltype(tag)::type>(grad_in, grad_weight, grad_bias, grad_out, in, mean,
                                           invstd, weight, training);
  });
}

}  // namespace kiln::cpu
