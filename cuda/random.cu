// CUDA random kernels. Same scheme as ops/cpu/random_kernels.cpp (Note
// [Random streams] in ops/philox.h): group g of K elements uses Philox
// counter offset + g, one thread per group, so a seed gives the same uniform,
// integer, Bernoulli and dropout values on the GPU as on the CPU, for any
// launch configuration.
#include <cmath>

#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "ops/dispatch.h"
#include "ops/philox.h"
#include "ops/philox_capture.h"

namespace kiln::cuda {

namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

template <typename T>
constexpr int uniform_group() {
  return std::is_same_v<T, double> ? 2 : 4;
}

template <typename T>
__device__ double unit_for(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, int j) {
  const uint32_t w[4] = {w0, w1, w2, w3};
  if constexpr (std::is_same_v<T, double>) {
    return philox_unit(w[2 * j], w[2 * j + 1]);
  } else {
    constexpr int bits = std::is_same_v<T, float> ? 24 : std::is_same_v<T, __half> ? 11 : 8;
    return static_cast<double>(w[j] >> (32 - bits)) * ldexp(1.0, -bits);
  }
}

// The largest T below v (v finite and not the lowest value).
template <typename T>
__device__ T step_down(T v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    unsigned short bits;
    if constexpr (std::is_same_v<T, __half>) bits = __half_as_ushort(v);
    else bits = __bfloat16_as_ushort(v);
    bits = (bits & 0x8000u) ? bits + 1 : bits == 0 ? 0x8001u : bits - 1;
    if constexpr (std::is_same_v<T, __half>) return __ushort_as_half(bits);
    else return __ushort_as_bfloat16(bits);
  } else {
    return nextafter(v, -INFINITY);
  }
}

template <typename T>
__device__ T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __double2half(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __double2bfloat16(v);
  } else {
    return static_cast<T>(v);
  }
}

template <int K, typename Write>
__global__ void groups_kernel(int64_t n, PhiloxState state, Write write) {
  const PhiloxState s = philox_resolve(state);  // relative inside a CUDA graph
  const int64_t groups = (n + K - 1) / K;
  KILN_GRID_STRIDE(g, groups) {
    const auto w = philox4x32(s.seed, s.offset + static_cast<uint64_t>(g));
    const int64_t base = g * K;
    const int count = static_cast<int>(n - base < K ? n - base : K);
    for (int j = 0; j < count; ++j) write(base + j, w[0], w[1], w[2], w[3], j);
  }
}

template <typename T>
struct UniformWrite {
  T* out;
  double lo, hi, width;
  __device__ void operator()(int64_t i, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3,
                             int j) const {
    T v = from_double<T>(lo + width * unit_for<T>(w0, w1, w2, w3, j));
    while (width > 0 && static_cast<double>(v) >= hi) v = step_down(v);
    out[i] = v;
  }
};

template <typename T>
struct NormalWrite {
  T* out;
  double mean, std;
  __device__ void operator()(int64_t i, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3,
                             int j) const {
    using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const M r = sqrt(M(-2) * log(static_cast<M>(1.0 - philox_unit(w0, w1))));
    const M t = static_cast<M>(kTwoPi * philox_unit(w2, w3));
    out[i] = from_double<T>(mean + std * static_cast<double>(r * (j == 0 ? cos(t) : sin(t))));
  }
};

template <typename T>
struct PairWrite {  // Bernoulli, Integer and Exponential read word pair j
  T* out;
  RandomDist dist;
  double a;
  uint64_t low, range;
  __device__ void operator()(int64_t i, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3,
                             int j) const {
    const uint32_t hi = j == 0 ? w0 : w2, lo = j == 0 ? w1 : w3;
    if (dist == RandomDist::Integer) {
      uint64_t r = philox_u64(hi, lo);
      if (range != 0) r %= range;
      const int64_t v = static_cast<int64_t>(low + r);
      if constexpr (std::is_integral_v<T>) out[i] = static_cast<T>(v);
      else out[i] = from_double<T>(static_cast<double>(v));
    } else if (dist == RandomDist::Exponential) {
      out[i] = from_double<T>(-log1p(-philox_unit(hi, lo)) / a);
    } else {
      out[i] = from_double<T>(philox_unit(hi, lo) < a ? 1.0 : 0.0);
    }
  }
};

