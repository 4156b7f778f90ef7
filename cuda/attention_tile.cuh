// Device pieces shared by kiln's flash attention kernels (attention_forward.cu and
// attention_backward.cu): the kernel arguments, warp-level tensor-core MMA policies with their
// shared-memory fragment loaders, global <-> shared tile copies, masking and dropout.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "core/flags.h"
#include "core/tensor.h"
#include "cuda/check.h"
#include "ops/attention.h"
#include "ops/philox.h"
#include "ops/philox_capture.h"

namespace kiln::cuda::flash {

// Note [Flash attention kernels]
// FlashAttention-2 (Dao, 2023) on mma.sync tensor-core instructions (sm_80+), written for
// Note [Fused attention] (ops/attention.h). Every matrix product is a warp's: A fragments of
// 16 rows, B fragments of 8 columns, float32 accumulators in the PTX ISA's documented
// register layouts (thread lane = 4 g + t holds rows g and g + 8, columns 2t and 2t + 1 of
// each 8-column accumulator tile), operands read from shared memory with ldmatrix (half
// types) or plain loads (float32).
//
// Forward: one CTA per (b, h, block of kBM query rows); each warp owns kMT 16-row slices of
// the block. Key/value tiles of kBN rows are copied to shared memory with cp.async, double
// buffered, so the next tile's copy overlaps this tile's math. Per tile a warp computes its
// scores S = Q K^T in registers, masks them (bounds, causal, mask tensor), updates the
// running row max and sum (online softmax in base 2), and multiplies P = exp2(S - max) by V
// with P taken straight from the score accumulators as the A operand (the accumulator layout
// of two adjacent 8-column tiles is the A layout of one 16-deep k step). Causal blocks stop at
// the last key tile a row of the block can see. out is staged through shared memory and
// stored in q's dtype; lse in float32.
//
// Backward: Di = rowsum(dout * out) first (which also zeroes the float32 dq scratch), then one
// CTA per (b, kv head, block of kBN keys) looping over every query block of every query head
// of the group (so dk and dv need no atomics). Each warp owns 16 keys: it computes the
// transposed scores S^T = K Q^T and dP^T = V dout^T in registers, P^T and dS^T there, and
// accumulates dv += P^T dout and dk += dS^T q with the registers as A operands. dS^T goes to
// shared memory for dq += dS K, which the warps split and add to the scratch with float32
// atomics; a last kernel scales the scratch into dq's dtype and strides. A contiguous float32
// dq is its own scratch: dS^T goes to shared memory times the softmax scale, so the sums are
// dq itself and the last kernel does not run. For head dims above
// 128 the dk/dv accumulators would not fit a warp's registers, so kSplit warps share 16 keys,
// each accumulating a 1/kSplit slice of the head dim (recomputing S^T and dP^T).
//
// Head dims are padded to the kernel's kD (64, 128 or 256) with zero-filled shared memory,
// and tiles past Tq or Tk are zero-filled too; score columns past Tk are -inf. A row whose
// every key is masked keeps max -inf, its exponentials are taken against 0 (all 0), and it
// ends with sum 0: lse -inf and output 0; the backward treats lse -inf as +inf, so its P and
// gradients are 0.

// Note [Float32 attention on tensor cores]
// PyTorch's memory-efficient kernel (its fp32 SDPA path on sm_80+) runs float32 on tensor
// cores whatever allow_tf32 says: CUTLASS's OpMultiplyAddFastF32, i.e. "3xTF32": each operand
// x = big + small with big = tf32(x) and small = tf32(x - big), and a*b ~ big*big + big*small
// + small*big, which gives about float32 accuracy (relative error ~1e-6) at tensor-core speed.
// kiln does the same when backend_flags().matmul_allow_tf32 is off, and one plain TF32 product
// (10-bit mantissas, as TF32 matmuls) when it is on. Plain float32 FMA on CUDA cores would
// need a second kernel design at a fraction of the speed, for no accuracy a user can see.
//
// Speed. A 3xTF32 product costs three mma.sync and a split of each operand it loads, so the
// float32 kernels issue several times the instructions of the half types per product and
// stall on the products' latency. Measured on the H200 against PyTorch's memory-efficient
// kernel (issue 13), what mattered was, in order: warps per SM (the backward at head dim 64
// had one CTA of 4 warps per SM, shared memory bound; 8 warps halved its time), the split
// (cvt.rna is 4 instructions, round_tf32 is 2, same result), and letting one head-dim step's
// loads overlap the previous step's products (loops unrolled by two). Row pads free of bank
// conflicts (kPad / kPadT), one Philox draw per pair of weights in the backward and float2
// atomics for dq trim the rest. fp32 fwd+bwd at (B, H, T, D) = (64, 6, 256, 64) went from
// 1.27 ms to 0.63 ms (PyTorch 0.65 ms); at head dim 128 kiln stayed behind (1.56x at
// (8, 16, 2048, 128), before the backward moved to 8 warps there).

constexpr int kMaxHeadDim = 256;
// Shared memory one CTA may use on sm_90 (and sm_80).
constexpr size_t kMaxSmem = 227 * 1024;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

enum MaskKind : int { kNoMask = 0, kBoolMask = 1, kAddMask = 2 };

// Element strides of a [B, H, T, D] view's first three dims (the last dim is unit-stride).
struct Strides3 {
  int64_t b = 0, h = 0, t = 0;
};

// What both kernels read.
struct AttnInputs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  Strides3 sq, sk, sv;
  const void* mask = nullptr;  // bool, or q's dtype (added to the scores)
  int mask_kind = kNoMask;
  int64_t smask[4] = {0, 0, 0, 0};
  int B = 0, Hq = 0, Hkv = 0, Tq = 0, Tk = 0, d = 0, dv = 0;
  float scale = 1.0f;
  float scale_log2 = kLog2e;  // scale * log2(e): scores are kept in base 2
  bool causal = false;
  bool vec_in = false;  // q, k, v (and dout) rows copy as 16-byte chunks
  // Dropout keeps an element iff the 53 bits of its Philox word pair are >= drop_threshold
  // (the same test as philox_unit(...) >= dropout_p, in integers).
  bool dropout = false;
  uint64_t seed = 0, offset = 0, drop_threshold = 0;
  float drop_scale = 1.0f;  // 1 / (1 - p); 0 when p == 1 (every weight dropped)
};

