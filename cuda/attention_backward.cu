// kiln's flash attention backward on CUDA: dq, dk, dv (Note [Fused attention] in
// ops/attention.h; the design is Note [Flash attention kernels] in cuda/attention_tile.cuh).
#include <algorithm>

#include "core/error.h"
#include "core/tensor.h"
#include "cuda/attention.h"
#include "cuda/attention_tile.cuh"
#include "cuda/check.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"

namespace kiln::cuda {

namespace {

using namespace flash;

constexpr const char* kOp = "flash_attention_backward";

struct BwdArgs {
  AttnInputs in;
  const void* out = nullptr;
  Strides3 so;
  const void* dout = nullptr;
  Strides3 sdo;
  const float* lse = nullptr;  // [B, Hq, Tq]
  float* di = nullptr;         // [B, Hq, Tq]: rowsum(dout * out)
  float* dq_acc = nullptr;     // [B, Hq, Tq, d]: dq / ds_scale once complete
  float ds_scale = 1.0f;       // dS's factor in dq's products (Note [Flash attention kernels])
  void* dk = nullptr;
  Strides3 sdk;
  void* dv = nullptr;
  Strides3 sdv;
  bool vec_out = false;  // dk and dv rows store as 16-byte chunks
};

// Di for every query row (one warp per row), and the row's dq scratch zeroed.
template <typename E>
__global__ void flash_backward_prep_kernel(const BwdArgs a, int64_t rows) {
  const AttnInputs& in = a.in;
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < rows;
       row += warps) {
    const int i = static_cast<int>(row % in.Tq);
    const int64_t bh = row / in.Tq;
    const int64_t b = bh / in.Hq, h = bh % in.Hq;
    const E* o = static_cast<const E*>(a.out) + b * a.so.b + h * a.so.h + i * a.so.t;
    const E* g = static_cast<const E*>(a.dout) + b * a.sdo.b + h * a.sdo.h + i * a.sdo.t;
    float s = 0.0f;
    for (int c = lane; c < in.dv; c += 32) s += to_float(o[c]) * to_float(g[c]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) a.di[row] = s;
    float* dq = a.dq_acc + row * in.d;
    for (int c = lane; c < in.d; c += 32) dq[c] = 0.0f;
  }
}

// p[0] += x and, where has_y, p[1] += y, atomically. Where p is 8-byte aligned (aligned) sm_90
// adds both in one vector atomic: half the atomics of dq's accumulation, which the L2 serves
// one at a time per address.
__device__ __forceinline__ void add_pair(float* p, float x, float y, bool has_y, bool aligned) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (has_y && aligned) {
    atomicAdd(reinterpret_cast<float2*>(p), make_float2(x, y));
    return;
  }
#endif
  atomicAdd(p, x);
  if (has_y) atomicAdd(p + 1, y);
}

// Dropout keep bits of a warp's transposed weights (S^T layout): bit 4 nt + 2 e + r for query
// row0 + 8 nt + 2 t + e (row0 counts rows of every head: b, h, i) and key key0 + g + 8 r, key0
// even. With Tk even, keys 2c and 2c + 1 of a query share one Philox counter (Note [Fused
// attention]) and sit in lanes g and g + 1 (g even): each lane draws one counter per query,
// for the pair holding its key of row r = g % 2, and hands its partner (lane ^ 4) the other
// decision, half the draws of one per weight.
template <int kQT>
__device__ __forceinline__ uint32_t dropout_keeps_t(const AttnInputs& in, const PhiloxState& rng,
                                                    uint64_t row0, int key0) {
  static_assert(4 * kQT <= 32, "keep bits must fit 32 bits");
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, odd = g & 1;
  auto keep_one = [&](uint64_t L) {
    const auto w = philox4x32(rng.seed, rng.offset + L / 2);
    return (L & 1) == 0 ? philox_keeps(w[0], w[1], in.drop_threshold)
                        : philox_keeps(w[2], w[3], in.drop_threshold);
  };
  uint32_t bits = 0;
#pragma unroll
  for (int nt = 0; nt < kQT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const uint64_t row = (row0 + 8 * nt + 2 * t + e) * in.Tk;
      bool k0, k1;  // keys key0 + g and key0 + g + 8
      if ((in.Tk & 1) == 0) {
        const auto w = philox4x32(rng.seed, rng.offset + (row + key0 + g - odd + 8 * odd) / 2);
        const bool lo = philox_keeps(w[0], w[1], in.drop_threshold);
        const bool hi = philox_keeps(w[2], w[3], in.drop_threshold);
        const bool other = __shfl_xor_sync(0xffffffffu, odd ? lo : hi, 4);
        k0 = odd ? other : lo;
        k1 = odd ? hi : other;
      } else {
        k0 = keep_one(row + key0 + g);
        k1 = keep_one(row + key0 + g + 8);
      }
      bits |= static_cast<uint32_t>(k0) << (4 * nt + 2 * e);
      bits |= static_cast<uint32_t>(k1) << (4 * nt + 2 * e + 1);
    }
  }
  return bits;
}

