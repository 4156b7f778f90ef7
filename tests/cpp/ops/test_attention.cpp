// The CPU fused attention kernels (ops/cpu/attention_kernels.cpp) against a naive reference
// that materialises the scores in double precision (Note [Fused attention]).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "ops/attention.h"
#include "ops/copy.h"
#include "ops/cpu/kernels.h"
#include "ops/creation.h"
#include "ops/philox.h"
#include "ops/random.h"
#include "ops/view.h"

namespace kiln {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class MaskKind { None, Bool, Additive };

struct Case {
  int64_t B = 2, Hq = 2, Hkv = 2, Tq = 5, Tk = 7, D = 4, Dv = 3;
  DType dtype = DType::Float64;
  bool causal = false;
  MaskKind mask = MaskKind::None;
  bool strided = false;  // every input and output a transposed view of a [B, T, H, D] buffer
  double dropout_p = 0;
  double scale = 0.5;

  Case& dims(int64_t b, int64_t hq, int64_t hkv, int64_t tq, int64_t tk, int64_t d, int64_t dv) {
    B = b, Hq = hq, Hkv = hkv, Tq = tq, Tk = tk, D = d, Dv = dv;
    return *this;
  }
  Case& of(DType t) { return dtype = t, *this; }
  Case& causal_() { return causal = true, *this; }
  Case& masked(MaskKind kind) { return mask = kind, *this; }
  Case& strided_() { return strided = true, *this; }
  Case& dropout(double p) { return dropout_p = p, *this; }
};

std::string describe(const Case& c) {
  return "B=" + std::to_string(c.B) + " Hq=" + std::to_string(c.Hq) +
         " Hkv=" + std::to_string(c.Hkv) + " Tq=" + std::to_string(c.Tq) +
         " Tk=" + std::to_string(c.Tk) + " D=" + std::to_string(c.D) +
         " Dv=" + std::to_string(c.Dv) + " causal=" + std::to_string(c.causal) +
         " mask=" + std::to_string(static_cast<int>(c.mask)) +
         " strided=" + std::to_string(c.strided) + " p=" + std::to_string(c.dropout_p);
}

// A [B, H, T, D] tensor: contiguous, or heads split out of a padded [B, T, H, D + 3] buffer
// (the layout of a packed projection), so no stride but the last is the contiguous one.
Tensor layout(const Tensor& contiguous_values, bool strided) {
  if (!strided) return contiguous_values;
  const Shape& s = contiguous_values.sizes();
  Tensor buf = full({s[0], s[2], s[1], s[3] + 3}, Scalar(kNaN), contiguous_values.dtype());
  Tensor v = transpose(narrow(buf, 3, 0, s[3]), 1, 2);
  copy_(v, contiguous_values);
  return v;
}

Tensor input(const Shape& s, DType dtype, bool strided, Generator& g) {
  return layout(to_dtype(randn(s, DType::Float64, {}, &g), dtype), strided);
}

// Outputs start as NaN so an element the kernel does not write fails the comparison.
Tensor output(const Shape& s, DType dtype, bool strided) {
  return layout(full(s, Scalar(kNaN), dtype), strided);
}

std::vector<double> values(const Tensor& t) {
  Tensor c = contiguous(to_dtype(t, DType::Float64));
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

// A [B, Hq, Tq, Tk] mask of the case's kind with a broadcast (stride 0) head dim, a last dim
// of stride Tq (stored transposed), and row 1 of batch 0 masked everywhere.
Tensor make_mask(const Case& c, Generator& g) {
  if (c.mask == MaskKind::None) return Tensor();
  Tensor m = randn({c.B, 1, c.Tk, c.Tq}, DType::Float64, {}, &g);
  double* v = m.data<double>();
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.Tk; ++j)
      for (int64_t i = 0; i < c.Tq; ++i) {
        double& e = v[(b * c.Tk + j) * c.Tq + i];
        const bool drop = (i * 7 + j * 3 + b) % 5 == 0 || (b == 0 && i == 1);
        if (c.mask == MaskKind::Bool) e = drop ? 0.0 : 1.0;
        if (c.mask == MaskKind::Additive) e = drop ? -kInf : 0.5 * e;
      }
  const DType dtype = c.mask == MaskKind::Bool ? DType::Bool : c.dtype;
  return expand(transpose(to_dtype(m, dtype), 2, 3), {c.B, c.Hq, c.Tq, c.Tk});
}

bool reference_keep(const PhiloxState& rng, double p, uint64_t L) {
  const auto w = philox4x32(rng.seed, rng.offset + L / 2);
  const int half = static_cast<int>(L % 2);
  return philox_unit(w[2 * half], w[2 * half + 1]) >= p;
}

struct Result {
  std::vector<double> out, lse, dq, dk, dv;
};

// Scores, softmax, dropout and their gradients written out in full, in double precision.
Result reference(const Case& c, const Tensor& q_t, const Tensor& k_t, const Tensor& v_t,
                 const Tensor& mask_t, const Tensor& dout_t, const PhiloxState& rng) {
  const std::vector<double> q = values(q_t), k = values(k_t), v = values(v_t),
                            dout = values(dout_t);
  const std::vector<double> mask = mask_t.defined() ? values(mask_t) : std::vector<double>();
  const int64_t B = c.B, Hq = c.Hq, Tq = c.Tq, Tk = c.Tk, D = c.D, Dv = c.Dv;
  const int64_t group = c.Hkv > 0 ? Hq / c.Hkv : 1;
  const double ks = c.dropout_p < 1 ? 1 / (1 - c.dropout_p) : 0;
  Result r;
  r.out.assign(B * Hq * Tq * Dv, 0);
  r.lse.assign(B * Hq * Tq, 0);
  r.dq.assign(B * Hq * Tq * D, 0);
  r.dk.assign(B * c.Hkv * Tk * D, 0);
  r.dv.assign(B * c.Hkv * Tk * Dv, 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;
      auto Q = [&](int64_t i, int64_t d) { return q[((b * Hq + h) * Tq + i) * D + d]; };
      auto K = [&](int64_t j, int64_t d) { return k[((b * c.Hkv + hk) * Tk + j) * D + d]; };
      auto V = [&](int64_t j, int64_t d) { return v[((b * c.Hkv + hk) * Tk + j) * Dv + d]; };
      auto G = [&](int64_t i, int64_t d) { return dout[((b * Hq + h) * Tq + i) * Dv + d]; };
      for (int64_t i = 0; i < Tq; ++i) {
        std::vector<double> s(Tk), P(Tk, 0), Z(Tk), dP(Tk);
        double m = -kInf;
        for (int64_t j = 0; j < Tk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += Q(i, d) * K(j, d);
          s[j] = c.scale * dot;
          const int64_t mi = ((b * Hq + h) * Tq + i) * Tk + j;
          if (c.causal && j > i) s[j] = -kInf;
          if (c.mask == MaskKind::Bool && mask[mi] == 0) s[j] = -kInf;
          if (c.mask == MaskKind::Additive) s[j] += mask[mi];
          m = std::max(m, s[j]);
          Z[j] = c.dropout_p > 0 ? reference_keep(rng, c.dropout_p, mi) : 1;
        }
        const int64_t row = (b * Hq + h) * Tq + i;
        if (m == -kInf) {  // all masked: output 0, no gradient
          r.lse[row] = -kInf;
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < Tk; ++j) sum += std::exp(s[j] - m);
        r.lse[row] = m + std::log(sum);
        for (int64_t j = 0; j < Tk; ++j) P[j] = std::exp(s[j] - m) / sum;
        for (int64_t j = 0; j < Tk; ++j)
          for (int64_t d = 0; d < Dv; ++d) r.out[row * Dv + d] += P[j] * Z[j] * ks * V(j, d);
        // dP: gradient with respect to the softmax weights, through the dropout.
        double pdp = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          double dw = 0;
          for (int64_t d = 0; d < Dv; ++d) dw += G(i, d) * V(j, d);
          dP[j] = dw * Z[j] * ks;
          pdp += P[j] * dP[j];
        }
        for (int64_t j = 0; j < Tk; ++j) {
          const double ds = P[j] * (dP[j] - pdp);
          for (int64_t d = 0; d < D; ++d) {
            r.dq[row * D + d] += c.scale * ds * K(j, d);
            r.dk[((b * c.Hkv + hk) * Tk + j) * D + d] += c.scale * ds * Q(i, d);
          }
          for (int64_t d = 0; d < Dv; ++d)
            r.dv[((b * c.Hkv + hk) * Tk + j) * Dv + d] += P[j] * Z[j] * ks * G(i, d);
        }
      }
    }
  return r;
}

