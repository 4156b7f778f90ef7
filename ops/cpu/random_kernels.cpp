// CPU random kernels. Elements come in groups of K that share one Philox call
// (group g uses counter offset + g; see Note [Random streams] in ops/philox.h),
// so the loops parallelize freely and the values do not depend on the number
// of threads. K is 4 for 32-bit uniforms, 2 where an element needs 64 bits or
// where Box-Muller yields a pair.
#include <cmath>
#include <limits>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"
#include "ops/math/convert.h"
#include "ops/philox.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kParallelGrain = 16384;
constexpr double kTwoPi = 6.283185307179586476925286766559;

using Words = std::array<uint32_t, 4>;

// Calls write(i, w, j) for every element i = K * g + j, with w the words of group g.
template <int K, typename Write>
void for_each_group(int64_t n, const PhiloxState& s, Write write) {
  const int64_t groups = (n + K - 1) / K;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t g = 0; g < groups; ++g) {
    const Words w = philox4x32(s.seed, s.offset + static_cast<uint64_t>(g));
    const int64_t base = g * K;
    const int count = static_cast<int>(std::min<int64_t>(K, n - base));
    for (int j = 0; j < count; ++j) write(base + j, w, j);
  }
}

// Uniform [0, 1) with exactly as many random bits as T's significand holds, so
// that converting to T never rounds up to 1. Doubles use word pair j, others word j.
template <typename T>
constexpr int uniform_group() {
  return std::is_same_v<T, double> ? 2 : 4;
}

template <typename T>
double unit_for(const Words& w, int j) {
  if constexpr (std::is_same_v<T, double>) {
    return philox_unit(w[2 * j], w[2 * j + 1]);
  } else {
    constexpr int bits = std::is_same_v<T, float> ? 24 : std::is_same_v<T, Eigen::half> ? 11 : 8;
    return static_cast<double>(w[j] >> (32 - bits)) * std::ldexp(1.0, -bits);
  }
}

// The largest T below v (v finite and not the lowest value).
template <typename T>
T step_down(T v) {
  if constexpr (math::is_half_v<T>) {
    const auto bits = Eigen::numext::bit_cast<uint16_t>(v);
    // Sign-magnitude: moving toward -inf shrinks positives and grows negatives.
    return Eigen::numext::bit_cast<T>(static_cast<uint16_t>(
        (bits & 0x8000u) ? bits + 1 : bits == 0 ? 0x8001u : bits - 1));
  } else {
    return std::nextafter(v, -std::numeric_limits<T>::infinity());
  }
}

template <typename T>
void uniform(const Tensor& out, const RandomParams& p) {
  T* o = out.data<T>();
  const double lo = p.a, hi = p.b, width = p.b - p.a;
  for_each_group<uniform_group<T>()>(out.numel(), p.state, [=](int64_t i, const Words& w, int j) {
    T v = math::convert<T>(lo + width * unit_for<T>(w, j));
    // Rounding of lo + width * u can land on the excluded upper bound.
    while (width > 0 && static_cast<double>(v) >= hi) v = step_down(v);
    o[i] = v;
  });
}

template <typename T>
void normal(const Tensor& out, const RandomParams& p) {
  T* o = out.data<T>();
  const double mean = p.a, std = p.b;
  // Float math is plenty for outputs of float precision or less, and much faster.
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for_each_group<2>(out.numel(), p.state, [=](int64_t i, const Words& w, int j) {
    // Box-Muller: the pair (r cos t, r sin t); u1 in (0, 1] keeps the log finite.
    const M r = std::sqrt(M(-2) * std::log(static_cast<M>(1.0 - philox_unit(w[0], w[1]))));
    const M t = static_cast<M>(kTwoPi * philox_unit(w[2], w[3]));
    o[i] = math::convert<T>(mean +
                            std * static_cast<double>(r * (j == 0 ? std::cos(t) : std::sin(t))));
  });
}

