// Scaled-dot-product attention: the front end (ops/attention.cpp) and the contract of the
// fused attention kernel families (Backend::attention_forward / attention_backward).
#pragma once

#include <optional>

#include "core/tensor.h"
#include "ops/philox.h"

namespace kiln {

// Note [Fused attention]
// The fused kernels never materialise the [Tq, Tk] score matrix: the forward keeps the output
// and each query row's log-sum-exp (lse), the backward recomputes the scores tile by tile from
// q, k and lse (memory O(T), not O(T^2)). Every kernel gets 4-D views:
//   q [B, Hq, Tq, D], k [B, Hkv, Tk, D], v [B, Hkv, Tk, Dv], out and dout [B, Hq, Tq, Dv];
// any strides with a unit stride in the last dim (so heads split out of a packed qkv
// projection by split/view/transpose are read in place), one floating dtype. Hq is a multiple
// of Hkv (grouped-query attention): query head h reads key/value head h / (Hq / Hkv).
// mask is undefined or a [B, Hq, Tq, Tk] view of any strides (broadcast dims have stride 0):
// bool (true = take part) or q's dtype (added to the scaled scores).
// For query row i and key j, the score is s_ij = scale * q_i . k_j (+ mask), and
//   - is_causal keeps only j <= i (PyTorch's top-left aligned tril), a false bool mask entry or
//     a -inf additive entry drops the key;
//   - a row with no key left is all-masked: its lse is -inf and its output row 0 (PyTorch's
//     fused kernels and its math path since 2.5), and it passes no gradient;
//   - lse[b, h, i] = log sum_j exp(s_ij) over the kept keys, float32 ([B, Hq, Tq], contiguous;
//     float64 for float64 inputs);
//   - with dropout_p > 0, weight p_ij = exp(s_ij - lse_i) is kept with probability 1 - dropout_p
//     and scaled by 1 / (1 - dropout_p). The keep decision of element L (the row-major index of
//     (b, h, i, j) in [B, Hq, Tq, Tk]) is the dropout kernel's (Note [Random streams]):
//     counter rng.offset + L / 2, words w[2 (L % 2)] and w[2 (L % 2) + 1], kept iff
//     philox_unit(those words) >= dropout_p. The front end reserves B * Hq * Tq * Tk counters,
//     so the math path (dropout on the weights), the CPU kernel and kiln's CUDA kernel draw
//     the same mask, and the backward (given the same rng) redraws it.
// Outputs are preallocated by the front end: out [B, Hq, Tq, Dv] (any strides, unit last
// dim), lse as above; in the backward dq like q's shape, dk and dv [B, Hkv, Tk, D|Dv] (any
// strides, unit last dim), each fully written (dk/dv summed over the query heads of a group).
// Which fused implementation runs (Note [Choosing an attention kernel] in ops/attention.cpp).
enum class AttentionImpl : int8_t {
  None,   // no allowed fused kernel takes these inputs (the front end falls back to math)
  Kiln,   // kiln's own tiled kernels (CPU, and CUDA for every floating dtype and mask)
  Cudnn,  // cuDNN's fused flash attention (CUDA, float16/bfloat16, where it accepts the inputs)
};

struct AttentionParams {
  double scale = 1.0;
  bool is_causal = false;
  double dropout_p = 0.0;
  PhiloxState rng;
  // Forward: the implementations the caller allows (kiln.nn.attention.sdpa_kernel); the kernel
  // returns the one it ran. Backward: impl is the one the forward ran, and must run again
  // (cuDNN's lse and dropout stream are its own).
  bool allow_kiln = true;
  bool allow_cudnn = true;
  AttentionImpl impl = AttentionImpl::None;
};

// PyTorch's F.scaled_dot_product_attention, any number of leading batch dims.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask = std::nullopt,
                                    double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false);

}  // namespace kiln