struct Tensors {
  Tensor q, k, v, mask, dout, out, lse, dq, dk, dv;
  AttentionParams params;
};

Tensors make_tensors(const Case& c, uint64_t seed) {
  Generator g;
  g.manual_seed(seed);
  Tensors r;
  r.q = input({c.B, c.Hq, c.Tq, c.D}, c.dtype, c.strided, g);
  r.k = input({c.B, c.Hkv, c.Tk, c.D}, c.dtype, c.strided, g);
  r.v = input({c.B, c.Hkv, c.Tk, c.Dv}, c.dtype, c.strided, g);
  r.dout = input({c.B, c.Hq, c.Tq, c.Dv}, c.dtype, c.strided, g);
  r.mask = make_mask(c, g);
  r.out = output({c.B, c.Hq, c.Tq, c.Dv}, c.dtype, c.strided);
  const DType lse_dtype = c.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  r.lse = full({c.B, c.Hq, c.Tq}, Scalar(kNaN), lse_dtype);
  r.dq = output({c.B, c.Hq, c.Tq, c.D}, c.dtype, c.strided);
  r.dk = output({c.B, c.Hkv, c.Tk, c.D}, c.dtype, c.strided);
  r.dv = output({c.B, c.Hkv, c.Tk, c.Dv}, c.dtype, c.strided);
  r.params.scale = c.scale;
  r.params.is_causal = c.causal;
  r.params.dropout_p = c.dropout_p;
  r.params.rng = PhiloxState{seed * 31 + 7, 1000 + seed};
  return r;
}

