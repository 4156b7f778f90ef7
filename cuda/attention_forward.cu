// kiln's flash attention forward on CUDA: out and lse (Note [Fused attention] in
// ops/attention.h; the design is Note [Flash attention kernels] in cuda/attention_tile.cuh).
#include <algorithm>

#include "core/error.h"
#include "cuda/attention.h"
#include "cuda/attention_tile.cuh"
#include "cuda/check.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"

namespace kiln::cuda {

namespace {

using namespace flash;

constexpr const char* kOp = "flash_attention_forward";

struct FwdArgs {
  AttnInputs in;
  void* out = nullptr;
  Strides3 so;
  bool vec_out = false;
  float* lse = nullptr;
};

// Tile shapes per policy and padded head dim: kWarps warps, each owning kMT 16-row slices of
// the kBM = 16 kMT kWarps query rows, key/value tiles of kBN rows. Chosen to keep the
// accumulators (kMT * kD / 2 floats of output and kMT * kBN / 2 of scores per thread) in
// registers without spilling (ptxas -v), and shared memory (Q + two K/V buffers) within one
// SM's 227 KiB. kMinCtas CTAs fit one SM (shared memory and the register cap it implies).
// Float32 at head dim 64 (Note [Float32 attention on tensor cores]) spends more instructions
// per product than the half types, so it wants warps to hide latency more than it wants a
// K/V fragment reused over two row slices: 8 warps of one slice, two CTAs per SM.
template <typename M, int kD>
struct FwdConfig {
  static constexpr bool kHalf = sizeof(typename M::Elem) == 2;
  static constexpr bool kWide = !kHalf && kD == 64;
  static constexpr int kWarps = kWide ? 8 : 4;
  static constexpr int kMT = kHalf && kD <= 128 ? 2 : 1;
  static constexpr int kBN = kD == 64 ? 64 : 32;
  static constexpr int kBM = 16 * kMT * kWarps;
  static constexpr int kMinCtas = kWide ? 2 : 1;
  // Q and K tiles are read along the head dim, V tiles across their rows.
  static constexpr size_t kSmem =
      (static_cast<size_t>(kBM + 2 * kBN) * (kD + M::kPad) + 2 * kBN * (kD + M::kPadT)) *
      sizeof(typename M::Elem);
  static_assert(kSmem <= kMaxSmem, "forward tile does not fit shared memory");
};

template <typename M, int kD, int kBN, int kMT, int kWarps, int kMinCtas>
__global__ void __launch_bounds__(kWarps * 32, kMinCtas) flash_forward_kernel(const FwdArgs a) {
  using E = typename M::Elem;
  using A = typename M::A;
  using B = typename M::B;
  constexpr int kCta = kWarps * 32;  // threads
  constexpr int kBM = 16 * kMT * kWarps;
  constexpr int kLd = kD + M::kPad;    // Q (and out) and K tiles
  constexpr int kLdV = kD + M::kPadT;  // V tiles
  constexpr int kK = M::kK;
  constexpr int kUnrollD = M::kCompact ? 2 : kD / kK;  // loops over the head dim
  constexpr int kNT = kBN / 8;                         // score tiles of a row slice
  constexpr int kDT = kD / 8;                          // output tiles of a row slice
  extern __shared__ __align__(16) unsigned char smem[];
  E* qs = reinterpret_cast<E*>(smem);  // [kBM][kLd]
  E* ks = qs + kBM * kLd;              // [2][kBN][kLd]
  E* vs = ks + 2 * kBN * kLd;          // [2][kBN][kLdV]
  const AttnInputs& in = a.in;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Heaviest (last, for causal) query blocks first.
  const int n_mblocks = (in.Tq + kBM - 1) / kBM;
  const int mb = n_mblocks - 1 - static_cast<int>(blockIdx.x % n_mblocks);
  const int64_t bh = blockIdx.x / n_mblocks;
  const int b = static_cast<int>(bh / in.Hq), h = static_cast<int>(bh % in.Hq);
  const int hk = h / (in.Hq / in.Hkv);
  const int m0 = mb * kBM;
  const int wrow = warp * 16 * kMT;  // the warp's first row in the block

  const E* q = static_cast<const E*>(in.q) + b * in.sq.b + h * in.sq.h + m0 * in.sq.t;
  const E* k = static_cast<const E*>(in.k) + b * in.sk.b + hk * in.sk.h;
  const E* v = static_cast<const E*>(in.v) + b * in.sv.b + hk * in.sv.h;
  const int n_end = in.causal ? min(in.Tk, m0 + kBM) : in.Tk;
  const int n_tiles = (n_end + kBN - 1) / kBN;

  auto load_kv = [&](int j, int buf) {
    const int n0 = j * kBN, rows = min(kBN, in.Tk - n0);
    load_tile<E, kBN, kD, kCta>(ks + buf * kBN * kLd, kLd, k + n0 * in.sk.t, in.sk.t, rows, in.d,
                                in.vec_in);
    load_tile<E, kBN, kD, kCta>(vs + buf * kBN * kLdV, kLdV, v + n0 * in.sv.t, in.sv.t, rows, in.dv,
                                in.vec_in);
  };
  load_tile<E, kBM, kD, kCta>(qs, kLd, q, in.sq.t, min(kBM, in.Tq - m0), in.d, in.vec_in);
  if (n_tiles > 0) load_kv(0, 0);
  cp_async_commit();

  // Per row slice mt and half r (rows g, g + 8): running max (base 2), this thread's share of
  // the running sum, the row's mask offset and first dropout element index.
  float o[kMT][kDT][4] = {};
  float m_run[kMT][2], l_run[kMT][2];
  int64_t mask_row[kMT][2];
  uint64_t drop_row[kMT][2];
  const PhiloxState rng = in.dropout ? dropout_state(in) : PhiloxState{};
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = m0 + wrow + 16 * mt + g + 8 * r;
      m_run[mt][r] = -INFINITY;
      l_run[mt][r] = 0.0f;
      mask_row[mt][r] = b * in.smask[0] + h * in.smask[1] + i * in.smask[2];
      drop_row[mt][r] = (static_cast<uint64_t>(bh) * in.Tq + i) * in.Tk;
    }
  }

  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1;
    if (j + 1 < n_tiles) {
      load_kv(j + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const E* kt = ks + buf * kBN * kLd;
    const E* vt = vs + buf * kBN * kLdV;
    const int n0 = j * kBN;

    // S = Q K^T for the warp's rows.
    float s[kMT][kNT][4] = {};
#pragma unroll kUnrollD
    for (int kk = 0; kk < kD / kK; ++kk) {
      if (kk * kK >= in.d) break;
      A qa[kMT];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) M::load_a(qa[mt], qs, kLd, wrow + 16 * mt, kk * kK);
#pragma unroll
      for (int np = 0; np < kBN / 16; ++np) {
        B kb[2];
        M::load_b2(kb, kt, kLd, 16 * np, kk * kK);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          M::mma(s[mt][2 * np], qa[mt], kb[0]);
          M::mma(s[mt][2 * np + 1], qa[mt], kb[1]);
        }
      }
    }

