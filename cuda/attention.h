// kiln's own fused (FlashAttention-2 style) CUDA attention kernels, the implementation behind
// AttentionImpl::Kiln on CUDA. Both follow Note [Fused attention] in ops/attention.h exactly
// (strided q/k/v/out, grouped-query heads, causal, bool or additive masks of any strides,
// all-masked rows, dropout drawing the Note's Philox mapping). The design is in
// Note [Flash attention kernels] (cuda/attention_tile.cuh).
//
// Inputs are float16, bfloat16 or float32 with head dims up to 256 (flash_attention_supports);
// float64 is not taken: the front end routes it to the math path. Float32 runs on TF32 tensor
// cores when backend_flags().matmul_allow_tf32 is set, else on 3xTF32 (fp32 accuracy,
// Note [Float32 attention on tensor cores]).
#pragma once

#include "core/tensor.h"
#include "ops/attention.h"

namespace kiln::cuda {

// Whether the kernels take inputs of q's dtype and these head dims (q/k last dim d, v's dv).
bool flash_attention_supports(DType dtype, int64_t d, int64_t dv);

// out [B, Hq, Tq, Dv] and lse [B, Hq, Tq] (float32, contiguous) from q, k, v and an optional
// mask, as the Note says. Launches on the current stream of q's device; no host sync.
void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& mask, const AttentionParams& p);

// dq, dk, dv (each fully written) from dout and the forward's out and lse, with the same mask
// and params (the same rng redraws the dropout mask). dq accumulates in a float32 scratch
// [B, Hq, Tq, D] from kiln's allocator, or in place when it is contiguous float32 (atomic
// adds, so dq's low bits vary run to run).
void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse, const Tensor& mask,
                              const AttentionParams& p);

}  // namespace kiln::cuda
