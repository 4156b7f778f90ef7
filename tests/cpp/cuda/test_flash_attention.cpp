// kiln's CUDA flash attention kernels (cuda/attention.h) against a float64 CPU reference of
// Note [Fused attention]: out, lse, dq, dk, dv over dtypes (float32 with TF32 on and off),
// head dims, causal, bool/additive masks with broadcast dims and all-masked rows, grouped-query
// heads, Tq != Tk, heads read in place from a [B, T, H, D] buffer, and dropout drawing the
// Note's Philox mapping. Skipped where there is no GPU (CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/flags.h"
#include "cuda/device.h"
#include "ops/attention.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/philox.h"
#include "ops/view.h"
#ifdef KILN_WITH_CUDA
#include "cuda/attention.h"
#endif

namespace kiln {
namespace {

#ifdef KILN_WITH_CUDA

const Device kCuda(DeviceType::CUDA, 0);
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Mask { None, Bool, Additive };
// Full: [B, Hq, Tq, Tk]; Rows: [1, 1, Tq, Tk] (one mask for every batch and head); Keys:
// [B, 1, 1, Tk] (key padding: stride 0 in the query dim too).
enum class MaskShape { Full, Rows, Keys };

struct Case {
  const char* name;
  DType dtype;
  bool tf32;
  int64_t B, Hq, Hkv, Tq, Tk, D, Dv;
  bool causal = false;
  Mask mask = Mask::None;
  MaskShape mask_shape = MaskShape::Full;
  bool dead = false;     // one all-masked row (Keys: batch 0 has no key at all)
  bool strided = false;  // q, k, v, out and grads as [B, H, T, D] views of [B, T, H, D] buffers
  double dropout = 0.0;
};

constexpr DType kF16 = DType::Float16, kBF16 = DType::BFloat16, kF32 = DType::Float32;

// Name, dtype, tf32, B, Hq, Hkv, Tq, Tk, D, Dv, causal, mask, mask shape, dead, strided, p.
const Case kCases[] = {
    {"f16_d64_t128", kF16, false, 2, 4, 4, 128, 128, 64, 64},
    {"bf16_d64_causal_t128", kBF16, false, 2, 4, 4, 128, 128, 64, 64, true},
    {"f32_d64_t128", kF32, false, 2, 2, 2, 128, 128, 64, 64},
    {"tf32_d64_causal_t128", kF32, true, 2, 2, 2, 128, 128, 64, 64, true},
    {"f16_d128_t300", kF16, false, 1, 4, 4, 300, 300, 128, 128},
    {"bf16_d128_causal_t300", kBF16, false, 1, 4, 4, 300, 300, 128, 128, true},
    {"f32_d128_t17", kF32, false, 2, 2, 2, 17, 17, 128, 128},
    {"tf32_d128_causal_t300", kF32, true, 1, 2, 2, 300, 300, 128, 128, true},
    {"f16_d256_t128", kF16, false, 1, 2, 2, 128, 128, 256, 256},
    {"bf16_d256_causal_t300", kBF16, false, 1, 2, 2, 300, 300, 256, 256, true},
    {"f32_d256_t128", kF32, false, 1, 2, 2, 128, 128, 256, 256},
    {"tf32_d256_t17", kF32, true, 2, 2, 2, 17, 17, 256, 256},
    {"f16_d40_t300", kF16, false, 1, 4, 4, 300, 300, 40, 40},
    {"bf16_d40_causal_t17", kBF16, false, 2, 4, 4, 17, 17, 40, 40, true},
    {"f32_d40_gqa_t128", kF32, false, 2, 4, 2, 128, 128, 40, 40},
    {"tf32_d40_causal_t300", kF32, true, 1, 2, 2, 300, 300, 40, 40, true},
    // Head dims off the 16-byte chunk (element-wise tile copies) and Dv != D.
    {"f16_d36_t128", kF16, false, 2, 2, 2, 128, 128, 36, 36},
    {"f32_d17_dv30_t17", kF32, false, 2, 2, 2, 17, 17, 17, 30, true},
    {"bf16_d64_dv40_t128", kBF16, false, 2, 2, 2, 128, 128, 64, 40},
    // T = 1 and Tq != Tk (causal stays top-left aligned).
    {"f16_d64_t1", kF16, false, 2, 2, 2, 1, 1, 64, 64},
    {"bf16_d64_causal_t1", kBF16, false, 2, 2, 2, 1, 1, 64, 64, true},
    {"f16_d64_causal_tq17_tk300", kF16, false, 2, 2, 2, 17, 300, 64, 64, true},
    {"bf16_d128_causal_tq300_tk17", kBF16, false, 1, 2, 2, 300, 17, 128, 128, true},
    {"f32_d64_tq128_tk1", kF32, false, 2, 2, 2, 128, 1, 64, 64},
    {"tf32_d256_tq1_tk300", kF32, true, 2, 2, 2, 1, 300, 256, 256},
    // Grouped-query heads.
    {"bf16_d64_causal_gqa_t300", kBF16, false, 2, 4, 2, 300, 300, 64, 64, true},
    {"f16_d128_gqa_t128", kF16, false, 2, 4, 2, 128, 128, 128, 128},
    {"f16_d256_gqa_t17", kF16, false, 2, 4, 2, 17, 17, 256, 256},
    // Masks, with broadcast dims and all-masked rows.
    {"f16_d64_boolmask_dead_t128", kF16, false, 2, 4, 2, 128, 128, 64, 64, false, Mask::Bool,
     MaskShape::Full, true},
    {"bf16_d128_boolmask_rows_t300", kBF16, false, 2, 2, 2, 300, 300, 128, 128, false, Mask::Bool,
     MaskShape::Rows, true},
    {"f32_d64_boolmask_keys_dead_t17", kF32, false, 2, 2, 2, 17, 17, 64, 64, false, Mask::Bool,
     MaskShape::Keys, true},
    {"f16_d64_addmask_dead_t300", kF16, false, 2, 2, 2, 300, 300, 64, 64, false, Mask::Additive,
     MaskShape::Full, true},
    {"bf16_d40_addmask_rows_tq128_tk17", kBF16, false, 2, 4, 2, 128, 17, 40, 40, false,
     Mask::Additive, MaskShape::Rows, true},
    {"tf32_d256_addmask_keys_t17", kF32, true, 2, 2, 2, 17, 17, 256, 256, false, Mask::Additive,
     MaskShape::Keys, false},
    {"f32_d128_addmask_keys_dead_t128", kF32, false, 2, 2, 2, 128, 128, 128, 128, false,
     Mask::Additive, MaskShape::Keys, true},
    // Heads read in place from [B, T, H, D] buffers.
    {"bf16_d64_causal_gqa_strided_t300", kBF16, false, 2, 4, 2, 300, 300, 64, 64, true, Mask::None,
     MaskShape::Full, false, true},
    {"f16_d40_strided_t128", kF16, false, 2, 4, 4, 128, 128, 40, 40, false, Mask::None,
     MaskShape::Full, false, true},
    {"f32_d128_strided_t17", kF32, false, 2, 2, 2, 17, 17, 128, 128, false, Mask::None,
     MaskShape::Full, false, true},
    {"f16_d36_boolmask_strided_t128", kF16, false, 2, 2, 2, 128, 128, 36, 36, false, Mask::Bool,
     MaskShape::Full, true, true},
    // Dropout (the kernel redraws the reference's Philox mask).
    {"f16_d64_dropout_t128", kF16, false, 2, 2, 2, 128, 128, 64, 64, false, Mask::None,
     MaskShape::Full, false, false, 0.2},
    {"bf16_d128_causal_gqa_dropout_t17", kBF16, false, 2, 4, 2, 17, 17, 128, 128, true, Mask::None,
     MaskShape::Full, false, false, 0.5},
    {"f32_d64_addmask_dropout_tq300_tk17", kF32, false, 1, 2, 2, 300, 17, 64, 64, false,
     Mask::Additive, MaskShape::Full, true, false, 0.1},
    {"tf32_d40_strided_dropout_t300", kF32, true, 1, 2, 2, 300, 300, 40, 40, false, Mask::None,
     MaskShape::Full, false, true, 0.3},
    {"f16_d256_causal_dropout_t300", kF16, false, 1, 2, 2, 300, 300, 256, 256, true, Mask::None,
     MaskShape::Full, false, false, 0.25},
    {"f32_d64_dropout_all_t17", kF32, false, 1, 2, 2, 17, 17, 64, 64, false, Mask::None,
     MaskShape::Full, false, false, 1.0},
    // Empty sizes.
    {"f16_d64_tk0", kF16, false, 2, 2, 2, 17, 0, 64, 64},
    {"bf16_d64_tq0", kBF16, false, 2, 2, 2, 0, 17, 64, 64},
};

// Largest allowed |kernel - reference| as a fraction of the reference's largest magnitude.
double tolerance(const Case& c) {
  if (c.dtype == kF16) return 5e-3;
  if (c.dtype == kBF16) return 3e-2;
  return c.tf32 ? 1e-2 : 2e-4;
}

class Tf32Flag {
 public:
  explicit Tf32Flag(bool on) : saved_(backend_flags()) {
    BackendFlags f = saved_;
    f.matmul_allow_tf32 = on;
    set_backend_flags(f);
  }
  ~Tf32Flag() { set_backend_flags(saved_); }