    // Online softmax: scores -> exp2(score - running max), rescale what came before.
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = m0 + wrow + 16 * mt + g + 8 * r;
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float x =
                score2<E>(in, mask_row[mt][r], s[mt][nt][2 * r + e], i, n0 + 8 * nt + 2 * t + e);
            s[mt][nt][2 * r + e] = x;
            mx = fmaxf(mx, x);
          }
        }
        const float m_new = fmaxf(m_run[mt][r], quad_max(mx));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // an all-masked row so far
        const float alpha = exp2f(m_run[mt][r] - m_use);
        m_run[mt][r] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = exp2f(s[mt][nt][2 * r + e] - m_use);
            s[mt][nt][2 * r + e] = p;
            sum += p;
          }
        }
        l_run[mt][r] = l_run[mt][r] * alpha + sum;
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt) {
          o[mt][dt][2 * r] *= alpha;
          o[mt][dt][2 * r + 1] *= alpha;
        }
      }
    }

    // Dropout zeroes weights after the row sums (the normalizer counts every weight); the
    // kept ones are scaled by 1 / (1 - p) at the end.
    if (in.dropout) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = m0 + wrow + 16 * mt + g + 8 * r;
          if (i >= in.Tq) continue;
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) {
            const int jj = n0 + 8 * nt + 2 * t;
            // Masked weights (causal, past Tk) are 0 already: no draw needed.
            if (jj >= in.Tk || (s[mt][nt][2 * r] == 0.0f && s[mt][nt][2 * r + 1] == 0.0f))
              continue;
            bool keep0, keep1;
            dropout_pair(in, rng, drop_row[mt][r] + jj, keep0, keep1);
            if (!keep0) s[mt][nt][2 * r] = 0.0f;
            if (!keep1) s[mt][nt][2 * r + 1] = 0.0f;
          }
        }
      }
    }

    // O += P V, P straight from the score registers.