void forward(Tensors& r) {
  const AttentionImpl impl =
      cpu::backend().attention_forward(r.out, r.lse, r.q, r.k, r.v, r.mask, r.params);
  EXPECT_EQ(impl, AttentionImpl::Kiln);
}

void backward(Tensors& r) {
  cpu::backend().attention_backward(r.dq, r.dk, r.dv, r.dout, r.q, r.k, r.v, r.out, r.lse, r.mask,
                                    r.params);
}

void expect_close(const char* what, const Tensor& got_t, const std::vector<double>& want,
                  double tol) {
  const std::vector<double> got = values(got_t);
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t e = 0; e < got.size() && failures < 5; ++e) {
    const bool ok = std::isinf(want[e])
                        ? got[e] == want[e]
                        : std::abs(got[e] - want[e]) <= tol * (1 + std::abs(want[e]));
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << "[" << e << "] = " << got[e] << ", expected " << want[e];
    }
  }
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64:
      return 1e-12;
    case DType::Float32:
      return 5e-6;
    case DType::Float16:
      return 4e-3;
    default:
      return 2e-2;  // bfloat16: 8 significant bits
  }
}

void check_against_reference(const Case& c, uint64_t seed = 1) {
  SCOPED_TRACE(describe(c));
  Tensors r = make_tensors(c, seed);
  forward(r);
  backward(r);
  const Result want = reference(c, r.q, r.k, r.v, r.mask, r.dout, r.params.rng);
  const double tol = tolerance(c.dtype);
  expect_close("out", r.out, want.out, tol);
  expect_close("lse", r.lse, want.lse, tol);
  expect_close("dq", r.dq, want.dq, tol);
  expect_close("dk", r.dk, want.dk, tol);
  expect_close("dv", r.dv, want.dv, tol);
}

}  // namespace

TEST(Attention, SmallCasesMatchTheReference) {
  check_against_reference(Case());
  check_against_reference(Case().causal_());
  check_against_reference(Case().dims(1, 1, 1, 3, 4, 1, 1));
}

TEST(Attention, SeveralTilesWithCausalGqaAndUnevenLengthsMatchTheReference) {
  // Lengths that are no multiple of a tile (64 queries, 128 keys), more keys than queries and
  // the reverse, rows that see one, two or three key tiles.
  check_against_reference(Case().dims(2, 4, 2, 300, 270, 8, 6).causal_());
  check_against_reference(Case().dims(2, 4, 2, 70, 300, 8, 6).causal_());
  check_against_reference(Case().dims(1, 4, 2, 70, 300, 8, 6).strided_());
  check_against_reference(Case().dims(1, 2, 1, 131, 70, 8, 6).strided_());
}

