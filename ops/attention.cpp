// scaled_dot_product_attention: one front end for the fused kernels (Note [Fused attention] in
// ops/attention.h) and the math composite (matmul, mask, softmax, dropout, matmul), which is
// the reference and the path for everything the fused kernels do not take.
#include "ops/attention.h"

#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/export_trace.h"
#include "ops/linalg.h"
#include "ops/nn_functional.h"
#include "ops/philox_capture.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace kiln {

// Note [Choosing an attention kernel]
// PyTorch's backends map onto kiln's implementations as follows:
//   CUDNN_ATTENTION                        -> AttentionImpl::Cudnn (CUDA, float16/bfloat16)
//   FLASH_ATTENTION, EFFICIENT_ATTENTION   -> AttentionImpl::Kiln (kiln's own tiled kernels,
//                                             every device, every floating dtype the device
//                                             kernel takes, any mask)
//   MATH                                   -> the composite below
// The device's attention_forward tries cuDNN first, then kiln's kernel, as the flags allow
// (kiln.backends.cuda.enable_*_sdp, kiln.nn.attention.sdpa_kernel), and says which ran. The
// composite runs when neither takes the inputs, and always when the mask itself needs a
// gradient (no fused kernel writes one). A fused forward records a node whose backward runs the
// same implementation; under create_graph it differentiates the composite's backward instead,
// which draws the same dropout mask (same Philox counters), so double backward works.

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
using Grads = std::vector<Tensor>;

// The four [B, H, T, D] views every implementation works on, and the shape to give the output.
struct Attention4d {
  Tensor q, k, v, mask;  // mask: undefined, or expanded to [B, Hq, Tq, Tk]
  Shape out_shape;
  int64_t groups = 1;  // query heads per key/value head (grouped-query attention)
};

// [lead..., T, D] -> [B, H, T, D]: no lead dims give B = H = 1, one gives H, more are folded
// into B (a copy only when the lead dims cannot be merged as a view).
Tensor to_4d(const Tensor& t) {
  const int64_t n = t.dim();
  const int64_t rows = t.size(-2), cols = t.size(-1);
  if (n == 4) return t;
  if (n == 2) return unsqueeze(unsqueeze(t, 0), 0);
  if (n == 3) return unsqueeze(t, 0);
  Shape lead(t.sizes().begin(), t.sizes().end() - 3);
  return reshape(t, {checked_numel(lead, kOp), t.size(-3), rows, cols});
}

// Broadcasts the batch dims of q, k and v (all lead dims, or all but the heads with
// enable_gqa), checks the head counts and folds everything to 4-D views.
Attention4d normalize_inputs(const Tensor& query, const Tensor& key, const Tensor& value,
                             const std::optional<Tensor>& attn_mask, bool enable_gqa) {
  const int64_t tq = query.size(-2), tk = key.size(-2);
  auto lead = [](const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); };
  Shape lq = lead(query), lk = lead(key), lv = lead(value);
  Attention4d r;
  const bool gqa = enable_gqa && query.dim() >= 3 && key.dim() >= 3 && value.dim() >= 3;
  int64_t hq = 0, hkv = 0;
  if (gqa) {
    hq = lq.back();
    hkv = lk.back();
    KILN_CHECK(hkv > 0 && hq % hkv == 0 && lv.back() == hkv, Runtime, "[", kOp,
               "] with enable_gqa the query heads (", hq,
               ") must be a multiple of the key/value heads (", hkv, ", ", lv.back(), ")");
    lq.pop_back();
    lk.pop_back();
    lv.pop_back();
    r.groups = hq / hkv;
  }
  Shape batch = broadcast_shapes(broadcast_shapes(lq, lk, kOp), lv, kOp);
  auto full = [&](const Tensor& t, int64_t heads, int64_t rows) {
    Shape s = batch;
    if (gqa) s.push_back(heads);
    s.push_back(rows);
    s.push_back(t.size(-1));
    return s;
  };
  const Shape sq = full(query, hq, tq), sk = full(key, hkv, tk), sv = full(value, hkv, tk);
  r.q = to_4d(sq == query.sizes() ? query : expand(query, sq));
  r.k = to_4d(sk == key.sizes() ? key : expand(key, sk));
  r.v = to_4d(sv == value.sizes() ? value : expand(value, sv));
  r.out_shape = sq;
  r.out_shape.back() = value.size(-1);
  if (attn_mask) {
    Shape sm(sq.begin(), sq.end() - 1);
    sm.push_back(tk);
    KILN_CHECK(broadcast_shapes(attn_mask->sizes(), sm, kOp) == sm, Runtime, "[", kOp,
               "] attn_mask of shape ", attn_mask->sizes(),
               " cannot be broadcast to the attention weights' shape ", sm);
    r.mask = to_4d(expand(*attn_mask, sm));
  }
  return r;
}

