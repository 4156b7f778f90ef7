// CPU fused scaled-dot-product attention (Note [Fused attention] in ops/attention.h).
//
// Note [CPU attention tiles]
// A task owns a tile of query rows (forward, dq) or key rows (dk, dv) of one head and walks
// the other side tile by tile. Each step copies the tiles it reads into per-thread scratch in
// the compute type A (float, double for float64; q pre-multiplied by the scale), so the
// products are small contiguous Eigen GEMMs whatever the input strides and dtype, and no
// buffer is larger than a tile: memory is O(T). The forward keeps a running row maximum m and
// sum l (online softmax): a new maximum rescales the row's sum and output accumulator by
// exp(m_old - m_new). The backward (FlashAttention-2) recomputes P = exp(S - lse) from the
// saved lse and runs as two race-free parallel passes: one over query tiles writing dq, one
// over key tiles of a key/value head writing dk and dv summed over the group's query heads.
// Masked scores are -inf and their weights exactly 0 (see exp_shifted). Tasks run under
// OpenMP once the problem has about kParallelGrain multiply-adds; each output tile is written
// by one task walking its inputs in a fixed order, so results do not depend on the thread
// count. Tiles of 64 queries by 128 keys measured fastest for D = 64 (Eigen's float kernel
// works on 48-row panels; 64 x 64 tiles took a third longer).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/attention.h"
#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"
#include "ops/philox.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kBlockQ = 64;                       // query rows per tile
constexpr int64_t kBlockK = 128;                      // key rows per tile
constexpr int64_t kParallelGrain = int64_t{1} << 18;  // multiply-adds before using threads

template <typename A>
using Mat = Eigen::Map<Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <typename A>
using Row = Eigen::Map<Eigen::Array<A, 1, Eigen::Dynamic>>;
template <typename A>
constexpr A kNegInf = -std::numeric_limits<A>::infinity();
// Scratch aligned to Eigen's widest packet: its vectorised sums start at the first aligned
// element, so buffers aligned alike in every thread sum alike.
template <typename A>
using Buffer = std::vector<A, Eigen::aligned_allocator<A>>;

// Row t of head h of batch b in a [B, H, T, D] view with a unit last stride.
template <typename T>
struct Rows {
  T* p;
  int64_t sb, sh, st;
  explicit Rows(const Tensor& t)
      : p(t.data<T>()), sb(t.stride(0)), sh(t.stride(1)), st(t.stride(2)) {}
  T* row(int64_t b, int64_t h, int64_t t) const { return p + b * sb + h * sh + t * st; }
};

// pairs[2 g + w] = whether dropout keeps the element drawn from word pair w of counter
// counter0 + g: philox_unit(pair) >= p, tested exactly as (pair >> 11) >= threshold with
// threshold = ceil(p * 2^53). A plain function of scalars, so the loop vectorises.
void draw_keep_pairs(uint8_t* pairs, uint64_t seed, uint64_t counter0, uint64_t groups,
                     uint64_t threshold) {
#pragma omp simd
  for (uint64_t g = 0; g < groups; ++g) {
    const auto w = philox4x32(seed, counter0 + g);
    pairs[2 * g] = (philox_u64(w[0], w[1]) >> 11) >= threshold;
    pairs[2 * g + 1] = (philox_u64(w[2], w[3]) >> 11) >= threshold;
  }
}

// Everything a tile step needs to know about the problem.
template <typename T, typename A>
struct Problem {
  int64_t B, Hq, Hkv, Tq, Tk, D, Dv, group;
  A scale, keep_scale;
  double dropout_p;
  // philox_unit(hi, lo) = (hi:lo >> 11) * 2^-53 is >= p iff (hi:lo >> 11) >= ceil(p * 2^53).
  uint64_t keep_threshold;
  PhiloxState rng;
  bool causal;
  Rows<const T> q, k, v;
  const void* mask;  // null, bool or T, indexed by mask_stride
  bool mask_is_bool;
  int64_t mask_stride[4];

