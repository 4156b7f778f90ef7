// cuDNN's fused attention (cuda/cudnn_attention.h) against a float64 reference on the host:
// forward (out, lse) and backward (dq, dk, dv) for bfloat16 and float16, head dims 64 and 128,
// causal or not, grouped-query attention, Tq != Tk, q/k/v read in place from a packed
// [B, T, 3, H, D] projection, an additive mask broadcast over heads, and dropout whose mask the
// backward must redraw. Skips without a GPU or without cuDNN attention (CPU-only CI, stub builds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/device.h"
#include "ops/attention.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/view.h"
#ifdef KILN_WITH_CUDA
#include "cuda/cudnn_attention.h"
#include "cuda/runtime.h"
#endif

namespace kiln {
namespace {

#ifdef KILN_WITH_CUDA

const Device kCuda(DeviceType::CUDA, 0);

#define REQUIRE_CUDNN_ATTENTION()                                  \
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
  if (!cuda::cudnn_attention_available()) GTEST_SKIP() << "no cuDNN attention in this build"

// Host float64 tensor of `shape` with values uniform in [lo, hi).
Tensor host_uniform(const Shape& shape, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor t = empty(shape, DType::Float64);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = dist(gen);
  return t;
}

// `t` on the GPU in `dtype`.
Tensor on_gpu(const Tensor& t, DType dtype) { return to_device(to_dtype(t, dtype), kCuda); }

// A contiguous host float64 copy of `t` (the values the GPU holds, after rounding).
Tensor on_host(const Tensor& t) {
  return contiguous(to_device(to_dtype(t, DType::Float64), Device()));
}

// An uninitialised [B, H, T, D] GPU tensor laid out in [B, T, H, D] memory order (the layout
// the front end allocates for cuDNN).
Tensor empty_bthd(int64_t b, int64_t h, int64_t t, int64_t d, DType dtype) {
  return transpose(empty({b, t, h, d}, dtype, kCuda), 1, 2);
}

double at(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const Shape& s = t.sizes();
  return t.data<double>()[((i0 * s[1] + i1) * s[2] + i2) * s[3] + i3];
}
double& at(Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const Shape& s = t.sizes();
  return t.data<double>()[((i0 * s[1] + i1) * s[2] + i2) * s[3] + i3];
}

// Attention in float64 on contiguous host tensors (Note [Fused attention]). `keep`, when
// defined, is a [B, Hq, Tq, Tk] 0/1 dropout mask applied with scale 1 / (1 - dropout_p).
struct Reference {
  Tensor out, lse, dq, dk, dv;
};

Reference reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                    const Tensor& dout, double scale, bool causal, const Tensor& keep = Tensor(),
                    double dropout_p = 0.0) {
  const int64_t b_n = q.size(0), hq = q.size(1), tq = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), tk = k.size(2), dv_n = v.size(3), group = hq / hkv;
  Reference r;
  r.out = zeros({b_n, hq, tq, dv_n}, DType::Float64);
  r.lse = zeros({b_n, hq, tq, 1}, DType::Float64);
  r.dq = zeros(q.sizes(), DType::Float64);
  r.dk = zeros(k.sizes(), DType::Float64);
  r.dv = zeros(v.sizes(), DType::Float64);
  const double keep_scale = 1.0 / (1.0 - dropout_p);
  const size_t n = static_cast<size_t>(tk);
  std::vector<double> s(n), p(n), kf(n), w(n), dp(n);
  for (int64_t b = 0; b < b_n; ++b) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < tq; ++i) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < tk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < d; ++c) acc += at(q, b, h, i, c) * at(k, b, hk, j, c);
          s[j] = scale * acc + (mask.defined() ? at(mask, b, h, i, j) : 0.0);
          if (causal && j > i) s[j] = -std::numeric_limits<double>::infinity();
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < tk; ++j) sum += std::exp(s[j] - m);
        const double lse = m + std::log(sum);
        at(r.lse, b, h, i, 0) = lse;
        for (int64_t j = 0; j < tk; ++j) {
          p[j] = std::exp(s[j] - lse);
          kf[j] = keep.defined() ? at(keep, b, h, i, j) * keep_scale : 1.0;
          w[j] = p[j] * kf[j];  // the weight v_j gets
        }
        for (int64_t c = 0; c < dv_n; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < tk; ++j) acc += w[j] * at(v, b, hk, j, c);
          at(r.out, b, h, i, c) = acc;
        }
        // Backward: dP = (dout . v) through the dropout mask, dS = P * (dP - dout . out).
        double dot_out = 0;
        for (int64_t c = 0; c < dv_n; ++c) dot_out += at(dout, b, h, i, c) * at(r.out, b, h, i, c);
        for (int64_t j = 0; j < tk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < dv_n; ++c) acc += at(dout, b, h, i, c) * at(v, b, hk, j, c);
          dp[j] = acc * kf[j];
          for (int64_t c = 0; c < dv_n; ++c) at(r.dv, b, hk, j, c) += w[j] * at(dout, b, h, i, c);
        }
        for (int64_t j = 0; j < tk; ++j) {
          const double ds = p[j] * (dp[j] - dot_out);
          for (int64_t c = 0; c < d; ++c) {
            at(r.dq, b, h, i, c) += scale * ds * at(k, b, hk, j, c);
            at(r.dk, b, hk, j, c) += scale * ds * at(q, b, h, i, c);
          }
        }
      }
    }
  }
  r.lse = view(r.lse, {b_n, hq, tq});
  return r;
}