// Tile shapes per policy and padded head dim: kWarps warps; kBN = 16 kWarps / kSplit keys per
// CTA, kBM query rows per step. A thread holds kD / kSplit / 2 floats each of dk and dv and
// kBM / 2 each of S^T and dP^T, sized to stay in registers (ptxas -v). Float32 needs 8 warps
// on an SM to hide the latency of its 3xTF32 products (Note [Float32 attention on tensor
// cores]): at head dim 64 it takes 32 query rows per step, 79 KiB of shared memory, so two
// CTAs of 4 warps share an SM (64 rows need 120 KiB: one CTA); at head dim 128 one CTA of 8
// warps (128 keys, 217 KiB) fills it, as two CTAs of 4 would need more shared memory.
template <typename M, int kD>
struct BwdConfig {
  static constexpr bool kHalf = sizeof(typename M::Elem) == 2;
  static constexpr int kWarps = !kHalf && kD == 128 ? 8 : 4;
  static constexpr int kSplit = kD == 256 ? 2 : 1;
  static constexpr int kBM = kD == 64 && kHalf ? 64 : 32;
  static constexpr int kBN = 16 * kWarps / kSplit;
  static constexpr size_t kSmem =
      (static_cast<size_t>(2 * kBN + 4 * kBM) * (kD + M::kPadT) + kBN * (kBM + M::kPadT)) *
          sizeof(typename M::Elem) +
      4 * kBM * sizeof(float);
  static_assert(kSmem <= kMaxSmem, "backward tile does not fit shared memory");
};