// --- scalar conversions -------------------------------------------------------

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename E>
__device__ __forceinline__ E from_float(float x) {
  if constexpr (std::is_same_v<E, __half>) {
    return __float2half_rn(x);
  } else if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return x;
  }
}

// Two floats as one 32-bit register of two half-type values (lo in the low 16 bits).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Elements (col, col + 1) of a shared tile row; col is even, so the pair is aligned.
template <typename E>
__device__ __forceinline__ void store_pair(E* p, float x, float y) {
  if constexpr (std::is_same_v<E, float>) {
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
  } else {
    *reinterpret_cast<uint32_t*>(p) = pack2<E>(x, y);
  }
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// --- warp-level MMA policies --------------------------------------------------
// Each policy gives a warp's 16 x kK A fragment and pairs of kK x 8 B fragments, loaded from
// a row-major shared tile `s` of row stride `ld` (elements), in two orientations:
//   load_a:    A[m][k] = s[row0 + m][k0 + k]       load_a_t:  A[m][k] = s[k0 + k][row0 + m]
//   load_b2:   B[k][n] = s[n0 + n][k0 + k]         load_b2_t: B[k][n] = s[k0 + k][n0 + n]
// (b[0] covers columns n0..n0+7, b[1] n0+8..n0+15), the A fragment of k step `ks` of a
// product whose A is a warp's float32 accumulator tiles (a_from_c), and c += a * b.
// kPad / kPadT: row pads of tiles read by load_a / load_b2 only, and of tiles also (or only)
// read by load_a_t / load_b2_t.
// kCompact: loops over the head dim that index no register array unroll by two only.

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// float16 / bfloat16: mma.m16n8k16 with float32 accumulators. An ldmatrix.x4 reads four 8x8
// matrices, lanes 8i..8i+7 giving the row addresses of matrix i; lane 4g+t receives row g,
// columns 2t, 2t+1 of each (of the transpose with .trans): the fragment layouts of the A
// (16x16: rows g / g+8, columns 2t / 2t+8) and B (16x8: k rows 2t / 2t+8, column g) operands.
template <typename T>
struct HalfMma {
  using Elem = T;
  static constexpr int kK = 16;
  static constexpr int kPad = 8;  // 16 bytes per row: ldmatrix rows fall in distinct banks
  static constexpr int kPadT = kPad;
  static constexpr bool kCompact = false;
  struct A {
    uint32_t r[4];
  };
  struct B {
    uint32_t r[2];
  };

  static __device__ __forceinline__ void load_a(A& a, const T* s, int ld, int row0, int k0) {
    const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
    ldmatrix_x4(a.r, s + (row0 + r + 8 * (mi & 1)) * ld + k0 + 8 * (mi >> 1));
  }
  static __device__ __forceinline__ void load_a_t(A& a, const T* s, int ld, int row0, int k0) {
    const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
    ldmatrix_x4_trans(a.r, s + (k0 + r + 8 * (mi >> 1)) * ld + row0 + 8 * (mi & 1));
  }
  static __device__ __forceinline__ void load_b2(B (&b)[2], const T* s, int ld, int n0, int k0) {
    const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
    uint32_t x[4];
    ldmatrix_x4(x, s + (n0 + r + 8 * (mi >> 1)) * ld + k0 + 8 * (mi & 1));
    b[0].r[0] = x[0];
    b[0].r[1] = x[1];
    b[1].r[0] = x[2];
    b[1].r[1] = x[3];
  }
  static __device__ __forceinline__ void load_b2_t(B (&b)[2], const T* s, int ld, int k0, int n0) {
    const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
    uint32_t x[4];
    ldmatrix_x4_trans(x, s + (k0 + r + 8 * (mi & 1)) * ld + n0 + 8 * (mi >> 1));
    b[0].r[0] = x[0];
    b[0].r[1] = x[1];
    b[1].r[0] = x[2];
    b[1].r[1] = x[3];
  }
  // k step ks spans accumulator tiles 2ks (a0..a3) and 2ks + 1 (a4..a7).
  template <int N>
  static __device__ __forceinline__ void a_from_c(A& a, const float (&c)[N][4], int ks) {
    a.r[0] = pack2<T>(c[2 * ks][0], c[2 * ks][1]);
    a.r[1] = pack2<T>(c[2 * ks][2], c[2 * ks][3]);
    a.r[2] = pack2<T>(c[2 * ks + 1][0], c[2 * ks + 1][1]);
    a.r[3] = pack2<T>(c[2 * ks + 1][2], c[2 * ks + 1][3]);
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const A& a, const B& b) {
    if constexpr (std::is_same_v<T, __half>) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
    } else {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
    }
  }
};

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// cvt.rna.tf32.f32 in two integer ops: adding half a TF32 ulp to the magnitude bits and
// clearing the 13 low ones rounds to nearest, ties away from zero, exactly as cvt.rna does for
// every finite x (an infinity stays itself). cvt.rna compiles to four instructions (it guards
// infinities and NaNs with a compare and a select), and 3xTF32 splits every operand it loads.
__device__ __forceinline__ uint32_t round_tf32(float x) {
  return (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
}

// float32: mma.m16n8k8.tf32 (Note [Float32 attention on tensor cores]); k3x adds the two
// correction products. The PTX layouts are A (16x8): a0/a1 rows g/g+8 at column t, a2/a3 at
// column t + 4; B (8x8): b0/b1 k rows t / t + 4, column g. A product sums over k in any order,
// so every fragment here maps register column t to k = 2t and t + 4 to k = 2t + 1: a thread's
// two k values are adjacent (one 8-byte load), and the A fragment of a k step is exactly one
// accumulator tile (columns 2t, 2t + 1 of rows g, g + 8).
template <bool k3x>
struct Tf32Mma {
  using Elem = float;
  static constexpr int kK = 8;
  // Row pads that keep a warp's shared-memory reads free of bank conflicts: rows read along
  // k with 8-byte loads (load_a, load_b2: lanes g = 0..3 of a half warp on rows 8 words
  // apart) want a row stride of 8 mod 32 words, tiles read across rows (load_a_t, load_b2_t:
  // rows 2t and 2t + 1, scalar loads) one of 4 mod 32. A tile read both ways takes kPadT.
  static constexpr int kPad = 8;
  static constexpr int kPadT = 4;
  // Three products per step make fully unrolled head-dim loops slow to compile (minutes of
  // ptxas per kernel): those loops unroll by two, enough for one step's shared-memory loads
  // to overlap the other's products.
  static constexpr bool kCompact = k3x;
  struct A {
    uint32_t big[4], small[4];
  };
  struct B {
    uint32_t big[2], small[2];
  };

  static __device__ __forceinline__ void split(float x, uint32_t& big, uint32_t& small) {
    if constexpr (k3x) {
      big = round_tf32(x);
      small = round_tf32(x - __uint_as_float(big));
    } else {
      big = to_tf32(x);
      small = 0u;
    }
  }
  static __device__ __forceinline__ void set_a(A& a, float a0, float a1, float a2, float a3) {
    split(a0, a.big[0], a.small[0]);
    split(a1, a.big[1], a.small[1]);
    split(a2, a.big[2], a.small[2]);
    split(a3, a.big[3], a.small[3]);
  }
  static __device__ __forceinline__ void load_a(A& a, const float* s, int ld, int row0, int k0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float2 lo = *reinterpret_cast<const float2*>(s + (row0 + g) * ld + k0 + 2 * t);
    const float2 hi = *reinterpret_cast<const float2*>(s + (row0 + g + 8) * ld + k0 + 2 * t);
    set_a(a, lo.x, hi.x, lo.y, hi.y);
  }
  static __device__ __forceinline__ void load_a_t(A& a, const float* s, int ld, int row0, int k0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float* p = s + (k0 + 2 * t) * ld + row0 + g;
    set_a(a, p[0], p[8], p[ld], p[ld + 8]);
  }
  static __device__ __forceinline__ void load_b2(B (&b)[2], const float* s, int ld, int n0,
                                                 int k0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float2 x = *reinterpret_cast<const float2*>(s + (n0 + 8 * j + g) * ld + k0 + 2 * t);
      split(x.x, b[j].big[0], b[j].small[0]);
      split(x.y, b[j].big[1], b[j].small[1]);
    }
  }
  static __device__ __forceinline__ void load_b2_t(B (&b)[2], const float* s, int ld, int k0,
                                                   int n0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float* p = s + (k0 + 2 * t) * ld + n0 + g;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      split(p[8 * j], b[j].big[0], b[j].small[0]);
      split(p[ld + 8 * j], b[j].big[1], b[j].small[1]);
    }
  }
  template <int N>
  static __device__ __forceinline__ void a_from_c(A& a, const float (&c)[N][4], int ks) {
    set_a(a, c[ks][0], c[ks][2], c[ks][1], c[ks][3]);
  }
  static __device__ __forceinline__ void mma1(float (&c)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const A& a, const B& b) {
    if constexpr (k3x) {
      mma1(c, a.small, b.big);
      mma1(c, a.big, b.small);
    }
    mma1(c, a.big, b.big);
  }
};