// Every element of `got` (GPU) within tol * (|want| + max |want|) of `want` (host float64):
// errors are judged against the tensor's scale, as the half-precision rounding of a sum is.
void expect_close(const Tensor& got, const Tensor& want, double tol, const char* what) {
  Tensor g = on_host(got);
  ASSERT_EQ(g.sizes(), want.sizes()) << what;
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    scale = std::max(scale, std::abs(want.data<double>()[i]));
  int64_t bad = 0;
  double worst = 0;
  int64_t worst_at = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double e = std::abs(g.data<double>()[i] - want.data<double>()[i]);
    const double allowed = tol * (std::abs(want.data<double>()[i]) + scale);
    if (!(e <= allowed)) ++bad;
    if (!(e <= worst)) {
      worst = e;
      worst_at = i;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.numel() << " elements off; worst |error| "
                    << worst << " at flat index " << worst_at << " (got "
                    << g.data<double>()[worst_at] << ", want " << want.data<double>()[worst_at]
                    << ")";
}

double tolerance(DType dtype) { return dtype == DType::BFloat16 ? 2e-2 : 5e-3; }

struct Case {
  DType dtype = DType::BFloat16;
  int64_t b = 2, hq = 4, hkv = 4, tq = 64, tk = 64, d = 64;
  bool causal = false;
  bool packed_qkv = false;  // q, k, v strided views of one [B, T, 3, H, D] buffer
  bool mask = false;        // an additive [B, 1, Tq, Tk] mask expanded over the heads
};

std::string describe(const Case& c) {
  return str_cat(c.dtype, " B", c.b, " Hq", c.hq, " Hkv", c.hkv, " Tq", c.tq, " Tk", c.tk, " D",
                 c.d, c.causal ? " causal" : "", c.packed_qkv ? " packed-qkv" : "",
                 c.mask ? " mask" : "");
}

void run_case(const Case& c) {
  SCOPED_TRACE(describe(c));
  Tensor q, k, v;
  if (c.packed_qkv) {
    // The usual fused projection: [B, T, 3 * H * D] viewed as [B, T, 3, H, D], heads moved out.
    Tensor qkv = on_gpu(host_uniform({c.b, c.tq, 3, c.hq, c.d}, 1), c.dtype);
    q = transpose(select(qkv, 2, 0), 1, 2);
    k = transpose(select(qkv, 2, 1), 1, 2);
    v = transpose(select(qkv, 2, 2), 1, 2);
  } else {
    q = on_gpu(host_uniform({c.b, c.hq, c.tq, c.d}, 1), c.dtype);
    k = on_gpu(host_uniform({c.b, c.hkv, c.tk, c.d}, 2), c.dtype);
    v = on_gpu(host_uniform({c.b, c.hkv, c.tk, c.d}, 3), c.dtype);
  }
  Tensor mask;
  if (c.mask)
    mask = expand(on_gpu(host_uniform({c.b, 1, c.tq, c.tk}, 4, -3.0, 1.0), c.dtype),
                  {c.b, c.hq, c.tq, c.tk});
  AttentionParams p;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  p.is_causal = c.causal;
  ASSERT_TRUE(cuda::cudnn_attention_supports(q, k, v, mask, p, /*backward=*/true));

  const int64_t hkv = k.size(1), tk = k.size(2);
  Tensor out = empty_bthd(c.b, c.hq, c.tq, c.d, c.dtype);
  Tensor lse = empty({c.b, c.hq, c.tq}, DType::Float32, kCuda);
  cuda::cudnn_attention_forward(out, lse, q, k, v, mask, p);

  Tensor dout = on_gpu(host_uniform({c.b, c.tq, c.hq, c.d}, 5), c.dtype);
  dout = transpose(dout, 1, 2);
  Tensor dq = empty_bthd(c.b, c.hq, c.tq, c.d, c.dtype);
  Tensor dk = empty_bthd(c.b, hkv, tk, c.d, c.dtype);
  Tensor dv = empty_bthd(c.b, hkv, tk, c.d, c.dtype);
  cuda::cudnn_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, mask, p);

  Reference want =
      reference(on_host(q), on_host(k), on_host(v), mask.defined() ? on_host(mask) : Tensor(),
                on_host(dout), p.scale, c.causal);
  const double tol = tolerance(c.dtype);
  expect_close(out, want.out, tol, "out");
  expect_close(lse, want.lse, 1e-4, "lse");
  expect_close(dq, want.dq, tol, "dq");
  expect_close(dk, want.dk, tol, "dk");
  expect_close(dv, want.dv, tol, "dv");
}