 private:
  BackendFlags saved_;
};

// A [B, H, T, D] tensor on the GPU in `dtype` (a view of a [B, T, H, D] buffer when strided)
// and its values, rounded to the dtype, as float64 in [B, H, T, D] order.
struct Input {
  Tensor dev;
  std::vector<double> ref;
};

std::vector<double> to_host(const Tensor& t) {
  Tensor h = contiguous(to_dtype(to_device(contiguous(t), Device()), DType::Float64));
  return std::vector<double>(h.data<double>(), h.data<double>() + h.numel());
}

Input make_input(int64_t B, int64_t H, int64_t T, int64_t D, DType dtype, bool strided,
                 std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Tensor x = empty(strided ? Shape{B, T, H, D} : Shape{B, H, T, D}, DType::Float64);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] = normal(rng);
  Tensor xd = to_dtype(x, dtype);
  Input in;
  in.dev = to_device(xd, kCuda);
  if (strided) {
    in.dev = permute(in.dev, {0, 2, 1, 3});
    xd = permute(xd, {0, 2, 1, 3});
  }
  in.ref = to_host(xd);
  return in;
}

Tensor alloc(int64_t B, int64_t H, int64_t T, int64_t D, DType dtype, bool strided) {
  if (!strided) return empty({B, H, T, D}, dtype, kCuda);
  return permute(empty({B, T, H, D}, dtype, kCuda), {0, 2, 1, 3});
}

// The mask on the GPU (expanded to [B, Hq, Tq, Tk]) and a float64 reader of it: for bool,
// 1 keep / 0 drop; for additive, the rounded value.
struct MaskInput {
  Tensor dev;
  std::vector<double> ref;
  int64_t mb = 1, mh = 1, mq = 1;
  double at(const Case& c, int64_t b, int64_t h, int64_t i, int64_t j) const {
    const int64_t bi = mb == 1 ? 0 : b, hi = mh == 1 ? 0 : h, ii = mq == 1 ? 0 : i;
    return ref[((bi * mh + hi) * mq + ii) * c.Tk + j];
  }
};

MaskInput make_mask(const Case& c, std::mt19937_64& rng) {
  MaskInput m;
  if (c.mask == Mask::None) return m;
  m.mb = c.mask_shape == MaskShape::Rows ? 1 : c.B;
  m.mh = c.mask_shape == MaskShape::Full ? c.Hq : 1;
  m.mq = c.mask_shape == MaskShape::Keys ? 1 : c.Tq;
  Tensor x = empty({m.mb, m.mh, m.mq, c.Tk}, DType::Float64);
  std::uniform_real_distribution<double> u;
  double* p = x.data<double>();
  for (int64_t n = 0; n < x.numel(); ++n) {
    const double r = u(rng);
    if (c.mask == Mask::Bool) {
      p[n] = r < 0.75 ? 1.0 : 0.0;
    } else {
      p[n] = r < 0.2 ? -kInf : r < 0.5 ? 0.0 : 4.0 * r - 3.0;
    }
  }
  if (c.dead && c.Tq > 0) {
    // Keys: batch 0 keeps no key; else query row Tq / 2 of every (b, h) keeps none.
    const double drop = c.mask == Mask::Bool ? 0.0 : -kInf;
    for (int64_t bh = 0; bh < m.mb * m.mh; ++bh) {
      for (int64_t j = 0; j < c.Tk; ++j) {
        if (c.mask_shape == MaskShape::Keys) {
          if (bh == 0) p[j] = drop;
        } else {
          p[(bh * m.mq + c.Tq / 2) * c.Tk + j] = drop;
        }
      }
    }
  }
  Tensor xd = to_dtype(x, c.mask == Mask::Bool ? DType::Bool : c.dtype);
  m.ref = to_host(xd);
  m.dev = expand(to_device(xd, kCuda), {c.B, c.Hq, c.Tq, c.Tk});
  return m;
}

struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
  std::vector<bool> dead;  // [B, Hq, Tq]
};