// --- global <-> shared tiles ----------------------------------------------------

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)),
               "l"(__cvta_generic_to_global(gmem)));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Shared tile [kRows][kCols] (row stride ld) <- rows [0, rows) and columns [0, cols) of a
// global tile whose rows are src_ld apart; everything else 0. With vec (16-byte aligned rows,
// cols a multiple of the chunk) whole 16-byte chunks are copied asynchronously (cp.async: the
// caller commits and waits), else element by element.
template <typename E, int kRows, int kCols, int kThreads>
__device__ __forceinline__ void load_tile(E* dst, int ld, const E* src, int64_t src_ld, int rows,
                                          int cols, bool vec) {
  constexpr int kVec = 16 / sizeof(E);
  constexpr int kChunks = kCols / kVec;
  static_assert(kCols % kVec == 0, "tile columns must be whole 16-byte chunks");
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * kVec;
    E* d = dst + r * ld + c;
    if (r < rows && c < cols) {
      const E* s = src + r * src_ld + c;
      if (vec) {
        cp_async16(d, s);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) d[e] = c + e < cols ? s[e] : from_float<E>(0.0f);
      }
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// Global rows [0, rows), columns [0, cols) <- a shared tile (row stride ld).
template <typename E, int kRows, int kCols, int kThreads>
__device__ __forceinline__ void store_tile(E* dst, int64_t dst_ld, const E* src, int ld, int rows,
                                           int cols, bool vec) {
  constexpr int kVec = 16 / sizeof(E);
  constexpr int kChunks = kCols / kVec;
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * kVec;
    if (r >= rows || c >= cols) continue;
    E* d = dst + r * dst_ld + c;
    const E* s = src + r * ld + c;
    if (vec) {
      *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(s);
    } else {
      for (int e = 0; e < kVec && c + e < cols; ++e) d[e] = s[e];
    }
  }
}