TEST(CudnnAttention, MatchesFloat64ReferenceForEachDtypeHeadDimAndCausality) {
  REQUIRE_CUDNN_ATTENTION();
  for (DType dtype : {DType::BFloat16, DType::Float16})
    for (int64_t d : {64, 128})
      for (bool causal : {false, true}) {
        Case c;
        c.dtype = dtype;
        c.d = d;
        c.causal = causal;
        run_case(c);
      }
}

TEST(CudnnAttention, GroupedQueryAttentionWithFewerKeysThanQueries) {
  REQUIRE_CUDNN_ATTENTION();
  for (DType dtype : {DType::BFloat16, DType::Float16})
    for (bool causal : {false, true}) {
      Case c;
      c.dtype = dtype;
      c.hq = 8;
      c.hkv = 2;
      c.tq = 80;
      c.tk = 48;
      c.causal = causal;
      run_case(c);
    }
}

TEST(CudnnAttention, MoreKeysThanQueriesAtOddLengths) {
  REQUIRE_CUDNN_ATTENTION();
  for (bool causal : {false, true}) {
    Case c;
    c.tq = 37;
    c.tk = 101;
    c.d = 128;
    c.causal = causal;
    run_case(c);
  }
}

TEST(CudnnAttention, ReadsQkvInPlaceFromAPackedProjection) {
  REQUIRE_CUDNN_ATTENTION();
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    Case c;
    c.dtype = dtype;
    c.tq = c.tk = 72;
    c.packed_qkv = true;
    c.causal = true;
    run_case(c);
  }
}

TEST(CudnnAttention, AddsAMaskBroadcastOverHeads) {
  REQUIRE_CUDNN_ATTENTION();
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    Case c;
    c.dtype = dtype;
    c.tq = 40;
    c.tk = 96;
    c.mask = true;
    run_case(c);
  }
}