template <typename M, int kD, int kBM, int kWarps, int kSplit>
__global__ void __launch_bounds__(kWarps * 32) flash_backward_kernel(const BwdArgs a) {
  using E = typename M::Elem;
  using A = typename M::A;
  using B = typename M::B;
  constexpr int kCta = kWarps * 32;  // threads
  constexpr int kBN = 16 * kWarps / kSplit;
  constexpr int kDc = kD / kSplit;  // head dims of dk/dv a warp accumulates
  constexpr int kLd = kD + M::kPadT;
  constexpr int kLdS = kBM + M::kPadT;
  constexpr int kK = M::kK;
  constexpr int kUnrollD = M::kCompact ? 2 : kD / kK;  // loops over the head dim
  constexpr int kQT = kBM / 8;                         // score tiles along the queries
  extern __shared__ __align__(16) unsigned char smem[];
  E* ks = reinterpret_cast<E*>(smem);                         // [kBN][kLd]
  E* vs = ks + kBN * kLd;                                     // [kBN][kLd]
  E* qs = vs + kBN * kLd;                                     // [2][kBM][kLd]
  E* dos = qs + 2 * kBM * kLd;                                // [2][kBM][kLd]
  E* dss = dos + 2 * kBM * kLd;                               // [kBN][kLdS]: dS^T
  float* lse_s = reinterpret_cast<float*>(dss + kBN * kLdS);  // [2][kBM], base 2
  float* di_s = lse_s + 2 * kBM;                              // [2][kBM]
  const AttnInputs& in = a.in;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int krow = 16 * (warp / kSplit);   // the warp's first key in the block
  const int dcol = kDc * (warp % kSplit);  // and its first dk/dv column
  const int n_nblocks = (in.Tk + kBN - 1) / kBN;
  const int nb = static_cast<int>(blockIdx.x % n_nblocks);  // first keys first: most causal work
  const int64_t bhk = blockIdx.x / n_nblocks;
  const int b = static_cast<int>(bhk / in.Hkv), hk = static_cast<int>(bhk % in.Hkv);
  const int n0 = nb * kBN;
  const int groups = in.Hq / in.Hkv;

  const E* k = static_cast<const E*>(in.k) + b * in.sk.b + hk * in.sk.h + n0 * in.sk.t;
  const E* v = static_cast<const E*>(in.v) + b * in.sv.b + hk * in.sv.h + n0 * in.sv.t;
  const int n_rows = min(kBN, in.Tk - n0);
  load_tile<E, kBN, kD, kCta>(ks, kLd, k, in.sk.t, n_rows, in.d, in.vec_in);
  load_tile<E, kBN, kD, kCta>(vs, kLd, v, in.sv.t, n_rows, in.dv, in.vec_in);
  cp_async_commit();

  // Query blocks: every block of every query head of the group; causal skips the rows above
  // the block's first key.
  const int m_first = in.causal ? n0 / kBM * kBM : 0;
  const int per_head = in.Tq > m_first ? (in.Tq - m_first + kBM - 1) / kBM : 0;
  const int n_it = groups * per_head;
  auto head_of = [&](int it) { return hk * groups + it / per_head; };
  auto row_of = [&](int it) { return m_first + it % per_head * kBM; };

  auto load_q = [&](int it, int buf) {
    const int h = head_of(it), m0 = row_of(it), rows = min(kBM, in.Tq - m0);
    const E* q = static_cast<const E*>(in.q) + b * in.sq.b + h * in.sq.h + m0 * in.sq.t;
    const E* dout = static_cast<const E*>(a.dout) + b * a.sdo.b + h * a.sdo.h + m0 * a.sdo.t;
    load_tile<E, kBM, kD, kCta>(qs + buf * kBM * kLd, kLd, q, in.sq.t, rows, in.d, in.vec_in);
    load_tile<E, kBM, kD, kCta>(dos + buf * kBM * kLd, kLd, dout, a.sdo.t, rows, in.dv, in.vec_in);
    // Rows past Tq and all-masked rows (lse -inf) get lse +inf: their P is exp2(-inf) = 0.
    for (int r = threadIdx.x; r < kBM; r += kCta) {
      float l2 = INFINITY, di = 0.0f;
      if (r < rows) {
        const int64_t row = (static_cast<int64_t>(b) * in.Hq + h) * in.Tq + m0 + r;
        const float l = a.lse[row];
        l2 = l == -INFINITY ? INFINITY : l * kLog2e;
        di = a.di[row];
      }
      lse_s[buf * kBM + r] = l2;
      di_s[buf * kBM + r] = di;
    }
  };
  if (n_it > 0) load_q(0, 0);
  cp_async_commit();

  const PhiloxState rng = in.dropout ? dropout_state(in) : PhiloxState{};
  float dk_acc[kDc / 8][4] = {};
  float dv_acc[kDc / 8][4] = {};

  for (int it = 0; it < n_it; ++it) {
    const int buf = it & 1;
    if (it + 1 < n_it) {
      load_q(it + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int h = head_of(it), m0 = row_of(it);
    const E* qt = qs + buf * kBM * kLd;
    const E* dot = dos + buf * kBM * kLd;
    const float* lse_t = lse_s + buf * kBM;
    const float* di_t = di_s + buf * kBM;

    // S^T = K Q^T and dP^T = V dout^T for the warp's 16 keys.
    float st[kQT][4] = {};
    float dpt[kQT][4] = {};
#pragma unroll kUnrollD
    for (int kk = 0; kk < kD / kK; ++kk) {
      if (kk * kK >= in.d) break;
      A ka;
      M::load_a(ka, ks, kLd, krow, kk * kK);
#pragma unroll
      for (int np = 0; np < kBM / 16; ++np) {
        B qb[2];
        M::load_b2(qb, qt, kLd, 16 * np, kk * kK);
        M::mma(st[2 * np], ka, qb[0]);
        M::mma(st[2 * np + 1], ka, qb[1]);
      }
    }
#pragma unroll kUnrollD
    for (int kk = 0; kk < kD / kK; ++kk) {
      if (kk * kK >= in.dv) break;
      A va;
      M::load_a(va, vs, kLd, krow, kk * kK);
#pragma unroll
      for (int np = 0; np < kBM / 16; ++np) {
        B ob[2];
        M::load_b2(ob, dot, kLd, 16 * np, kk * kK);
        M::mma(dpt[2 * np], va, ob[0]);
        M::mma(dpt[2 * np + 1], va, ob[1]);
      }
    }

    // P^T = exp2(S^T - lse) masked; with dropout Z (0 or 1 / (1 - p)): st <- P^T Z (for dv),
    // dpt <- dS^T = P^T (dP^T Z - Di) (for dk and dq).
    const int64_t mask_head = b * in.smask[0] + h * in.smask[1];
    const uint64_t drop_head = (static_cast<uint64_t>(b) * in.Hq + h) * in.Tq;
    const uint32_t keeps =
        in.dropout ? dropout_keeps_t<kQT>(in, rng, drop_head + m0, n0 + krow) : ~0u;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int j = n0 + krow + g + 8 * r;
#pragma unroll
      for (int nt = 0; nt < kQT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int il = 8 * nt + 2 * t + e, i = m0 + il;
          const float x = score2<E>(in, mask_head + i * in.smask[2], st[nt][2 * r + e], i, j);
          const float p = exp2f(x - lse_t[il]);
          float dp = dpt[nt][2 * r + e];
          float pz = p;
          if (in.dropout) {
            const float z = (keeps >> (4 * nt + 2 * e + r)) & 1u ? in.drop_scale : 0.0f;
            pz = p * z;
            dp *= z;
          }
          st[nt][2 * r + e] = pz;
          dpt[nt][2 * r + e] = p * (dp - di_t[il]);
        }
      }
    }

    // dv += (P Z)^T dout and dk += dS^T q on the warp's dk/dv columns.
#pragma unroll
    for (int kk = 0; kk < kBM / kK; ++kk) {
      A pa, da;
      M::a_from_c(pa, st, kk);
      M::a_from_c(da, dpt, kk);
#pragma unroll
      for (int np = 0; np < kDc / 16; ++np) {
        const int col = dcol + 16 * np;
        B xb[2];
        if (col < in.dv) {
          M::load_b2_t(xb, dot, kLd, kk * kK, col);
          M::mma(dv_acc[2 * np], pa, xb[0]);
          M::mma(dv_acc[2 * np + 1], pa, xb[1]);
        }
        if (col < in.d) {
          M::load_b2_t(xb, qt, kLd, kk * kK, col);
          M::mma(dk_acc[2 * np], da, xb[0]);
          M::mma(dk_acc[2 * np + 1], da, xb[1]);
        }
      }
    }

    // dq += dS K through shared memory: dS^T rows are spread over the warps.
    if (dcol == 0) store_c(dss, kLdS, krow, 0, dpt, a.ds_scale);
    __syncthreads();
    float* dq_rows = a.dq_acc + ((static_cast<int64_t>(b) * in.Hq + h) * in.Tq + m0) * in.d;
    constexpr int kUnits = kBM / 16 * (kD / 16);  // (16 query rows) x (16 head dims)
    for (int u = warp; u < kUnits; u += kWarps) {
      const int mt = u % (kBM / 16), col = 16 * (u / (kBM / 16));
      if (col >= in.d) continue;
      float c[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < kBN / kK; ++kk) {
        A sa;
        B kb[2];
        M::load_a_t(sa, dss, kLdS, 16 * mt, kk * kK);
        M::load_b2_t(kb, ks, kLd, kk * kK, col);
        M::mma(c[0], sa, kb[0]);
        M::mma(c[1], sa, kb[1]);
      }
#pragma unroll
      for (int jn = 0; jn < 2; ++jn) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int il = 16 * mt + g + 8 * r, cc = col + 8 * jn + 2 * t;
          if (m0 + il >= in.Tq || cc >= in.d) continue;
          add_pair(dq_rows + static_cast<int64_t>(il) * in.d + cc, c[jn][2 * r],
                   c[jn][2 * r + 1], cc + 1 < in.d, (in.d & 1) == 0);
        }
      }
    }
    __syncthreads();  // dS^T and this step's buffers are rewritten next step
  }

  // Stage dk (scaled) and dv through the K and V tiles and store them.
  cp_async_wait<0>();  // nothing left in flight when no step ran
  __syncthreads();
  store_c(ks, kLd, krow, dcol, dk_acc, in.scale);
  store_c(vs, kLd, krow, dcol, dv_acc, 1.0f);
  __syncthreads();
  E* dk = static_cast<E*>(a.dk) + b * a.sdk.b + hk * a.sdk.h + n0 * a.sdk.t;
  E* dv = static_cast<E*>(a.dv) + b * a.sdv.b + hk * a.sdv.h + n0 * a.sdv.t;
  store_tile<E, kBN, kD, kCta>(dk, a.sdk.t, ks, kLd, n_rows, in.d, a.vec_out);
  store_tile<E, kBN, kD, kCta>(dv, a.sdv.t, vs, kLd, n_rows, in.dv, a.vec_out);
}