template <typename T>
void exponential(const Tensor& out, const RandomParams& p) {
  T* o = out.data<T>();
  const double rate = p.a;
  for_each_group<2>(out.numel(), p.state, [=](int64_t i, const Words& w, int j) {
    o[i] = math::convert<T>(-std::log1p(-philox_unit(w[2 * j], w[2 * j + 1])) / rate);
  });
}

}  // namespace

void random_kernel(RandomDist dist, const Tensor& out, const RandomParams& p) {
  switch (dist) {
    case RandomDist::Uniform:
      dispatch_floating(out.dtype(), "uniform_", [&](auto tag) {
        uniform<typename decltype(tag)::type>(out, p);
      });
      return;
    case RandomDist::Normal:
      dispatch_floating(out.dtype(), "normal_", [&](auto tag) {
        normal<typename decltype(tag)::type>(out, p);
      });
      return;
    case RandomDist::Exponential:
      dispatch_floating(out.dtype(), "exponential_", [&](auto tag) {
        exponential<typename decltype(tag)::type>(out, p);
      });
      return;
    case RandomDist::Bernoulli:
      dispatch_all(out.dtype(), "bernoulli_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* o = out.data<T>();
        const double prob = p.a;
        for_each_group<2>(out.numel(), p.state, [=](int64_t i, const Words& w, int j) {
          o[i] = math::convert<T>(philox_unit(w[2 * j], w[2 * j + 1]) < prob ? 1 : 0);
        });
      });
      return;
    case RandomDist::Integer:
      dispatch_all(out.dtype(), "random_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* o = out.data<T>();
        const uint64_t low = static_cast<uint64_t>(p.low), range = p.range;
        for_each_group<2>(out.numel(), p.state, [=](int64_t i, const Words& w, int j) {
          // Modulo bias is below 2^-32 for ranges under 2^32.
          uint64_t r = philox_u64(w[2 * j], w[2 * j + 1]);
          if (range != 0) r %= range;
          o[i] = math::convert<T>(static_cast<int64_t>(low + r));
        });
      });
      return;
  }
}

void bernoulli_kernel(const Tensor& out, const Tensor& probs, const RandomParams& p) {
  dispatch_floating(probs.dtype(), "bernoulli", [&](auto ptag) {
    using P = typename decltype(ptag)::type;
    const P* prob = probs.data<P>();
    dispatch_all(out.dtype(), "bernoulli", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* o = out.data<T>();
      for_each_group<2>(out.numel(), p.state, [=](int64_t i, const Words& w, int j) {
        const double u = philox_unit(w[2 * j], w[2 * j + 1]);
        o[i] = math::convert<T>(u < static_cast<double>(prob[i]) ? 1 : 0);
      });
    });
  });
}

void dropout_kernel(const Tensor& out, const Tensor& mask, const Tensor& in,
                    const RandomParams& p) {
  dispatch_floating(out.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    bool* m = mask.data<bool>();
    const double drop = p.a;
    const A scale = static_cast<A>(p.b);
    for_each_group<2>(out.numel(), p.state, [=](int64_t i, const Words& w, int j) {
      const bool keep = philox_unit(w[2 * j], w[2 * j + 1]) >= drop;
      m[i] = keep;
      y[i] = keep ? static_cast<T>(static_cast<A>(x[i]) * scale) : T(0);
    });
  });
}

// g * mask * scale rather than a select, so a NaN or infinite gradient at a dropped element
// stays NaN as in PyTorch's native_dropout_backward (and the mul(mul(g, mask), scale) it replaces).
void dropout_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& mask,
                             double scale) {
  dispatch_floating(out.dtype(), "dropout_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* g = grad.data<T>();
    const bool* m = mask.data<bool>();
    T* o = out.data<T>();
    const A s = static_cast<A>(scale);
    const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(static_cast<A>(g[i]) * A(m[i]) * s);
  });
}

}  // namespace kiln::cpu
