// CPU random kernels: every element is a pure function of its Philox counter
// (Note [Random streams] in ops/philox.h), so the loops parallelize freely and
// the values do not depend on the number of threads.
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/cpu/convert.h"
#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"
#include "ops/philox.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kParallelGrain = 16384;
constexpr double kTwoPi = 6.283185307179586476925286766559;

template <typename T, typename Sample>
void fill_from_counters(const Tensor& out, const PhiloxState& s, Sample sample) {
  T* p = out.data<T>();
  const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i)
    p[i] = sample(philox4x32(s.seed, s.offset + static_cast<uint64_t>(i)), i);
}

// Uniform [0, 1) with exactly as many random bits as T's significand holds, so
// that converting to T never rounds up to 1.
template <typename T>
double unit_for(const std::array<uint32_t, 4>& w) {
  if constexpr (std::is_same_v<T, double>) {
    return philox_unit(w[0], w[1]);
  } else {
    constexpr int bits = std::is_same_v<T, float> ? 24 : std::is_same_v<T, Eigen::half> ? 11 : 8;
    return static_cast<double>(w[0] >> (32 - bits)) * std::ldexp(1.0, -bits);
  }
}

// The largest T below v (v finite and not the lowest value).
template <typename T>
T step_down(T v) {
  if constexpr (is_half_v<T>) {
    uint16_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    // Sign-magnitude: moving toward -inf shrinks positives and grows negatives.
    bits = (bits & 0x8000u) ? bits + 1 : bits == 0 ? 0x8001u : bits - 1;
    std::memcpy(&v, &bits, sizeof bits);
    return v;
  } else {
    return std::nextafter(v, -std::numeric_limits<T>::infinity());
  }
}

template <typename T>
void uniform(const Tensor& out, const RandomParams& p) {
  const double lo = p.a, hi = p.b, width = p.b - p.a;
  fill_from_counters<T>(out, p.state, [=](const std::array<uint32_t, 4>& w, int64_t) {
    T v = convert<T>(lo + width * unit_for<T>(w));
    // Rounding of lo + width * u can land on the excluded upper bound.
    while (width > 0 && static_cast<double>(v) >= hi) v = step_down(v);
    return v;
  });
}

template <typename T>
void normal(const Tensor& out, const RandomParams& p) {
  const double mean = p.a, std = p.b;
  fill_from_counters<T>(out, p.state, [=](const std::array<uint32_t, 4>& w, int64_t) {
    // Box-Muller; u1 in (0, 1] keeps the log finite.
    const double u1 = 1.0 - philox_unit(w[0], w[1]);
    const double u2 = philox_unit(w[2], w[3]);
    return convert<T>(mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2));
  });
}

template <typename T>
void exponential(const Tensor& out, const RandomParams& p) {
  const double rate = p.a;
  fill_from_counters<T>(out, p.state, [=](const std::array<uint32_t, 4>& w, int64_t) {
    return convert<T>(-std::log1p(-philox_unit(w[0], w[1])) / rate);
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
        const double prob = p.a;
        fill_from_counters<T>(out, p.state, [=](const std::array<uint32_t, 4>& w, int64_t) {
          return convert<T>(philox_unit(w[0], w[1]) < prob ? 1 : 0);
        });
      });
      return;
    case RandomDist::Integer:
      dispatch_all(out.dtype(), "random_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const int64_t low = p.low;
        const uint64_t range = p.range;
        fill_from_counters<T>(out, p.state, [=](const std::array<uint32_t, 4>& w, int64_t) {
          // Modulo bias is below 2^-32 for ranges under 2^32.
          uint64_t r = philox_u64(w[0], w[1]);
          if (range != 0) r %= range;
          return convert<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + r));
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
      fill_from_counters<T>(out, p.state, [=](const std::array<uint32_t, 4>& w, int64_t i) {
        return convert<T>(philox_unit(w[0], w[1]) < static_cast<double>(prob[i]) ? 1 : 0);
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
    const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const auto w = philox4x32(p.state.seed, p.state.offset + static_cast<uint64_t>(i));
      const bool keep = philox_unit(w[0], w[1]) >= drop;
      m[i] = keep;
      y[i] = keep ? static_cast<T>(static_cast<A>(x[i]) * scale) : T(0);
    }
  });
}

}  // namespace kiln::cpu