// With V the identity (Tk = Dv), each output row is that row's weights after dropout, so the
// mask cuDNN drew can be read off: the backward must match a reference using that same mask.
TEST(CudnnAttention, DropoutBackwardRedrawsTheForwardMask) {
  REQUIRE_CUDNN_ATTENTION();
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(str_cat(dtype));
    const int64_t b = 2, h = 4, t = 64, d = 64;
    const double drop = 0.25;
    Tensor q = on_gpu(host_uniform({b, h, t, d}, 11), dtype);
    Tensor k = on_gpu(host_uniform({b, h, t, d}, 12), dtype);
    Tensor eye_host = zeros({b, h, t, d}, DType::Float64);
    for (int64_t i = 0; i < b * h; ++i)
      for (int64_t j = 0; j < t; ++j) eye_host.data<double>()[(i * t + j) * d + j] = 1.0;
    Tensor v = on_gpu(eye_host, dtype);
    AttentionParams p;
    p.scale = 1.0 / std::sqrt(static_cast<double>(d));
    p.dropout_p = drop;
    p.rng = PhiloxState{1234, 0};
    ASSERT_TRUE(cuda::cudnn_attention_supports(q, k, v, Tensor(), p, /*backward=*/true));

    auto forward = [&](const AttentionParams& params) {
      Tensor out = empty_bthd(b, h, t, d, dtype);
      Tensor lse = empty({b, h, t}, DType::Float32, kCuda);
      cuda::cudnn_attention_forward(out, lse, q, k, v, Tensor(), params);
      return std::make_pair(out, lse);
    };
    auto [out, lse] = forward(p);
    Tensor out_host = on_host(out);
    {
      Tensor again = on_host(forward(p).first);
      int64_t differ = 0;
      for (int64_t i = 0; i < again.numel(); ++i)
        differ += again.data<double>()[i] != out_host.data<double>()[i];
      EXPECT_EQ(differ, 0) << "the same rng gave a different output";
    }

    // Read the mask off: out[i, j] = P[i, j] * keep[i, j] / (1 - p).
    const Tensor none;
    Reference plain = reference(on_host(q), on_host(k), on_host(v), none,
                                zeros({b, h, t, d}, DType::Float64), p.scale, false);
    Tensor keep = zeros({b, h, t, t}, DType::Float64);
    int64_t kept = 0, ambiguous = 0;
    for (int64_t i = 0; i < keep.numel(); ++i) {
      const double ratio = out_host.data<double>()[i] * (1.0 - drop) / plain.out.data<double>()[i];
      keep.data<double>()[i] = ratio > 0.5 ? 1.0 : 0.0;
      kept += ratio > 0.5;
      ambiguous += std::abs(ratio) > 0.1 && std::abs(ratio - 1.0) > 0.1;
    }
    EXPECT_EQ(ambiguous, 0) << "output entries that are neither dropped nor kept weights";
    const double kept_fraction = static_cast<double>(kept) / static_cast<double>(keep.numel());
    EXPECT_NEAR(kept_fraction, 1.0 - drop, 0.02);
    expect_close(lse, plain.lse, 1e-4, "lse (dropout does not change it)");

    Tensor dout = transpose(on_gpu(host_uniform({b, t, h, d}, 13), dtype), 1, 2);
    Tensor dq = empty_bthd(b, h, t, d, dtype), dk = empty_bthd(b, h, t, d, dtype),
           dv = empty_bthd(b, h, t, d, dtype);
    cuda::cudnn_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, Tensor(), p);
    Reference want = reference(on_host(q), on_host(k), on_host(v), none, on_host(dout), p.scale,
                               false, keep, drop);
    expect_close(out, want.out, tolerance(dtype), "out");
    expect_close(dq, want.dq, tolerance(dtype), "dq");
    expect_close(dk, want.dk, tolerance(dtype), "dk");
    expect_close(dv, want.dv, tolerance(dtype), "dv");

    // Another stretch of the stream draws another mask.
    AttentionParams later = p;
    later.rng.offset += static_cast<uint64_t>(b * h * t * t);
    Tensor other = on_host(forward(later).first);
    int64_t differ = 0;
    for (int64_t i = 0; i < other.numel(); ++i)
      differ += (other.data<double>()[i] == 0.0) != (out_host.data<double>()[i] == 0.0);
    EXPECT_GT(differ, other.numel() / 10) << "a later rng offset drew (nearly) the same mask";
  }
}

TEST(CudnnAttention, RefusesWhatItCannotRun) {
  REQUIRE_CUDNN_ATTENTION();
  AttentionParams p;
  p.scale = 0.125;
  auto make = [](const Shape& s, DType dtype) { return empty(s, dtype, kCuda); };
  const Tensor q = make({1, 2, 16, 64}, DType::BFloat16), k = make({1, 2, 16, 64}, DType::BFloat16);
  EXPECT_TRUE(cuda::cudnn_attention_supports(q, k, k, Tensor(), p, false));
  const Tensor f32 = make({1, 2, 16, 64}, DType::Float32);
  EXPECT_FALSE(cuda::cudnn_attention_supports(f32, f32, f32, Tensor(), p, false)) << "float32";
  const Tensor odd = make({1, 2, 16, 60}, DType::BFloat16);
  EXPECT_FALSE(cuda::cudnn_attention_supports(odd, odd, odd, Tensor(), p, false)) << "D = 60";
  const Tensor bool_mask = make({1, 2, 16, 16}, DType::Bool);
  EXPECT_FALSE(cuda::cudnn_attention_supports(q, k, k, bool_mask, p, false)) << "bool mask";
  // Rows 8 bytes apart: a view cuDNN's 16-byte loads would misread.
  const Tensor wide = make({1, 2, 16, 68}, DType::BFloat16);
  const Tensor sliced = narrow(wide, 3, 0, 64);
  EXPECT_FALSE(cuda::cudnn_attention_supports(sliced, k, k, Tensor(), p, false))
      << "misaligned rows";
  const Tensor shifted = narrow(make({1, 2, 16, 72}, DType::BFloat16), 3, 4, 64);
  EXPECT_FALSE(cuda::cudnn_attention_supports(shifted, k, k, Tensor(), p, false))
      << "misaligned base pointer";
  p.dropout_p = 1.0;
  EXPECT_FALSE(cuda::cudnn_attention_supports(q, k, k, Tensor(), p, false)) << "dropout_p = 1";
}

#endif  // KILN_WITH_CUDA

}  // namespace
}  // namespace kiln