template <typename T, typename P>
struct BernoulliWrite {
  T* out;
  const P* probs;
  __device__ void operator()(int64_t i, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3,
                             int j) const {
    const double u = j == 0 ? philox_unit(w0, w1) : philox_unit(w2, w3);
    out[i] = from_double<T>(u < static_cast<double>(static_cast<acc_t<P>>(probs[i])) ? 1.0 : 0.0);
  }
};

// Note [Dropout on the GPU]: the mask is the CPU's (group g of two elements reads counter
// offset + g, element j keeps where philox_unit(word pair j) >= p), tested in integers:
// philox_unit(w) = bits * 2^-53 >= p  <=>  bits >= ceil(p * 2^53), all exact in double, so
// no double arithmetic per element. Each thread moves its pair as one access: over the small
// GPT's 6.3M float32 activations on the H200 the per-element writes through groups_kernel took
// 31 us, the pairs 25 (PyTorch 16, four elements per Philox call, which would change the
// stream). The backward reads the bool mask in the same pass as the gradient: 14 us where a
// bool -> float copy and two multiplications took 57.
template <typename T, bool Paired>
__global__ void dropout_pairs_kernel(int64_t n, PhiloxState state, T* out, bool* mask, const T* in,
                                     uint64_t threshold, acc_t<T> scale) {
  using A = acc_t<T>;
  const PhiloxState s = philox_resolve(state);  // relative inside a CUDA graph
  const int64_t groups = (n + 1) / 2;
  KILN_GRID_STRIDE(g, groups) {
    const auto w = philox4x32(s.seed, s.offset + static_cast<uint64_t>(g));
    const bool keep[2] = {(philox_u64(w[0], w[1]) >> 11) >= threshold,
                          (philox_u64(w[2], w[3]) >> 11) >= threshold};
    const int64_t i = 2 * g;
    if (Paired && i + 1 < n) {
      const Pack<T, 2> x = *reinterpret_cast<const Pack<T, 2>*>(in + i);
      Pack<T, 2> y;
      Pack<bool, 2> m;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        m.v[j] = keep[j];
        y.v[j] = keep[j] ? static_cast<T>(static_cast<A>(x.v[j]) * scale) : T(0);
      }
      *reinterpret_cast<Pack<T, 2>*>(out + i) = y;
      *reinterpret_cast<Pack<bool, 2>*>(mask + i) = m;
    } else {
      for (int j = 0; j < 2 && i + j < n; ++j) {
        mask[i + j] = keep[j];
        out[i + j] = keep[j] ? static_cast<T>(static_cast<A>(in[i + j]) * scale) : T(0);
      }
    }
  }
}

// out = grad * mask * scale: a product, not a select, so a NaN gradient at a dropped element
// stays NaN as on the CPU (ops/cpu/random_kernels.cpp) and in PyTorch.
template <int V, typename T>
__global__ void dropout_backward_flat_kernel(int64_t n, T* out, const T* grad, const bool* mask,
                                             acc_t<T> scale) {
  using A = acc_t<T>;
  const int64_t packs = n / V;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = first; p < packs; p += step) {
    const Pack<T, V> g = reinterpret_cast<const Pack<T, V>*>(grad)[p];
    const Pack<bool, V> m = reinterpret_cast<const Pack<bool, V>*>(mask)[p];
    Pack<T, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = static_cast<T>(static_cast<A>(g.v[k]) * A(m.v[k]) * scale);
    reinterpret_cast<Pack<T, V>*>(out)[p] = r;
  }
  for (int64_t i = packs * V + first; i < n; i += step) {
    out[i] = static_cast<T>(static_cast<A>(grad[i]) * A(mask[i]) * scale);
  }
}

template <int K, typename Write>
void launch_groups(const Tensor& out, const PhiloxState& s, Write write, const char* op) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  groups_kernel<K><<<grid_for((n + K - 1) / K), kThreads, 0, ctx.stream>>>(n, s, write);
  KILN_CUDA_CHECK_LAUNCH(op);
}