// exp-normalised weights over the last dim in which a row with every key masked (all -inf)
// gives zeros instead of NaNs (PyTorch's _safe_softmax), and no NaN reaches any gradient.
Tensor safe_softmax(const Tensor& scores) {
  if (scores.size(-1) == 0) return scores;  // no keys: the product with v is all zeros
  Tensor dead = eq(amax(scores, std::vector<int64_t>{-1}, true),
                   scalar_tensor(Scalar(-std::numeric_limits<double>::infinity()), scores.dtype(),
                                 scores.device()));
  Tensor zero = scalar_tensor(Scalar(0.0), scores.dtype(), scores.device());
  return where(dead, zero, softmax(where(dead, zero, scores), -1));
}

// The scaled, masked scores of the math path: [B, Hq, Tq, Tk].
Tensor masked_scores(const Attention4d& a, const Tensor& k, const AttentionParams& p) {
  Tensor scores = mul(matmul(a.q, mT(k)), Scalar(p.scale));
  const int64_t tq = a.q.size(2), tk = k.size(2);
  Tensor keep;
  if (p.is_causal) {
    keep = ge(unsqueeze(arange(0, tq, 1, DType::Int64, a.q.device()), 1),
              arange(0, tk, 1, DType::Int64, a.q.device()));
  } else if (a.mask.defined() && a.mask.dtype() == DType::Bool) {
    keep = a.mask;
  } else if (a.mask.defined()) {
    scores = add(scores, a.mask);
  }
  if (keep.defined()) {
    scores = where(keep, scores,
                   scalar_tensor(Scalar(-std::numeric_limits<double>::infinity()), scores.dtype(),
                                 scores.device()));
  }
  return scores;
}

// [B, Hkv, T, D] -> [B, Hkv * groups, T, D], each head repeated `groups` times in a row.
Tensor repeat_heads(const Tensor& t, int64_t groups) {
  if (groups == 1) return t;
  Shape expanded = t.sizes();
  expanded.insert(expanded.begin() + 2, groups);
  return reshape(expand(unsqueeze(t, 2), expanded),
                 {t.size(0), t.size(1) * groups, t.size(2), t.size(3)});
}

// The dropout keep-and-scale factors of the weights, drawn from the counters p.rng names
// (the fused kernels draw the same ones: Note [Fused attention]).
Tensor dropout_factors(const Tensor& like, const AttentionParams& p) {
  Generator gen(like.device());
  if (is_relative(p.rng)) {  // inside a CUDA graph capture (ops/philox_capture.h)
    gen.begin_capture(relative_base(p.rng), relative_offset(p.rng));
  } else {
    std::vector<uint8_t> state(16);
    for (int i = 0; i < 8; ++i) {
      state[i] = static_cast<uint8_t>(p.rng.seed >> (8 * i));
      state[8 + i] = static_cast<uint8_t>(p.rng.offset >> (8 * i));
    }
    gen.set_state(state);
  }
  return dropout(ones(like.sizes(), like.dtype(), like.device()), p.dropout_p, true, &gen);
}

// The math path's pieces on 4-D views, differentiable in everything: keys and values with
// their heads repeated per query group, the softmax weights, and (with dropout) the
// keep-and-scale factors the weights are multiplied by.
struct MathWeights {
  Tensor k, v, weights, factors;
};

MathWeights math_weights(const Attention4d& a, const AttentionParams& p) {
  MathWeights m;
  m.k = repeat_heads(a.k, a.groups);
  m.v = repeat_heads(a.v, a.groups);
  m.weights = safe_softmax(masked_scores(a, m.k, p));
  if (p.dropout_p > 0.0) m.factors = dropout_factors(m.weights, p);
  return m;
}

Tensor attention_math(const Attention4d& a, const AttentionParams& p) {
  MathWeights m = math_weights(a, p);
  return matmul(m.factors.defined() ? mul(m.weights, m.factors) : m.weights, m.v);
}