// Note [Fused attention] in float64, straight from its definition.
Reference reference(const Case& c, const Input& q, const Input& k, const Input& v,
                    const Input& dout, const MaskInput& mask, double scale, PhiloxState rng) {
  const int64_t B = c.B, Hq = c.Hq, Hkv = c.Hkv, Tq = c.Tq, Tk = c.Tk, D = c.D, Dv = c.Dv;
  Reference r;
  r.out.assign(B * Hq * Tq * Dv, 0.0);
  r.lse.assign(B * Hq * Tq, -kInf);
  r.dead.assign(B * Hq * Tq, true);
  r.dq.assign(B * Hq * Tq * D, 0.0);
  r.dk.assign(B * Hkv * Tk * D, 0.0);
  r.dv.assign(B * Hkv * Tk * Dv, 0.0);
  std::vector<double> s(Tk), pz(Tk), dp(Tk);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t row = (b * Hq + h) * Tq + i;
        const double* qi = &q.ref[row * D];
        const double* gi = &dout.ref[row * Dv];
        double mx = -kInf;
        for (int64_t j = 0; j < Tk; ++j) {
          const double* kj = &k.ref[((b * Hkv + hk) * Tk + j) * D];
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          s[j] = scale * dot;
          bool keep = !c.causal || j <= i;
          if (c.mask == Mask::Bool) keep = keep && mask.at(c, b, h, i, j) != 0.0;
          if (c.mask == Mask::Additive) s[j] += mask.at(c, b, h, i, j);
          if (!keep) s[j] = -kInf;
          mx = std::max(mx, s[j]);
        }
        if (mx == -kInf) continue;  // all-masked: lse -inf, out 0, no gradient
        r.dead[row] = false;
        double sum = 0.0;
        for (int64_t j = 0; j < Tk; ++j) sum += std::exp(s[j] - mx);
        const double lse = mx + std::log(sum);
        r.lse[row] = lse;
        double di = 0.0;
        for (int64_t j = 0; j < Tk; ++j) {
          const double p = std::exp(s[j] - lse);
          double z = 1.0;
          if (c.dropout > 0.0) {
            const uint64_t L = static_cast<uint64_t>(row * Tk + j);
            const auto w = philox4x32(rng.seed, rng.offset + L / 2);
            const int pair = static_cast<int>(L % 2);
            const bool kept = philox_unit(w[2 * pair], w[2 * pair + 1]) >= c.dropout;
            z = kept ? 1.0 / (1.0 - c.dropout) : 0.0;
          }
          const double* vj = &v.ref[((b * Hkv + hk) * Tk + j) * Dv];
          double gv = 0.0;
          for (int64_t d = 0; d < Dv; ++d) {
            r.out[row * Dv + d] += p * z * vj[d];
            gv += gi[d] * vj[d];
          }
          pz[j] = p * z;
          dp[j] = z * gv;
          di += p * dp[j];
          s[j] = p;
        }
        for (int64_t j = 0; j < Tk; ++j) {
          const double ds = s[j] * (dp[j] - di);
          const int64_t kv_row = (b * Hkv + hk) * Tk + j;
          const double* kj = &k.ref[kv_row * D];
          for (int64_t d = 0; d < D; ++d) {
            r.dq[row * D + d] += scale * ds * kj[d];
            r.dk[kv_row * D + d] += scale * ds * qi[d];
          }
          for (int64_t d = 0; d < Dv; ++d) r.dv[kv_row * Dv + d] += pz[j] * gi[d];
        }
      }
    }
  }
  return r;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  // Gradients are differences of O(1) terms (dS = P (dP - D)): a gradient that is exactly 0 in
  // the reference (one key: P = 1, dP = D) still carries the terms' rounding, so the bound never
  // shrinks below the inputs' O(1) scale.
  const double bound = tol * std::max(scale, 1.0);
  size_t bad = 0, first = 0;
  double worst = 0.0;
  for (size_t n = 0; n < got.size(); ++n) {
    const double err = std::abs(got[n] - want[n]);
    if (!(err <= bound)) {  // NaN fails too
      if (bad++ == 0) first = n;
      worst = std::max(worst, std::isnan(err) ? kInf : err);
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements off by more "
                     << "than " << bound << " (worst " << worst << "); first at flat index "
                     << first << ": got " << got[first] << ", want " << want[first];
}

class FlashAttentionKernels : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAttentionKernels, MatchTheFloat64Reference) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  Tf32Flag tf32(c.tf32);
  std::mt19937_64 rng(std::hash<std::string>()(c.name));
  const Input q = make_input(c.B, c.Hq, c.Tq, c.D, c.dtype, c.strided, rng);
  const Input k = make_input(c.B, c.Hkv, c.Tk, c.D, c.dtype, c.strided, rng);
  const Input v = make_input(c.B, c.Hkv, c.Tk, c.Dv, c.dtype, c.strided, rng);
  const Input dout = make_input(c.B, c.Hq, c.Tq, c.Dv, c.dtype, c.strided, rng);
  const MaskInput mask = make_mask(c, rng);

  AttentionParams p;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  p.is_causal = c.causal;
  p.dropout_p = c.dropout;
  p.rng = PhiloxState{0x5eed1234abcdULL, 77};  // an odd offset: pairs straddle counters
  p.impl = AttentionImpl::Kiln;
  const Reference want = reference(c, q, k, v, dout, mask, p.scale, p.rng);

  Tensor out = alloc(c.B, c.Hq, c.Tq, c.Dv, c.dtype, c.strided);
  Tensor lse = empty({c.B, c.Hq, c.Tq}, DType::Float32, kCuda);
  cuda::flash_attention_forward(out, lse, q.dev, k.dev, v.dev, mask.dev, p);
  Tensor dq = alloc(c.B, c.Hq, c.Tq, c.D, c.dtype, c.strided);
  Tensor dk = alloc(c.B, c.Hkv, c.Tk, c.D, c.dtype, c.strided);
  Tensor dv = alloc(c.B, c.Hkv, c.Tk, c.Dv, c.dtype, c.strided);
  cuda::flash_attention_backward(dq, dk, dv, dout.dev, q.dev, k.dev, v.dev, out, lse, mask.dev, p);

  const double tol = tolerance(c);
  const std::vector<double> got_out = to_host(out), got_lse = to_host(lse);
  const std::vector<double> got_dq = to_host(dq);
  expect_close(got_out, want.out, tol, "out");
  expect_close(to_host(dk), want.dk, tol, "dk");
  expect_close(to_host(dv), want.dv, tol, "dv");
  expect_close(got_dq, want.dq, tol, "dq");
  // lse is absolute (scores are O(1)); all-masked rows must be exactly -inf, 0 and 0.
  const double lse_tol = c.dtype == kF32 && !c.tf32 ? 1e-4 : 1e-2;
  size_t dead_rows = 0;
  for (size_t row = 0; row < want.lse.size(); ++row) {
    if (want.dead[row]) {
      ++dead_rows;
      EXPECT_EQ(got_lse[row], -kInf) << "lse of all-masked row " << row;
      for (int64_t d = 0; d < c.Dv; ++d) ASSERT_EQ(got_out[row * c.Dv + d], 0.0) << "row " << row;
      for (int64_t d = 0; d < c.D; ++d) ASSERT_EQ(got_dq[row * c.D + d], 0.0) << "row " << row;
    } else {
      EXPECT_NEAR(got_lse[row], want.lse[row], lse_tol) << "lse row " << row;
    }
  }
  if (c.dead) EXPECT_GT(dead_rows, 0u) << "the case has no all-masked row";
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashAttentionKernels, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

#endif  // KILN_WITH_CUDA

}  // namespace
}  // namespace kiln
