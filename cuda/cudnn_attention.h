// cuDNN's fused flash attention (Note [cuDNN attention] in cuda/cudnn_attention.cpp), one of
// the fused kernel families of Note [Fused attention] in ops/attention.h. Declared in every
// CUDA build; without cuDNN or the cuDNN frontend headers a stub reports it unavailable.
#pragma once

#include "core/tensor.h"
#include "ops/attention.h"

namespace kiln::cuda {

// Whether kiln was built with the cuDNN frontend and the cuDNN it loads (first call) is a
// cuDNN 9. Finer version limits (per feature, per GPU) are left to cudnn_attention_supports.
bool cudnn_attention_available();

// Whether cuDNN's fused kernels take these inputs, in the forward and (when `backward`) in the
// backward: float16 or bfloat16 q, k, v of the shapes of Note [Fused attention] with D and Dv
// multiples of 8 (up to 256 on Hopper: cuDNN checks its own limits per GPU and version), a unit
// last-dim stride, every other stride and each base address 16-byte aligned; mask undefined or
// an additive mask of q's dtype whose batch and head dims may be broadcast (stride 0) but whose
// rows are real (Tq stride nonzero, unit Tk stride, same alignment rules); any causal flag and
// scale, dropout_p < 1. A bool mask is never taken. Never throws: a graph cuDNN refuses to
// build gives false, and the verdict is cached like the graph.
// The tensors it is not shown (out, and dout, dq, dk, dv for the backward) are assumed dense in
// [B, T, H, D] memory order, as PyTorch allocates them for cuDNN: allocated that way they reuse
// the graphs checked here. Other layouts must follow the same alignment rules and build their
// own graph at first use (where cuDNN refusing it raises); lse is always float32 [B, Hq, Tq],
// contiguous.
bool cudnn_attention_supports(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                              const AttentionParams& p, bool backward);

// out and lse from q, k, v and mask (Note [Fused attention]; cudnn_attention_supports is true).
// lse is cuDNN's softmax statistics: the natural-log log-sum-exp of each row of scaled, masked
// scores. With dropout, the keep mask comes from cuDNN's own Philox stream keyed by p.rng (seed,
// offset): not the mask kiln's kernels draw, but the one cudnn_attention_backward redraws.
// RuntimeError "[scaled_dot_product_attention] cuDNN: ..." when cuDNN fails.
void cudnn_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& mask, const AttentionParams& p);

// dq, dk, dv from dout and the forward's inputs, out and lse (the forward ran on cuDNN with the
// same mask and params, p.rng included).
void cudnn_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse, const Tensor& mask,
                              const AttentionParams& p);

}  // namespace kiln::cuda
