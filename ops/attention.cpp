// scaled_dot_product_attention as a composition of matmul, masking and
// softmax (the "math" path), with dropout on the attention weights when
// dropout_p > 0: differentiable in query, key, value and a floating mask,
// double backward included.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/creation.h"
#include "ops/dropout.h"
#include "ops/linalg.h"
#include "ops/attention.h"
#include "ops/nn_functional.h"
#include "ops/view.h"

namespace kiln {

namespace {

// [..., H_kv, S, E] -> [..., H_kv * groups, S, E], each head repeated `groups` times in a row.
Tensor repeat_heads(const Tensor& t, int64_t groups) {
  if (groups == 1) return t;
  Shape expanded = t.sizes();
  expanded.insert(expanded.end() - 2, groups);
  Shape merged = t.sizes();
  merged[merged.size() - 3] *= groups;
  return reshape(expand(unsqueeze(t, -3), expanded), merged);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask, double dropout_p,
                                    bool is_causal, std::optional<double> scale, bool enable_gqa) {
  if (auto ac = autocast_args("scaled_dot_product_attention",
                                {query, key, value, opt_arg(attn_mask)}))
    return scaled_dot_product_attention((*ac)[0], (*ac)[1], (*ac)[2], ac->opt(3), dropout_p,
                                        is_causal, scale, enable_gqa);
  const char* op = "scaled_dot_product_attention";
  KILN_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2, Runtime, "[", op,
             "] query, key and value must have at least 2 dims, got ", query.sizes(), ", ",
             key.sizes(), ", ", value.sizes());
  KILN_CHECK(query.dtype() == key.dtype() && query.dtype() == value.dtype(), Runtime, "[", op,
             "] Expected query, key, and value to have the same dtype, but got query.dtype: ",
             query.dtype(), ", key.dtype: ", key.dtype(), " and value.dtype: ", value.dtype());
  KILN_CHECK(is_floating(query.dtype()), Runtime, "[", op, "] expected floating-point inputs, got ",
             query.dtype());
  KILN_CHECK(query.size(-1) == key.size(-1), Runtime, "[", op,
             "] query and key must have the same embedding size (last dim): query ", query.sizes(),
             ", key ", key.sizes());
  KILN_CHECK(key.size(-2) == value.size(-2), Runtime, "[", op,
             "] key and value must have the same sequence length (dim -2): key ", key.sizes(),
             ", value ", value.sizes());
  KILN_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, Value, "[", op,
             "] dropout probability has to be between 0 and 1, but got ", dropout_p);
  KILN_CHECK(!(is_causal && attn_mask), Runtime, "[", op,
             "] Explicit attn_mask should not be set when is_causal=True");
  Tensor k = key, v = value;
  if (enable_gqa && query.dim() >= 3) {
    const int64_t heads = query.size(-3), kv_heads = key.size(-3);
    KILN_CHECK(kv_heads > 0 && heads % kv_heads == 0 && value.size(-3) == kv_heads, Runtime, "[",
               op, "] with enable_gqa the query heads (", heads,
               ") must be a multiple of the key/value heads (", kv_heads, ", ", value.size(-3),
               ")");
    k = repeat_heads(key, heads / kv_heads);
    v = repeat_heads(value, heads / kv_heads);
  }
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  Tensor scores = mul(matmul(query, mT(k)), Scalar(s));
  const int64_t len_q = query.size(-2), len_k = key.size(-2);
  Tensor keep;  // bool mask of the positions that take part
  if (is_causal) {
    keep = ge(unsqueeze(arange(0, len_q, 1, DType::Int64, query.device()), 1),
              arange(0, len_k, 1, DType::Int64, query.device()));
  } else if (attn_mask && attn_mask->dtype() == DType::Bool) {
    keep = *attn_mask;
  } else if (attn_mask) {
    scores = add(scores, *attn_mask);
  }
  if (keep.defined()) {
    Tensor minus_inf = scalar_tensor(Scalar(-std::numeric_limits<double>::infinity()),
                                     scores.dtype(), scores.device());
    scores = where(keep, scores, minus_inf);
  }
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true);
  return matmul(weights, v);
}

}  // namespace kiln