// dq = scale * scratch, in dq's dtype and strides.
template <typename E>
__global__ void flash_backward_dq_kernel(E* dq, Strides3 sdq, const float* acc, int Hq, int Tq,
                                         int d, float scale, int64_t n) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(idx % d);
    const int64_t row = idx / d;
    const int i = static_cast<int>(row % Tq);
    const int64_t bh = row / Tq;
    dq[bh / Hq * sdq.b + bh % Hq * sdq.h + i * sdq.t + c] = from_float<E>(acc[idx] * scale);
  }
}

template <typename M, int kD>
void launch_backward(const BwdArgs& a, cudaStream_t stream) {
  using C = BwdConfig<M, kD>;
  auto kernel = flash_backward_kernel<M, kD, C::kBM, C::kWarps, C::kSplit>;
  allow_smem(kernel, C::kSmem, kOp);
  const int64_t blocks = static_cast<int64_t>((a.in.Tk + C::kBN - 1) / C::kBN) * a.in.B * a.in.Hkv;
  KILN_CHECK(blocks < (int64_t{1} << 31), Runtime, "[", kOp, "] too many key blocks: ", blocks);
  kernel<<<static_cast<unsigned>(blocks), C::kWarps * 32, C::kSmem, stream>>>(a);
  KILN_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse, const Tensor& mask,
                              const AttentionParams& p) {
  BwdArgs a;
  a.in = make_inputs(q, k, v, mask, p, kOp);
  AttnInputs& in = a.in;
  const DType dtype = q.dtype();
  const Shape out_shape{in.B, in.Hq, in.Tq, in.dv};
  check_rows(out, out_shape, dtype, "out", kOp);
  check_rows(dout, out_shape, dtype, "dout", kOp);
  check_rows(dq, q.sizes(), dtype, "dq", kOp);
  check_rows(dk, k.sizes(), dtype, "dk", kOp);
  check_rows(dv, v.sizes(), dtype, "dv", kOp);
  KILN_CHECK(lse.defined() && lse.dtype() == DType::Float32 && lse.is_contiguous() &&
                 lse.sizes() == Shape({in.B, in.Hq, in.Tq}),
             Runtime, "[", kOp,
             "] lse must be a contiguous float32 [B, Hq, Tq] = ", Shape({in.B, in.Hq, in.Tq}),
             " tensor");
  const int64_t q_rows = static_cast<int64_t>(in.B) * in.Hq * in.Tq;
  const int64_t kv_rows = static_cast<int64_t>(in.B) * in.Hkv * in.Tk;
  if (q_rows == 0 && kv_rows == 0) return;
  // dout rows are read alongside q's by the same tile copies.
  in.vec_in = in.vec_in && rows_vectorizable(dout, in.dv);
  a.out = out.data_ptr();
  a.so = strides3(out);
  a.dout = dout.data_ptr();
  a.sdo = strides3(dout);
  a.lse = lse.data<float>();
  a.dk = dk.data_ptr();
  a.sdk = strides3(dk);
  a.dv = dv.data_ptr();
  a.sdv = strides3(dv);
  a.vec_out = rows_vectorizable(dk, in.d) && rows_vectorizable(dv, in.dv);

  const Device device = q.device();
  DeviceGuard guard(device.index);
  const cudaStream_t stream = stream_of(device.index);
  // Scratch from the caching allocator on this stream: freed when these handles go, reused
  // only by work queued after this op's kernels. A contiguous float32 dq is laid out as the
  // dq scratch is: it accumulates in place, with the scale folded into dS.
  const bool dq_in_place = dtype == DType::Float32 && dq.is_contiguous();
  Tensor di = make_tensor({q_rows}, DType::Float32, device);
  Tensor dq_acc = dq_in_place ? dq : make_tensor({q_rows * in.d}, DType::Float32, device);
  a.di = di.data<float>();
  a.dq_acc = dq_acc.data<float>();
  a.ds_scale = dq_in_place ? in.scale : 1.0f;
  dispatch_attention(dtype, in.d, in.dv, [&](auto mma, auto dim) {
    using M = decltype(mma);
    using E = typename M::Elem;
    if (q_rows > 0) {
      constexpr int kRowsPerBlock = 8;
      const int64_t blocks =
          std::min<int64_t>((q_rows + kRowsPerBlock - 1) / kRowsPerBlock, int64_t{1} << 20);
      flash_backward_prep_kernel<E>
          <<<static_cast<unsigned>(blocks), 32 * kRowsPerBlock, 0, stream>>>(a, q_rows);
      KILN_CUDA_CHECK_LAUNCH(kOp);
    }
    if (kv_rows > 0) launch_backward<M, decltype(dim)::value>(a, stream);
    const int64_t n = q_rows * in.d;
    if (n > 0 && !dq_in_place) {
      flash_backward_dq_kernel<E><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<E*>(dq.data_ptr()), strides3(dq), a.dq_acc, in.Hq, in.Tq, in.d, in.scale, n);
      KILN_CUDA_CHECK_LAUNCH(kOp);
    }
  });
}

}  // namespace kiln::cuda