  Problem(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& mask_,
          const AttentionParams& p)
      : B(q_.size(0)),
        Hq(q_.size(1)),
        Hkv(k_.size(1)),
        Tq(q_.size(2)),
        Tk(k_.size(2)),
        D(q_.size(3)),
        Dv(v_.size(3)),
        group(Hkv > 0 ? Hq / Hkv : 0),
        scale(A(p.scale)),
        // dropout_p == 1 drops every weight: the output is 0, as in PyTorch's dropout.
        keep_scale(p.dropout_p < 1 ? A(1.0 / (1.0 - p.dropout_p)) : A(0)),
        dropout_p(p.dropout_p),
        keep_threshold(static_cast<uint64_t>(std::ceil(std::min(p.dropout_p, 1.0) * 0x1p53))),
        rng(p.rng),
        causal(p.is_causal),
        q(q_),
        k(k_),
        v(v_),
        mask(mask_.defined() ? mask_.data_ptr() : nullptr),
        mask_is_bool(mask_.defined() && mask_.dtype() == DType::Bool),
        mask_stride{} {
    for (int d = 0; mask && d < 4; ++d) mask_stride[d] = mask_.stride(d);
  }

  bool dropout() const { return dropout_p > 0; }
  // Last key a query tile [i0, i0 + nq) can see, plus one.
  int64_t key_end(int64_t i0, int64_t nq) const { return causal ? std::min(Tk, i0 + nq) : Tk; }
  // First query row that can see key j0 (top-left causal: i >= j).
  int64_t query_begin(int64_t j0) const { return causal ? std::min(Tq, j0) : 0; }
  // Multiply-adds of the whole attention, to decide whether threads pay off.
  int64_t work() const { return B * Hq * Tq * Tk * (D + Dv); }

  // Scores of query rows [i0, i0 + nq) of head h against keys [j0, j0 + nk), q pre-scaled,
  // with the causal and explicit masks applied (-inf marks a dropped key).
  void scores(Mat<A>& S, const Mat<A>& Q, const Mat<A>& K, int64_t b, int64_t h, int64_t i0,
              int64_t j0) const {
    const int64_t nq = S.rows(), nk = S.cols();
    if (D > 0) {
      S.noalias() = Q * K.transpose();
    } else {
      S.setZero();
    }
    if (causal && j0 + nk - 1 > i0) {
      for (int64_t r = 0; r < nq; ++r)
        for (int64_t c = std::max<int64_t>(0, i0 + r - j0 + 1); c < nk; ++c) S(r, c) = kNegInf<A>;
    }
    if (!mask) return;
    const int64_t s2 = mask_stride[2], s3 = mask_stride[3];
    const int64_t base = b * mask_stride[0] + h * mask_stride[1] + i0 * s2 + j0 * s3;
    for (int64_t r = 0; r < nq; ++r) {
      A* s = &S(r, 0);
      if (mask_is_bool) {
        const bool* m = static_cast<const bool*>(mask) + base + r * s2;
        for (int64_t c = 0; c < nk; ++c) s[c] = m[c * s3] ? s[c] : kNegInf<A>;
      } else {
        const T* m = static_cast<const T*>(mask) + base + r * s2;
        for (int64_t c = 0; c < nk; ++c) s[c] += static_cast<A>(m[c * s3]);
      }
    }
  }

  // keep[r * nk + c] = 1 where dropout keeps weight (i0 + r, j0 + c) of head h: the dropout
  // kernel's Philox mapping over the row-major [B, Hq, Tq, Tk] index L (counter L / 2, word
  // pair L % 2). A row's counters are drawn in one vectorisable loop into pairs (nk + 2).
  void keep_mask(uint8_t* keep, uint8_t* pairs, int64_t nq, int64_t nk, int64_t b, int64_t h,
                 int64_t i0, int64_t j0) const {
    for (int64_t r = 0; r < nq; ++r) {
      const uint64_t first = static_cast<uint64_t>(((b * Hq + h) * Tq + i0 + r) * Tk + j0);
      const uint64_t g0 = first / 2;
      draw_keep_pairs(pairs, rng.seed, rng.offset + g0, (first + nk - 1) / 2 - g0 + 1,
                      keep_threshold);
      std::copy(pairs + first % 2, pairs + first % 2 + nk, keep + r * nk);
    }
  }
};