TEST(Attention, MasksWithBroadcastDimsAndAllMaskedRowsMatchTheReference) {
  for (MaskKind kind : {MaskKind::Bool, MaskKind::Additive}) {
    check_against_reference(Case().dims(2, 4, 2, 9, 6, 4, 3).masked(kind));
    check_against_reference(Case().dims(2, 2, 1, 67, 140, 5, 3).masked(kind).strided_());
  }
}

TEST(Attention, AllMaskedRowHasMinusInfLseZeroOutputAndNoGradient) {
  const Case c = Case().dims(1, 1, 1, 3, 4, 4, 3).masked(MaskKind::Bool);
  Tensors r = make_tensors(c, 3);
  forward(r);
  backward(r);
  // make_mask drops every key of row 1 in batch 0.
  EXPECT_EQ(values(r.lse)[1], -kInf);
  for (double o : values(select(select(select(r.out, 0, 0), 0, 0), 0, 1))) EXPECT_EQ(o, 0.0);
  for (double g : values(select(select(select(r.dq, 0, 0), 0, 0), 0, 1))) EXPECT_EQ(g, 0.0);
}

TEST(Attention, DropoutMatchesTheReferenceForwardAndBackward) {
  check_against_reference(Case().dropout(0.3));
  check_against_reference(Case().dims(1, 4, 2, 150, 137, 8, 8).causal_().strided_().dropout(0.5));
  // Odd Tk: the rows start on either word pair of a Philox counter.
  check_against_reference(Case().dims(2, 2, 2, 6, 5, 4, 3).masked(MaskKind::Additive).dropout(0.2));
}

TEST(Attention, DropoutOfOneZeroesOutputAndGradients) {
  const Case c = Case().dropout(1.0);
  check_against_reference(c);
  Tensors r = make_tensors(c, 5);
  forward(r);
  for (double o : values(r.out)) EXPECT_EQ(o, 0.0);
  for (double l : values(r.lse)) EXPECT_TRUE(std::isfinite(l));
}

TEST(Attention, DropoutDrawsTheDropoutKernelsMaskInForwardAndBackward) {
  // Zero queries weight every key 1/Tk and unit values make out_i = (kept keys of row i) *
  // scale / Tk; unit output gradients make dv_j = (kept queries of column j) * scale / Tk.
  const int64_t B = 1, H = 2, T = 96;
  const double p = 0.25, ks = 1 / (1 - p);
  Tensor q = zeros({B, H, T, 4}, DType::Float64), k = ones({B, H, T, 4}, DType::Float64);
  Tensor v = ones({B, H, T, 1}, DType::Float64), dout = ones({B, H, T, 1}, DType::Float64);
  Tensor out = empty({B, H, T, 1}, DType::Float64), lse = empty({B, H, T}, DType::Float64);
  Tensor dq = empty_like(q), dk = empty_like(k), dv = empty_like(v);
  AttentionParams params;
  params.dropout_p = p;
  params.rng = PhiloxState{1234, 77};
  cpu::backend().attention_forward(out, lse, q, k, v, Tensor(), params);
  cpu::backend().attention_backward(dq, dk, dv, dout, q, k, v, out, lse, Tensor(), params);

  // The dropout kernel on a [B, H, T, T] tensor of ones with the same stream.
  Tensor weights = ones({B, H, T, T}, DType::Float64), dropped = empty_like(weights);
  Tensor keep = empty({B, H, T, T}, DType::Bool);
  RandomParams rp;
  rp.state = params.rng;
  rp.a = p;
  rp.b = ks;
  cpu::backend().dropout(dropped, keep, weights, rp);
  const bool* z = keep.data<bool>();
  const std::vector<double> o = values(out), g = values(dv);
  int64_t kept = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      int64_t row = 0, col = 0;
      for (int64_t j = 0; j < T; ++j) {
        row += z[(h * T + i) * T + j];
        col += z[(h * T + j) * T + i];
      }
      kept += row;
      EXPECT_NEAR(o[h * T + i], row * ks / T, 1e-12) << "row " << i;
      EXPECT_NEAR(g[h * T + i], col * ks / T, 1e-12) << "column " << i;
    }
  // 18432 draws: the kept fraction is within 4 standard deviations (0.013) of 1 - p.
  EXPECT_NEAR(double(kept) / (H * T * T), 1 - p, 0.013);
}