// A warp's accumulator tiles c[nt] (rows row0 + g and row0 + g + 8, columns col0 + 8 nt + 2t
// and + 1) times mul, into a shared tile of E.
template <typename E, int N>
__device__ __forceinline__ void store_c(E* s, int ld, int row0, int col0, const float (&c)[N][4],
                                        float mul) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < N; ++nt) {
    E* p = s + (row0 + g) * ld + col0 + 8 * nt + 2 * t;
    store_pair(p, c[nt][0] * mul, c[nt][1] * mul);
    store_pair(p + 8 * ld, c[nt][2] * mul, c[nt][3] * mul);
  }
}

// --- scores ---------------------------------------------------------------------

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The base-2 score of query i (row offset mask_row into the mask) and key j from the raw
// product qk, or -inf where the key is dropped: past Tk, above the causal diagonal, or masked.
// The mask is read only for i < Tq (rows past Tq are padding).
template <typename E>
__device__ __forceinline__ float score2(const AttnInputs& a, int64_t mask_row, float qk, int i,
                                        int j) {
  float x = qk * a.scale_log2;
  bool keep = j < a.Tk && (!a.causal || j <= i);
  if (a.mask_kind != kNoMask && keep && i < a.Tq) {
    const int64_t off = mask_row + static_cast<int64_t>(j) * a.smask[3];
    if (a.mask_kind == kBoolMask) {
      keep = static_cast<const uint8_t*>(a.mask)[off] != 0;
    } else {
      x += to_float(static_cast<const E*>(a.mask)[off]) * kLog2e;
    }
  }
  return keep ? x : -INFINITY;
}