// dst[r, :] = mult * src row (t0 + r) of head h, in the compute type.
template <typename T, typename A>
void load(A* dst, const Rows<const T>& src, int64_t b, int64_t h, int64_t t0, int64_t n,
          int64_t cols, A mult = A(1)) {
  for (int64_t r = 0; r < n; ++r) {
    const T* s = src.row(b, h, t0 + r);
    A* d = dst + r * cols;
    for (int64_t c = 0; c < cols; ++c) d[c] = mult * static_cast<A>(s[c]);
  }
}

template <typename T, typename A>
void store(const Rows<T>& dst, const A* src, int64_t b, int64_t h, int64_t t0, int64_t n,
           int64_t cols, A mult) {
  for (int64_t r = 0; r < n; ++r) {
    T* d = dst.row(b, h, t0 + r);
    const A* s = src + r * cols;
    for (int64_t c = 0; c < cols; ++c) d[c] = static_cast<T>(mult * s[c]);
  }
}

// s[c] <- exp(s[c] - shift) for c < n, exactly 0 where s[c] is -inf (a dropped key): Eigen's
// vectorised exp only underflows to a tiny value there (and its select is not vectorised).
template <typename A>
void exp_shifted(A* s, int64_t n, A shift, A* tmp) {
  Row<A>(tmp, n) = (Row<A>(s, n) - shift).exp();
  for (int64_t c = 0; c < n; ++c) s[c] = s[c] == kNegInf<A> ? A(0) : tmp[c];
}

// P[r, :] = exp(S[r, :] - lse[r]) in place: the softmax weights the forward normalised by lse,
// 0 for dropped keys and for all-masked rows (lse -inf).
template <typename A>
void weights_from_lse(Mat<A>& S, const A* lse, A* tmp) {
  for (int64_t r = 0; r < S.rows(); ++r) {
    if (lse[r] == kNegInf<A>) {
      Row<A>(&S(r, 0), S.cols()).setZero();
    } else {
      exp_shifted(&S(r, 0), S.cols(), lse[r], tmp);
    }
  }
}

// Scratch of one thread: tiles in the compute type, reused across its tasks.
template <typename A>
struct Scratch {
  Buffer<A> q, dout, acc, k, v, s, ds, m, l, tmp;
  std::vector<uint8_t> keep, pairs;
  Scratch(int64_t D, int64_t Dv)
      : q(kBlockQ * D),
        dout(kBlockQ * Dv),
        acc(kBlockQ * std::max(D, Dv)),
        k(kBlockK * D),
        v(kBlockK * Dv),
        s(kBlockQ * kBlockK),
        ds(kBlockQ * kBlockK),
        m(kBlockQ),
        l(kBlockQ),
        tmp(kBlockK),
        keep(kBlockQ * kBlockK),
        pairs(kBlockK + 2) {}
};