void random_kernel(RandomDist dist, const Tensor& out, const RandomParams& p) {
  if (dist == RandomDist::Uniform || dist == RandomDist::Normal) {
    dispatch_floating(out.dtype(), dist == RandomDist::Uniform ? "uniform_" : "normal_",
                      [&](auto tag) {
                        using T = device_t<typename decltype(tag)::type>;
                        T* o = static_cast<T*>(out.data_ptr());
                        if (dist == RandomDist::Uniform) {
                          launch_groups<uniform_group<T>()>(
                              out, p.state, UniformWrite<T>{o, p.a, p.b, p.b - p.a}, "uniform_");
                        } else {
                          launch_groups<2>(out, p.state, NormalWrite<T>{o, p.a, p.b}, "normal_");
                        }
                      });
    return;
  }
  dispatch_all(out.dtype(), "random_", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    launch_groups<2>(out, p.state,
                     PairWrite<T>{static_cast<T*>(out.data_ptr()), dist, p.a,
                                  static_cast<uint64_t>(p.low), p.range},
                     "random_");
  });
}

void bernoulli_kernel(const Tensor& out, const Tensor& probs, const RandomParams& p) {
  dispatch_floating(probs.dtype(), "bernoulli", [&](auto ptag) {
    using P = device_t<typename decltype(ptag)::type>;
    dispatch_all(out.dtype(), "bernoulli", [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      launch_groups<2>(out, p.state,
                       BernoulliWrite<T, P>{static_cast<T*>(out.data_ptr()),
                                            static_cast<const P*>(probs.data_ptr())},
                       "bernoulli");
    });
  });
}

void dropout_kernel(const Tensor& out, const Tensor& mask, const Tensor& in,
                    const RandomParams& p) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  // Note [Dropout on the GPU]; p.a is at most 1, so the threshold is at most 2^53.
  const uint64_t threshold = static_cast<uint64_t>(std::ceil(std::ldexp(p.a, 53)));
  dispatch_floating(out.dtype(), "dropout", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    T* o = static_cast<T*>(out.data_ptr());
    bool* m = mask.data<bool>();
    const T* x = static_cast<const T*>(in.data_ptr());
    const auto scale = static_cast<acc_t<T>>(p.b);
    const unsigned grid = grid_for((n + 1) / 2);
    if (is_aligned(o, 2 * sizeof(T)) && is_aligned(x, 2 * sizeof(T)) && is_aligned(m, 2)) {
      dropout_pairs_kernel<T, true>
          <<<grid, kThreads, 0, ctx.stream>>>(n, p.state, o, m, x, threshold, scale);
    } else {
      dropout_pairs_kernel<T, false>
          <<<grid, kThreads, 0, ctx.stream>>>(n, p.state, o, m, x, threshold, scale);
    }
  });
  KILN_CUDA_CHECK_LAUNCH("dropout");
}

void dropout_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& mask,
                             double scale) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  dispatch_floating(out.dtype(), "dropout_backward", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    T* o = static_cast<T*>(out.data_ptr());
    const T* g = static_cast<const T*>(grad.data_ptr());
    const bool* m = mask.data<bool>();
    const auto s = static_cast<acc_t<T>>(scale);
    constexpr int V = kVectorBytes / sizeof(T);
    if (is_aligned(o, sizeof(T) * V) && is_aligned(g, sizeof(T) * V) && is_aligned(m, V)) {
      dropout_backward_flat_kernel<V, T>
          <<<flat_grid(n, V), kThreads, 0, ctx.stream>>>(n, o, g, m, s);
    } else {
      dropout_backward_flat_kernel<1, T>
          <<<flat_grid(n, 1), kThreads, 0, ctx.stream>>>(n, o, g, m, s);
    }
  });
  KILN_CUDA_CHECK_LAUNCH("dropout_backward");
}

}  // namespace

void install_random_kernels(Backend& b) {
  b.random = random_kernel;
  b.bernoulli = bernoulli_kernel;
  b.dropout = dropout_kernel;
  b.dropout_backward = dropout_backward_kernel;
}

}  // namespace kiln::cuda