__device__ __forceinline__ bool philox_keeps(uint32_t hi, uint32_t lo, uint64_t threshold) {
  return (((static_cast<uint64_t>(hi) << 32) | lo) >> 11) >= threshold;
}

// The kernel's absolute Philox state (relative in a CUDA graph: one device read, so a kernel
// resolves it once, not per draw).
__device__ __forceinline__ PhiloxState dropout_state(const AttnInputs& a) {
  return philox_resolve({a.seed, a.offset});
}

// Dropout keep decisions of the weights with row-major indices L and L + 1 in
// [B, Hq, Tq, Tk] (Note [Fused attention]: counter offset + L / 2, word pair L % 2), under the
// resolved state s.
__device__ __forceinline__ void dropout_pair(const AttnInputs& a, const PhiloxState& s, uint64_t L,
                                             bool& keep0, bool& keep1) {
  const auto w = philox4x32(s.seed, s.offset + L / 2);
  if ((L & 1) == 0) {
    keep0 = philox_keeps(w[0], w[1], a.drop_threshold);
    keep1 = philox_keeps(w[2], w[3], a.drop_threshold);
  } else {
    keep0 = philox_keeps(w[2], w[3], a.drop_threshold);
    const auto w1 = philox4x32(s.seed, s.offset + L / 2 + 1);
    keep1 = philox_keeps(w1[0], w1[1], a.drop_threshold);
  }
}

// --- host side -------------------------------------------------------------------

inline Strides3 strides3(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// Whether every row of a [B, H, T, cols] view starts 16-byte aligned and holds whole 16-byte
// chunks, so tiles copy as chunks (a dim of size 1 has no stride that matters).
inline bool rows_vectorizable(const Tensor& t, int64_t cols) {
  const int64_t vec = 16 / static_cast<int64_t>(t.itemsize());
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0 || cols % vec != 0) return false;
  for (int dim = 0; dim < 3; ++dim)
    if (t.size(dim) > 1 && t.stride(dim) % vec != 0) return false;
  return true;
}

inline void check_rows(const Tensor& t, const Shape& shape, DType dtype, const char* name,
                       const char* op) {
  KILN_CHECK(t.defined() && t.sizes() == shape && t.dtype() == dtype, Runtime, "[", op, "] ", name,
             " must be ", dtype, " of shape ", shape, ", got ", t.defined() ? t.dtype() : dtype,
             " ", t.defined() ? t.sizes() : Shape{});
  KILN_CHECK(t.size(3) <= 1 || t.stride(3) == 1, Runtime, "[", op, "] ", name,
             " needs a unit stride in its last dim, got strides ", t.strides());
}