template <typename T, typename L>
void attention_forward_typed(const Tensor& out_t, const Tensor& lse_t, const Tensor& q_t,
                             const Tensor& k_t, const Tensor& v_t, const Tensor& mask_t,
                             const AttentionParams& params) {
  using A = acc_t<T>;
  const Problem<T, A> p(q_t, k_t, v_t, mask_t, params);
  const Rows<T> out(out_t);
  L* lse = lse_t.data<L>();
  const int64_t ls0 = lse_t.stride(0), ls1 = lse_t.stride(1), ls2 = lse_t.stride(2);
  const int64_t q_blocks = (p.Tq + kBlockQ - 1) / kBlockQ, tasks = p.B * p.Hq * q_blocks;
#pragma omp parallel if (tasks > 1 && p.work() >= kParallelGrain)
  {
    Scratch<A> sc(p.D, p.Dv);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / (p.Hq * q_blocks), h = task / q_blocks % p.Hq;
      const int64_t hk = h / p.group, i0 = task % q_blocks * kBlockQ;
      const int64_t nq = std::min(kBlockQ, p.Tq - i0), j_end = p.key_end(i0, nq);
      load(sc.q.data(), p.q, b, h, i0, nq, p.D, p.scale);
      const Mat<A> Q(sc.q.data(), nq, p.D);
      Mat<A> acc(sc.acc.data(), nq, p.Dv);
      acc.setZero();
      A* m = sc.m.data();
      A* l = sc.l.data();
      std::fill(m, m + nq, kNegInf<A>);
      std::fill(l, l + nq, A(0));
      for (int64_t j0 = 0; j0 < j_end; j0 += kBlockK) {
        const int64_t nk = std::min(kBlockK, j_end - j0);
        load(sc.k.data(), p.k, b, hk, j0, nk, p.D);
        load(sc.v.data(), p.v, b, hk, j0, nk, p.Dv);
        const Mat<A> K(sc.k.data(), nk, p.D), V(sc.v.data(), nk, p.Dv);
        Mat<A> S(sc.s.data(), nq, nk);
        p.scores(S, Q, K, b, h, i0, j0);
        for (int64_t r = 0; r < nq; ++r) {
          Row<A> s(&S(r, 0), nk);
          const A m_new = std::max(m[r], s.maxCoeff());
          if (m_new == kNegInf<A>) {  // no key of this row so far
            s.setZero();
            continue;
          }
          const A alpha = std::exp(m[r] - m_new);
          exp_shifted(s.data(), nk, m_new, sc.tmp.data());
          l[r] = l[r] * alpha + s.sum();
          acc.row(r) *= alpha;
          m[r] = m_new;
        }
        if (p.dropout()) {
          p.keep_mask(sc.keep.data(), sc.pairs.data(), nq, nk, b, h, i0, j0);
          const uint8_t* z = sc.keep.data();
          A* s = S.data();
          for (int64_t e = 0; e < nq * nk; ++e) s[e] = z[e] ? s[e] : A(0);
        }
        acc.noalias() += S * V;
      }
      for (int64_t r = 0; r < nq; ++r) {
        const bool empty = l[r] == A(0);  // all keys masked
        lse[b * ls0 + h * ls1 + (i0 + r) * ls2] = empty ? L(kNegInf<A>) : L(m[r] + std::log(l[r]));
        store(out, acc.data() + r * p.Dv, b, h, i0 + r, 1, p.Dv,
              empty ? A(0) : p.keep_scale / l[r]);
      }
    }
  }
}

template <typename T, typename L>
void attention_backward_typed(const Tensor& dq_t, const Tensor& dk_t, const Tensor& dv_t,
                              const Tensor& dout_t, const Tensor& q_t, const Tensor& k_t,
                              const Tensor& v_t, const Tensor& out_t, const Tensor& lse_t,
                              const Tensor& mask_t, const AttentionParams& params) {
  using A = acc_t<T>;
  const Problem<T, A> p(q_t, k_t, v_t, mask_t, params);
  const Rows<const T> dout(dout_t), out(out_t);
  const Rows<T> dq(dq_t), dk(dk_t), dv(dv_t);
  const bool parallel = p.work() >= kParallelGrain;

  // Row statistics of every query row, contiguous [B, Hq, Tq]: lse and Di = dout_i . out_i
  // (the sum over keys of P_ij dP_ij, softmax's backward term).
  const int64_t rows = p.B * p.Hq * p.Tq;
  std::vector<A> lse(rows), di(rows);
  {
    const L* lse_p = lse_t.data<L>();
    const int64_t ls0 = lse_t.stride(0), ls1 = lse_t.stride(1), ls2 = lse_t.stride(2);
#pragma omp parallel for if (parallel && rows > 1)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t b = row / (p.Hq * p.Tq), h = row / p.Tq % p.Hq, i = row % p.Tq;
      lse[row] = static_cast<A>(lse_p[b * ls0 + h * ls1 + i * ls2]);
      const T* g = dout.row(b, h, i);
      const T* o = out.row(b, h, i);
      A s = 0;
      for (int64_t d = 0; d < p.Dv; ++d) s += static_cast<A>(g[d]) * static_cast<A>(o[d]);
      di[row] = s;
    }
  }

  // One step of both passes, query rows [i0, i0 + nq) of head h against the key tile K, V:
  // S <- the weights P, dS <- P (Z dP / (1 - p) - Di) with dP = dO V^T, keep <- Z.
  auto gradient_tile = [&](Scratch<A>& sc, Mat<A>& S, Mat<A>& dS, const Mat<A>& Q, const Mat<A>& dO,
                           const Mat<A>& K, const Mat<A>& V, int64_t b, int64_t h, int64_t i0,
                           int64_t j0) {
    const int64_t nq = S.rows(), nk = S.cols();
    const int64_t row0 = (b * p.Hq + h) * p.Tq + i0;
    p.scores(S, Q, K, b, h, i0, j0);
    weights_from_lse(S, lse.data() + row0, sc.tmp.data());
    if (p.Dv > 0) {
      dS.noalias() = dO * V.transpose();
    } else {
      dS.setZero();
    }
    if (p.dropout()) p.keep_mask(sc.keep.data(), sc.pairs.data(), nq, nk, b, h, i0, j0);
    const uint8_t* z = sc.keep.data();
    for (int64_t r = 0; r < nq; ++r) {
      A* ds = &dS(r, 0);
      const A* pr = &S(r, 0);
      const A d = di[row0 + r];
      if (p.dropout()) {
        for (int64_t c = 0; c < nk; ++c)
          ds[c] = pr[c] * ((z[r * nk + c] ? ds[c] * p.keep_scale : A(0)) - d);
      } else {
        for (int64_t c = 0; c < nk; ++c) ds[c] = pr[c] * (ds[c] - d);
      }
    }
  };

  // Pass 1: dq_i = scale sum_j dS_ij k_j, a task per query tile.
  const int64_t q_blocks = (p.Tq + kBlockQ - 1) / kBlockQ, q_tasks = p.B * p.Hq * q_blocks;