// dq, dk, dv of the math path written with differentiable ops (the fused backward under
// create_graph). Group heads' key/value gradients are summed.
Grads attention_backward_composite(const Tensor& g, const Attention4d& a,
                                   const AttentionParams& p) {
  MathWeights m = math_weights(a, p);
  const bool dropped = m.factors.defined();
  Tensor dv = matmul(mT(dropped ? mul(m.weights, m.factors) : m.weights), g);
  Tensor dweights = matmul(g, mT(m.v));
  if (dropped) dweights = mul(dweights, m.factors);
  Tensor dscores = mul(m.weights, sub(dweights, sum(mul(dweights, m.weights),
                                                    std::vector<int64_t>{-1}, true)));
  Tensor dq = mul(matmul(dscores, m.k), Scalar(p.scale));
  Tensor dk = mul(matmul(mT(dscores), a.q), Scalar(p.scale));
  if (a.groups > 1) {
    auto fold = [&](const Tensor& t) {
      return sum(reshape(t, {t.size(0), t.size(1) / a.groups, a.groups, t.size(2), t.size(3)}),
                 std::vector<int64_t>{2});
    };
    dk = fold(dk);
    dv = fold(dv);
  }
  return {dq, dk, dv};
}

// A [B, H, T, D] tensor laid out like `like`: heads inside the sequence ([B, T, H, D] memory,
// the layout of heads split out of a packed projection) when `like` is, else contiguous. Laid
// out so, the gradient flows back through transpose/view/split without copies.
Tensor alloc_like_layout(const Shape& shape, const Tensor& like) {
  const bool heads_inside = like.size(1) > 1 && like.size(2) > 1 && like.stride(1) < like.stride(2);
  if (!heads_inside) return make_tensor(shape, like.dtype(), like.device());
  return permute(make_tensor({shape[0], shape[2], shape[1], shape[3]}, like.dtype(), like.device()),
                 {0, 2, 1, 3});
}

// Kernels read rows with a unit stride in the last dim.
Tensor unit_last(const Tensor& t) {
  return t.size(3) <= 1 || t.stride(3) == 1 ? t : contiguous(t);
}

