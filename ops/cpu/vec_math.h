// Float math the CPU loops vectorize, and the attribute that gives a portable build an AVX2
// copy of a hot loop.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace kiln::cpu {

// Note [AVX2 clones of hot loops]
// The default build is portable x86-64 (Note [Portable by default], CMakeLists.txt): SSE2, four
// floats per instruction and no FMA. Loops bound by arithmetic rather than memory (exp,
// sigmoid, softmax, layer_norm) lose up to 2x to that, so their contiguous inner loops are
// non-template functions marked KILN_AVX2_CLONES: GCC and Clang compile them twice, for
// x86-64-v3 (AVX2 + FMA) and for the build's own flags, and an ifunc resolver picks one when
// the library loads. Only non-template functions: GCC 12 clones a template but vectorizes
// both copies for the default target. The templates a clone calls are inlined into it and so
// compiled for AVX2 too; OpenMP regions are outlined before cloning, so a clone holds the
// loop over one row or run, never a parallel region. A build that already targets AVX2
// (KILN_NATIVE=ON) needs no clones: the macro is empty there, as on other architectures.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)
#define KILN_AVX2_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KILN_AVX2_CLONES
#endif

// Note [Vectorised float exp]
// libm's expf is one call per element, which no compiler vectorizes without -ffast-math, and
// it bounds exp, sigmoid, silu and softmax. exp_f32 is branch-free, so a loop over it becomes
// vector code: x = k ln2 + r with |r| <= ln2 / 2 (ln2 split in two so k ln2 is exact), e^r by
// its degree-7 Taylor polynomial (truncation 5e-9 relative, below float's 6e-8), 2^k built in
// the exponent bits in two halves so k down to -150 (subnormal results) and up to 128 stay
// representable. Measured against double exp on 2.3e7 floats spread over (-104, 89): within
// 1.2 ulp (libm's expf is within 0.5). The files using it compile without FMA contraction, so
// the AVX2 clone, the default code and a strided scalar loop give the same bits (FMAs would
// reach 0.92 ulp, but results would then depend on the CPU and on the operands' layout).
// inf, -inf, NaN and the overflow / underflow thresholds give libm's results. The
// clamps and selects only become vector blends without trapping math, so the files that use
// it compile with -fno-trapping-math (CMakeLists.txt); kiln never reads the FP status flags.
inline float exp_f32(float x) {
  constexpr float kHi = 88.72283935546875f;       // above: +inf (ln of FLT_MAX, rounded up)
  constexpr float kLo = -103.97208404541015625f;  // below: 0 (half the smallest subnormal)
  float xc = x < kLo ? kLo : x;
  xc = xc > kHi ? kHi : xc;
  // Round to nearest by the 1.5 * 2^23 trick: vectorizes without SSE4.1's roundps.
  const float k = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;
  const float r = (xc - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.f / 5040;
  p = p * r + 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t ki = static_cast<int32_t>(k);
  const int32_t k1 = ki >> 1, k2 = ki - k1;
  const int32_t bits1 = (k1 + 127) << 23, bits2 = (k2 + 127) << 23;
  float scale1, scale2;
  std::memcpy(&scale1, &bits1, sizeof(float));
  std::memcpy(&scale2, &bits2, sizeof(float));
  float y = p * scale1 * scale2;
  y = x > kHi ? std::numeric_limits<float>::infinity() : y;
  y = x < kLo ? 0.f : y;
  return x != x ? x : y;
}

// exp in a loop's compute type: exp_f32 for float (and so for half types, which compute in
// float), libm for double.
template <typename A>
inline A exp_any(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return exp_f32(x);
  } else {
    return std::exp(x);
  }
}

}  // namespace kiln::cpu