#pragma omp parallel if (parallel && q_tasks > 1)
  {
    Scratch<A> sc(p.D, p.Dv);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < q_tasks; ++task) {
      const int64_t b = task / (p.Hq * q_blocks), h = task / q_blocks % p.Hq;
      const int64_t hk = h / p.group, i0 = task % q_blocks * kBlockQ;
      const int64_t nq = std::min(kBlockQ, p.Tq - i0), j_end = p.key_end(i0, nq);
      load(sc.q.data(), p.q, b, h, i0, nq, p.D, p.scale);
      load(sc.dout.data(), dout, b, h, i0, nq, p.Dv);
      const Mat<A> Q(sc.q.data(), nq, p.D), dO(sc.dout.data(), nq, p.Dv);
      Mat<A> dQ(sc.acc.data(), nq, p.D);
      dQ.setZero();
      for (int64_t j0 = 0; j0 < j_end; j0 += kBlockK) {
        const int64_t nk = std::min(kBlockK, j_end - j0);
        load(sc.k.data(), p.k, b, hk, j0, nk, p.D);
        load(sc.v.data(), p.v, b, hk, j0, nk, p.Dv);
        const Mat<A> K(sc.k.data(), nk, p.D), V(sc.v.data(), nk, p.Dv);
        Mat<A> S(sc.s.data(), nq, nk), dS(sc.ds.data(), nq, nk);
        gradient_tile(sc, S, dS, Q, dO, K, V, b, h, i0, j0);
        if (p.D > 0) dQ.noalias() += dS * K;
      }
      store(dq, dQ.data(), b, h, i0, nq, p.D, p.scale);
    }
  }

  // Pass 2: dv_j = sum_i Z_ij P_ij / (1 - p) dout_i and dk_j = sum_i dS_ij (scale q_i), a task
  // per key tile of a key/value head, summed over the query heads of its group.
  const int64_t k_blocks = (p.Tk + kBlockK - 1) / kBlockK, k_tasks = p.B * p.Hkv * k_blocks;