TEST(Attention, HalfAndSinglePrecisionMatchTheReference) {
  for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16}) {
    check_against_reference(Case().dims(1, 4, 2, 150, 150, 16, 8).of(dtype).causal_().strided_());
    check_against_reference(
        Case().dims(2, 2, 1, 9, 13, 4, 3).of(dtype).masked(MaskKind::Additive).dropout(0.2));
    check_against_reference(Case().dims(2, 2, 2, 9, 13, 4, 3).of(dtype).masked(MaskKind::Bool));
  }
}

TEST(Attention, EmptyDimsWriteEveryOutput) {
  check_against_reference(Case().dims(0, 2, 2, 5, 7, 4, 3));
  check_against_reference(Case().dims(2, 0, 0, 5, 7, 4, 3));
  check_against_reference(Case().dims(2, 0, 2, 5, 7, 4, 3));  // dk, dv sum over no query heads: 0
  check_against_reference(Case().dims(2, 2, 2, 0, 7, 4, 3));  // dk, dv are 0
  check_against_reference(Case().dims(2, 2, 2, 5, 0, 4, 3));  // every row all-masked
  check_against_reference(Case().dims(2, 2, 2, 5, 7, 0, 3));  // scores 0: out is the mean of v
  check_against_reference(Case().dims(2, 2, 2, 5, 7, 4, 0));
}

TEST(Attention, DisallowedKilnRunsNothing) {
  Tensors r = make_tensors(Case(), 2);
  r.params.allow_kiln = false;
  EXPECT_EQ(cpu::backend().attention_forward(r.out, r.lse, r.q, r.k, r.v, r.mask, r.params),
            AttentionImpl::None);
  for (double o : values(r.out)) EXPECT_TRUE(std::isnan(o));
}

TEST(Attention, ResultsDoNotDependOnTheThreadCount) {
  const Case c = Case().dims(2, 4, 2, 130, 140, 16, 16).of(DType::Float32).causal_().dropout(0.1);
  Tensors one = make_tensors(c, 9), two = make_tensors(c, 9);
  const int threads = get_num_threads();
  set_num_threads(1);
  forward(one);
  backward(one);
  set_num_threads(2);
  forward(two);
  backward(two);
  set_num_threads(threads);
  const std::vector<std::pair<Tensor, Tensor>> pairs = {
      {one.out, two.out}, {one.lse, two.lse}, {one.dq, two.dq}, {one.dk, two.dk}, {one.dv, two.dv}};
  for (const auto& [a, b] : pairs) EXPECT_EQ(values(a), values(b));
}

TEST(Attention, BackwardMatchesFiniteDifferencesOfTheForward) {
  // loss = sum(out * dout): its gradient is the backward's with that dout. Dropout's mask is
  // fixed by the stream, so the loss stays differentiable.
  const Case c = Case().dims(1, 2, 1, 3, 4, 3, 2).masked(MaskKind::Additive).dropout(0.3);
  Tensors r = make_tensors(c, 4);
  forward(r);
  backward(r);
  auto loss = [&] {
    Tensor out = empty(r.out.sizes(), DType::Float64), lse = empty(r.lse.sizes(), DType::Float64);
    cpu::backend().attention_forward(out, lse, r.q, r.k, r.v, r.mask, r.params);
    double s = 0;
    const std::vector<double> o = values(out), g = values(r.dout);
    for (size_t e = 0; e < o.size(); ++e) s += o[e] * g[e];
    return s;
  };
  const double h = 1e-6;
  const std::vector<std::pair<Tensor, Tensor>> inputs = {{r.q, r.dq}, {r.k, r.dk}, {r.v, r.dv}};
  for (const auto& [x, grad] : inputs) {
    double* p = x.data<double>();
    const std::vector<double> analytic = values(grad);
    for (int64_t e = 0; e < x.numel(); ++e) {
      const double saved = p[e];
      p[e] = saved + h;
      const double up = loss();
      p[e] = saved - h;
      const double down = loss();
      p[e] = saved;
      EXPECT_NEAR(analytic[e], (up - down) / (2 * h), 1e-7) << "element " << e;
    }
  }
}

}  // namespace kiln
