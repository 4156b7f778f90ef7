// The CUDA attention kernel family: cuDNN's fused flash attention where the caller allows it
// and it takes the inputs, else kiln's own kernels (Note [Choosing an attention kernel] in
// ops/attention.cpp).
#include "core/determinism.h"
#include "core/error.h"
#include "cuda/attention.h"
#include "cuda/kernels.h"
#include "ops/attention.h"
#include "cuda/cudnn_attention.h"

namespace kiln::cuda {

namespace {

// cuDNN must be able to run the backward too: the backward reruns the forward's
// implementation (cuDNN's lse and dropout stream are its own), and the forward cannot know
// whether a backward follows. Masked attention stays with kiln's kernels: cuDNN does not
// promise Note [Fused attention]'s zeros for a row an additive mask drops entirely, and the
// dispatcher cannot see the mask's values.
bool cudnn_takes(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 const AttentionParams& p) {
  return p.allow_cudnn && !mask.defined() && cudnn_attention_available() &&
         cudnn_attention_supports(q, k, v, mask, p, /*backward=*/true);
}

AttentionImpl attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                const Tensor& k, const Tensor& v, const Tensor& mask,
                                const AttentionParams& p) {
  if (cudnn_takes(q, k, v, mask, p)) {
    cudnn_attention_forward(out, lse, q, k, v, mask, p);
    return AttentionImpl::Cudnn;
  }
  if (p.allow_kiln && flash_attention_supports(q.dtype(), q.size(3), v.size(3))) {
    flash_attention_forward(out, lse, q, k, v, mask, p);
    return AttentionImpl::Kiln;
  }
  return AttentionImpl::None;
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& mask, const AttentionParams& p) {
  switch (p.impl) {
    case AttentionImpl::Cudnn:
      cudnn_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, mask, p);
      return;
    case AttentionImpl::Kiln:
      // dq accumulates with float atomics (cuDNN's backward has a deterministic mode instead).
      alert_not_deterministic("scaled_dot_product_attention_backward", q.device());
      flash_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, mask, p);
      return;
    default:
      fail(ErrorKind::Runtime, "[scaled_dot_product_attention_backward] the forward ran no fused "
           "CUDA kernel this build has");
  }
}

}  // namespace

void install_attention_kernels(Backend& b) {
  b.attention_forward = attention_forward;
  b.attention_backward = attention_backward;
}

}  // namespace kiln::cuda