// The checked inputs of both kernels (Note [Fused attention]).
inline AttnInputs make_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                              const AttentionParams& p, const char* op) {
  KILN_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, Runtime, "[", op,
             "] q, k, v must be 4-D, got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  const DType dtype = q.dtype();
  KILN_CHECK(dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float32,
             NotImplemented, "[", op, "] takes float16, bfloat16 and float32, got ", dtype,
             " (float64 runs the math path)");
  AttnInputs a;
  const int64_t B = q.size(0), Hq = q.size(1), Tq = q.size(2), d = q.size(3);
  const int64_t Hkv = k.size(1), Tk = k.size(2), dv = v.size(3);
  check_rows(q, q.sizes(), dtype, "q", op);
  check_rows(k, {B, Hkv, Tk, d}, dtype, "k", op);
  check_rows(v, {B, Hkv, Tk, dv}, dtype, "v", op);
  KILN_CHECK(d <= kMaxHeadDim && dv <= kMaxHeadDim, NotImplemented, "[", op, "] head dims up to ",
             kMaxHeadDim, ", got q/k ", d, " and v ", dv);
  KILN_CHECK((Hkv == 0 && Hq == 0) || (Hkv > 0 && Hq % Hkv == 0), Runtime, "[", op,
             "] query heads (", Hq, ") must be a multiple of key/value heads (", Hkv, ")");
  constexpr int64_t kIntMax = 0x7fffffff;
  KILN_CHECK(B * Hq <= kIntMax && B * Hkv <= kIntMax && Tq <= kIntMax && Tk <= kIntMax, Runtime,
             "[", op, "] sizes too large: q ", q.sizes(), ", k ", k.sizes());
  a.q = q.data_ptr();
  a.k = k.data_ptr();
  a.v = v.data_ptr();
  a.sq = strides3(q);
  a.sk = strides3(k);
  a.sv = strides3(v);
  a.B = static_cast<int>(B);
  a.Hq = static_cast<int>(Hq);
  a.Hkv = static_cast<int>(Hkv);
  a.Tq = static_cast<int>(Tq);
  a.Tk = static_cast<int>(Tk);
  a.d = static_cast<int>(d);
  a.dv = static_cast<int>(dv);
  if (mask.defined()) {
    KILN_CHECK(mask.dim() == 4 && mask.sizes() == Shape({B, Hq, Tq, Tk}), Runtime, "[", op,
               "] mask must be a [B, Hq, Tq, Tk] = ", Shape({B, Hq, Tq, Tk}), " view, got ",
               mask.sizes());
    KILN_CHECK(mask.dtype() == DType::Bool || mask.dtype() == dtype, Runtime, "[", op,
               "] mask must be bool or ", dtype, ", got ", mask.dtype());
    a.mask = mask.data_ptr();
    a.mask_kind = mask.dtype() == DType::Bool ? kBoolMask : kAddMask;
    for (int i = 0; i < 4; ++i) a.smask[i] = mask.stride(i);
  }
  a.scale = static_cast<float>(p.scale);
  a.scale_log2 = static_cast<float>(p.scale * 1.4426950408889634);
  a.causal = p.is_causal;
  a.vec_in = rows_vectorizable(q, d) && rows_vectorizable(k, d) && rows_vectorizable(v, dv);
  if (p.dropout_p > 0.0) {
    a.dropout = true;
    a.seed = p.rng.seed;
    a.offset = p.rng.offset;
    // philox_unit(w) = bits * 2^-53 >= p  <=>  bits >= ceil(p * 2^53) (all exact in double).
    a.drop_threshold = static_cast<uint64_t>(std::ceil(std::ldexp(p.dropout_p, 53)));
    a.drop_scale = p.dropout_p < 1.0 ? static_cast<float>(1.0 / (1.0 - p.dropout_p)) : 0.0f;
  }
  return a;
}

// Calls f(M{}, std::integral_constant<int, kD>{}) for the MMA policy of the dtype (float32:
// Note [Float32 attention on tensor cores]) and the smallest of 64, 128, 256 that holds d and dv.
template <typename F>
void dispatch_attention(DType dtype, int64_t d, int64_t dv, F&& f) {
  const int64_t dmax = d > dv ? d : dv;
  auto with_dim = [&](auto mma) {
    if (dmax <= 64) {
      f(mma, std::integral_constant<int, 64>{});
    } else if (dmax <= 128) {
      f(mma, std::integral_constant<int, 128>{});
    } else {
      f(mma, std::integral_constant<int, 256>{});
    }
  };
  if (dtype == DType::Float16) {
    with_dim(HalfMma<__half>{});
  } else if (dtype == DType::BFloat16) {
    with_dim(HalfMma<__nv_bfloat16>{});
  } else if (backend_flags().matmul_allow_tf32) {
    with_dim(Tf32Mma<false>{});
  } else {
    with_dim(Tf32Mma<true>{});
  }
}

// Dynamic shared memory above 48 KiB must be opted into per kernel.
template <typename Kernel>
void allow_smem(Kernel kernel, size_t bytes, const char* op) {
  KILN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)),
                  op);
}

}  // namespace kiln::cuda::flash