#pragma omp parallel if (parallel && k_tasks > 1)
  {
    Scratch<A> sc(p.D, p.Dv);
    Buffer<A> dk_tile(kBlockK * p.D), dv_tile(kBlockK * p.Dv);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < k_tasks; ++task) {
      const int64_t b = task / (p.Hkv * k_blocks), hk = task / k_blocks % p.Hkv;
      const int64_t j0 = task % k_blocks * kBlockK, nk = std::min(kBlockK, p.Tk - j0);
      load(sc.k.data(), p.k, b, hk, j0, nk, p.D);
      load(sc.v.data(), p.v, b, hk, j0, nk, p.Dv);
      const Mat<A> K(sc.k.data(), nk, p.D), V(sc.v.data(), nk, p.Dv);
      Mat<A> dK(dk_tile.data(), nk, p.D), dV(dv_tile.data(), nk, p.Dv);
      dK.setZero();
      dV.setZero();
      for (int64_t h = hk * p.group; h < (hk + 1) * p.group; ++h) {
        for (int64_t i0 = p.query_begin(j0) / kBlockQ * kBlockQ; i0 < p.Tq; i0 += kBlockQ) {
          const int64_t nq = std::min(kBlockQ, p.Tq - i0);
          load(sc.q.data(), p.q, b, h, i0, nq, p.D, p.scale);
          load(sc.dout.data(), dout, b, h, i0, nq, p.Dv);
          const Mat<A> Q(sc.q.data(), nq, p.D), dO(sc.dout.data(), nq, p.Dv);
          Mat<A> S(sc.s.data(), nq, nk), dS(sc.ds.data(), nq, nk);
          gradient_tile(sc, S, dS, Q, dO, K, V, b, h, i0, j0);
          if (p.dropout()) {  // S becomes the dropped, rescaled weights
            const uint8_t* z = sc.keep.data();
            A* s = S.data();
            for (int64_t e = 0; e < nq * nk; ++e) s[e] = z[e] ? s[e] * p.keep_scale : A(0);
          }
          if (p.Dv > 0) dV.noalias() += S.transpose() * dO;
          if (p.D > 0) dK.noalias() += dS.transpose() * Q;
        }
      }
      store(dk, dK.data(), b, hk, j0, nk, p.D, A(1));
      store(dv, dV.data(), b, hk, j0, nk, p.Dv, A(1));
    }
  }
}

void check_views(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  for (const auto& [name, t] : ts) {
    KILN_CHECK(t->dim() == 4 && (t->size(3) <= 1 || t->stride(3) == 1), Runtime, "[", op, "] ",
               name, " must be a 4-D view with a unit last stride, got sizes ", t->sizes(),
               " strides ", t->strides());
  }
}

// The lse dtype of Note [Fused attention]: float64 for float64 inputs, else float32.
template <typename T>
using LseType = std::conditional_t<std::is_same_v<T, double>, double, float>;

void check_lse(const char* op, const Tensor& lse, const Tensor& q) {
  const DType want = q.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  KILN_CHECK(lse.dtype() == want && lse.dim() == 3, Runtime, "[", op, "] lse must be ", want,
             " [B, Hq, Tq] for ", q.dtype(), " inputs, got ", lse.dtype(), " ", lse.sizes());
}

void check_mask(const char* op, const Tensor& mask, const Tensor& q) {
  KILN_CHECK(!mask.defined() ||
                 (mask.dim() == 4 && (mask.dtype() == DType::Bool || mask.dtype() == q.dtype())),
             Runtime, "[", op, "] mask must be a 4-D bool or ", q.dtype(), " view, got ",
             mask.dtype(), " ", mask.sizes());
}

}  // namespace

AttentionImpl attention_forward_kernel(const Tensor& out, const Tensor& lse, const Tensor& q,
                                       const Tensor& k, const Tensor& v, const Tensor& mask,
                                       const AttentionParams& p) {
  if (!p.allow_kiln) return AttentionImpl::None;
  const char* op = "attention_forward";
  check_views(op, {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}});
  check_lse(op, lse, q);
  check_mask(op, mask, q);
  dispatch_floating(q.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    attention_forward_typed<T, LseType<T>>(out, lse, q, k, v, mask, p);
  });
  return AttentionImpl::Kiln;
}

void attention_backward_kernel(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                               const Tensor& dout, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& out, const Tensor& lse,
                               const Tensor& mask, const AttentionParams& p) {
  const char* op = "attention_backward";
  check_views(op, {{"dq", &dq},
                   {"dk", &dk},
                   {"dv", &dv},
                   {"dout", &dout},
                   {"q", &q},
                   {"k", &k},
                   {"v", &v},
                   {"out", &out}});
  check_lse(op, lse, q);
  check_mask(op, mask, q);
  dispatch_floating(q.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    attention_backward_typed<T, LseType<T>>(dq, dk, dv, dout, q, k, v, out, lse, mask, p);
  });
}

}  // namespace kiln::cpu