#pragma unroll
    for (int kk = 0; kk < kBN / kK; ++kk) {
      A pa[kMT];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) M::a_from_c(pa[mt], s[mt], kk);
#pragma unroll
      for (int np = 0; np < kD / 16; ++np) {
        if (16 * np >= in.dv) break;
        B vb[2];
        M::load_b2_t(vb, vt, kLdV, kk * kK, 16 * np);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          M::mma(o[mt][2 * np], pa[mt], vb[0]);
          M::mma(o[mt][2 * np + 1], pa[mt], vb[1]);
        }
      }
    }
    __syncthreads();  // the buffer is refilled two tiles on
  }

  // Normalize, write lse, stage out through the Q tile and store it.
  cp_async_wait<0>();  // nothing left in flight when no tile ran
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = m0 + wrow + 16 * mt + g + 8 * r;
      const float l = quad_sum(l_run[mt][r]);
      const float inv = l > 0.0f ? in.drop_scale / l : 0.0f;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        o[mt][dt][2 * r] *= inv;
        o[mt][dt][2 * r + 1] *= inv;
      }
      if (t == 0 && i < in.Tq)
        a.lse[bh * in.Tq + i] = l > 0.0f ? m_run[mt][r] * kLn2 + logf(l) : -INFINITY;
    }
    store_c(qs, kLd, wrow + 16 * mt, 0, o[mt], 1.0f);
  }
  __syncthreads();
  E* out = static_cast<E*>(a.out) + b * a.so.b + h * a.so.h + m0 * a.so.t;
  store_tile<E, kBM, kD, kCta>(out, a.so.t, qs, kLd, min(kBM, in.Tq - m0), in.dv, a.vec_out);
}

template <typename M, int kD>
void launch_forward(const FwdArgs& a, cudaStream_t stream) {
  using C = FwdConfig<M, kD>;
  auto kernel = flash_forward_kernel<M, kD, C::kBN, C::kMT, C::kWarps, C::kMinCtas>;
  allow_smem(kernel, C::kSmem, kOp);
  const int64_t blocks = static_cast<int64_t>((a.in.Tq + C::kBM - 1) / C::kBM) * a.in.B * a.in.Hq;
  KILN_CHECK(blocks < (int64_t{1} << 31), Runtime, "[", kOp, "] too many query blocks: ", blocks);
  kernel<<<static_cast<unsigned>(blocks), C::kWarps * 32, C::kSmem, stream>>>(a);
  KILN_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace

bool flash_attention_supports(DType dtype, int64_t d, int64_t dv) {
  const bool dtype_ok =
      dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float32;
  return dtype_ok && d >= 0 && dv >= 0 && d <= kMaxHeadDim && dv <= kMaxHeadDim;
}

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& mask, const AttentionParams& p) {
  FwdArgs a;
  a.in = make_inputs(q, k, v, mask, p, kOp);
  const AttnInputs& in = a.in;
  check_rows(out, {in.B, in.Hq, in.Tq, in.dv}, q.dtype(), "out", kOp);
  KILN_CHECK(lse.defined() && lse.dtype() == DType::Float32 && lse.is_contiguous() &&
                 lse.sizes() == Shape({in.B, in.Hq, in.Tq}),
             Runtime, "[", kOp,
             "] lse must be a contiguous float32 [B, Hq, Tq] = ", Shape({in.B, in.Hq, in.Tq}),
             " tensor");
  if (static_cast<int64_t>(in.B) * in.Hq * in.Tq == 0) return;
  a.out = out.data_ptr();
  a.so = strides3(out);
  a.vec_out = rows_vectorizable(out, in.dv);
  a.lse = lse.data<float>();
  const int device = q.device().index;
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(device);
  dispatch_attention(q.dtype(), in.d, in.dv, [&](auto mma, auto dim) {
    launch_forward<decltype(mma), decltype(dim)::value>(a, stream);
  });
}

}  // namespace kiln::cuda