// Runs a fused forward when the device has one that takes the inputs; an undefined result
// means the math path must run.
Tensor attention_fused(const Attention4d& a, AttentionParams p) {
  const Device dev = a.q.device();
  const Backend& be = backend(dev);
  if (!be.attention_forward || (!p.allow_kiln && !p.allow_cudnn)) return Tensor();
  const DType dtype = a.q.dtype();
  const int64_t b = a.q.size(0), hq = a.q.size(1), tq = a.q.size(2), dv = a.v.size(3);
  Tensor q, k, v, mask, out, lse;
  {
    GradModeGuard no_grad(false);
    q = unit_last(detach(a.q));
    k = unit_last(detach(a.k));
    v = unit_last(detach(a.v));
    if (a.mask.defined()) {
      mask = detach(a.mask);
      if (mask.dtype() != DType::Bool && mask.dtype() != dtype) mask = to_dtype(mask, dtype);
    }
    // [B, Tq, Hq, Dv] memory, as PyTorch's fused kernels: out.transpose(1, 2) is contiguous.
    out = permute(make_tensor({b, tq, hq, dv}, dtype, dev), {0, 2, 1, 3});
    lse = make_tensor({b, hq, tq}, dtype == DType::Float64 ? DType::Float64 : DType::Float32,
                      dev);
    p.impl = be.attention_forward(out, lse, q, k, v, mask, p);
  }
  if (p.impl == AttentionImpl::None) return Tensor();
  if (needs_grad({a.q, a.k, a.v})) {
    record(kOp, {a.q, a.k, a.v}, {out},
           [sq = SavedTensor(a.q), sk = SavedTensor(a.k), sv = SavedTensor(a.v),
            so = SavedTensor::output(out, 0), mask, lse, p,
            groups = a.groups](const Grads& g, Node& self) -> Grads {
             Attention4d s;
             s.q = sq.unpack();
             s.k = sk.unpack();
             s.v = sv.unpack();
             s.mask = mask;
             s.groups = groups;
             if (GradMode::is_enabled()) return attention_backward_composite(g[0], s, p);
             Tensor q = unit_last(detach(s.q)), k = unit_last(detach(s.k)),
                    v = unit_last(detach(s.v));
             // A dout with broadcast (zero) strides, as the gradient of a sum arrives, is
             // copied into the output's layout; any other unit-last-dim layout is read in place.
             Tensor o = detach(so.unpack(self));
             Tensor dout = to_dtype(g[0], q.dtype());
             bool broadcast = dout.stride(3) != 1 && dout.size(3) > 1;
             for (int d = 0; d < 3; ++d) broadcast |= dout.stride(d) == 0 && dout.size(d) > 1;
             if (broadcast) {
               Tensor dense = alloc_like_layout(o.sizes(), o);
               copy_(dense, dout);
               dout = dense;
             }
             Tensor dq = alloc_like_layout(q.sizes(), q);
             Tensor dk = alloc_like_layout(k.sizes(), k);
             Tensor dv = alloc_like_layout(v.sizes(), v);
             const Device d = q.device();
             require_kernel(backend(d).attention_backward, "scaled_dot_product_attention_backward",
                            d)(dq, dk, dv, dout, q, k, v, o, lse, mask, p);
             return {dq, dk, dv};
           });
  }
  return out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask, double dropout_p,
                                    bool is_causal, std::optional<double> scale, bool enable_gqa) {
  tracing::OpScope scope("scaled_dot_product_attention");
  if (auto ac = autocast_args(kOp, {query, key, value, opt_arg(attn_mask)}))
    return scope.out(scaled_dot_product_attention((*ac)[0], (*ac)[1], (*ac)[2], ac->opt(3),
                                                  dropout_p, is_causal, scale, enable_gqa),
                     query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  KILN_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2, Runtime, "[", kOp,
             "] query, key and value must have at least 2 dims, got ", query.sizes(), ", ",
             key.sizes(), ", ", value.sizes());
  KILN_CHECK(query.dtype() == key.dtype() && query.dtype() == value.dtype(), Runtime, "[", kOp,
             "] Expected query, key, and value to have the same dtype, but got query.dtype: ",
             query.dtype(), ", key.dtype: ", key.dtype(), " and value.dtype: ", value.dtype());
  KILN_CHECK(is_floating(query.dtype()), Runtime, "[", kOp, "] expected floating-point inputs, got ",
             query.dtype());
  const Device dev = common_device({query, key, value}, kOp);
  if (attn_mask) {
    KILN_CHECK(attn_mask->device() == dev, Runtime, "[", kOp, "] attn_mask is on ",
               attn_mask->device(), " but query, key and value are on ", dev);
    KILN_CHECK(attn_mask->dtype() == DType::Bool || is_floating(attn_mask->dtype()), Runtime, "[",
               kOp, "] Expected attn_mask dtype to be bool or float or to match query dtype, got ",
               attn_mask->dtype());
  }
  KILN_CHECK(query.size(-1) == key.size(-1), Runtime, "[", kOp,
             "] query and key must have the same embedding size (last dim): query ", query.sizes(),
             ", key ", key.sizes());
  KILN_CHECK(key.size(-2) == value.size(-2), Runtime, "[", kOp,
             "] key and value must have the same sequence length (dim -2): key ", key.sizes(),
             ", value ", value.sizes());
  KILN_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, Value, "[", kOp,
             "] dropout probability has to be between 0 and 1, but got ", dropout_p);
  KILN_CHECK(!(is_causal && attn_mask), Runtime, "[", kOp,
             "] Explicit attn_mask should not be set when is_causal=True");
  Attention4d a = normalize_inputs(query, key, value, attn_mask, enable_gqa);

  AttentionParams p;
  p.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  p.is_causal = is_causal;
  p.dropout_p = dropout_p;
  if (dropout_p > 0.0) {
    const int64_t weights =
        checked_numel({a.q.size(0), a.q.size(1), a.q.size(2), a.k.size(2)}, kOp);
    p.rng = resolve_generator(nullptr, dev, kOp).reserve(static_cast<uint64_t>(weights));
  }
  const BackendFlags flags = backend_flags();
  p.allow_cudnn = flags.sdp_cudnn;
  p.allow_kiln = flags.sdp_flash || flags.sdp_mem_efficient;
  const bool mask_needs_grad = a.mask.defined() && needs_grad({a.mask});
  if (!mask_needs_grad) {
    Tensor out = attention_fused(a, p);
    if (out.defined())
      return scope.out(reshape(out, a.out_shape), query, key, value, attn_mask, dropout_p,
                       is_causal, scale, enable_gqa);
  }
  KILN_CHECK(flags.sdp_math, Runtime, "[", kOp, "] No available kernel. Aborting execution. "
             "The enabled backends (kiln.nn.attention.sdpa_kernel / kiln.backends.cuda."
             "enable_*_sdp) take none of: query ", query.sizes(), " ", query.dtype(), " on ", dev,
             mask_needs_grad ? ", an attn_mask that requires grad (only MATH computes its "
                               "gradient)" : "");
  return scope.out(reshape(attention_math(a, p), a.out_shape), query, key, value, attn_mask,
                   dropout_p, is_causal, scale, enable_gqa);
}

}  // namespace kiln
