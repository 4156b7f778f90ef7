"""multi_head_attention_forward: the computation of nn.MultiheadAttention with its weights
passed in, PyTorch's functional form (the module calls it)."""

import math

import kiln
from kiln import _C

_nn = _C._nn


def _additive_mask(mask, dtype, name):
    """A float mask to add to attention scores: bool True (masked out) becomes -inf."""
    if mask is None:
        return None
    if mask.dtype == kiln.bool:
        return kiln.zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(
            mask, float("-inf"))
    if not mask.is_floating_point():
        raise TypeError(f"[multi_head_attention_forward] {name} must be bool or floating point, "
                        f"got {mask.dtype}")
    return mask.to(dtype)


def _project(query, key, value, embed_dim, in_proj_weight, in_proj_bias, separate,
             q_proj_weight, k_proj_weight, v_proj_weight, self_attention):
    """q, k, v = the input projections, each (N, L or S, E)."""
    e, b = embed_dim, in_proj_bias
    b_q, b_k, b_v = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
    if separate:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise RuntimeError("[multi_head_attention_forward] use_separate_proj_weight is True "
                               "but q_proj_weight, k_proj_weight or v_proj_weight is None")
        return (_nn.linear(query, q_proj_weight, b_q), _nn.linear(key, k_proj_weight, b_k),
                _nn.linear(value, v_proj_weight, b_v))
    if in_proj_weight is None:
        raise RuntimeError("[multi_head_attention_forward] use_separate_proj_weight is False but "
                           "in_proj_weight is None")
    w = in_proj_weight
    if self_attention:
        return _nn.linear(query, w, b).chunk(3, dim=-1)
    return (_nn.linear(query, w[:e], b_q), _nn.linear(key, w[e:2 * e], b_k),
            _nn.linear(value, w[2 * e:], b_v))


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention of (L, N, E) query over (S, N, E) key/value (or unbatched (L, E)),
    returning (output (L, N, E), weights (N, L, S) averaged over heads, per head, or None).
    static_k/static_v, (N * num_heads, S, E / num_heads), replace the projected keys/values."""
    name = "multi_head_attention_forward"
    if is_causal and attn_mask is None:
        raise RuntimeError(f"[{name}] Need attn_mask if specifying the is_causal hint (pass the "
                           f"causal mask as attn_mask)")
    batched = query.dim() == 3
    self_attention = query is key and key is value
    if not batched:
        if query.dim() != 2:
            raise ValueError(f"[{name}] query should be unbatched 2D or batched 3D tensor but "
                             f"received {query.dim()}-D query tensor")
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    embed_dim = query.shape[2]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"[{name}] was expecting embedding dimension of "
                             f"{embed_dim_to_check}, but got {embed_dim}")
    if embed_dim % num_heads != 0:
        raise AssertionError(f"[{name}] embed_dim {embed_dim} not divisible by num_heads "
                             f"{num_heads}")
    # Batch-first inside: (N, L, E).
    query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    n, tgt_len, _ = query.shape
    heads, head_dim = num_heads, embed_dim // num_heads
    q, k, v = _project(query, key, value, embed_dim, in_proj_weight, in_proj_bias,
                       use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight,
                       self_attention)
    if bias_k is not None and bias_v is not None:  # one learned key/value for every sequence
        if static_k is not None or static_v is not None:
            raise AssertionError(f"[{name}] bias cannot be added to static key/value")
        k = kiln.cat([k, bias_k.reshape(1, 1, embed_dim).expand(n, 1, embed_dim)], dim=1)
        v = kiln.cat([v, bias_v.reshape(1, 1, embed_dim).expand(n, 1, embed_dim)], dim=1)
    q = q.reshape(n, tgt_len, heads, head_dim).transpose(1, 2)
    k = k.reshape(n, k.shape[1], heads, head_dim).transpose(1, 2)
    v = v.reshape(n, v.shape[1], heads, head_dim).transpose(1, 2)
    for static, which in ((static_k, "key"), (static_v, "value")):
        if static is not None and (static.shape[0] != n * heads or static.shape[2] != head_dim):
            raise AssertionError(f"[{name}] expecting static_{which} of size ({n * heads}, S, "
                                 f"{head_dim}), but got {list(static.shape)}")
    if static_k is not None:
        k = static_k.reshape(n, heads, static_k.shape[1], head_dim)
    if static_v is not None:
        v = static_v.reshape(n, heads, static_v.shape[1], head_dim)
    if add_zero_attn:  # and an all-zero key/value per head
        zeros = kiln.zeros((n, heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v = kiln.cat([k, zeros], dim=2), kiln.cat([v, zeros], dim=2)

    mask = _additive_mask(attn_mask, q.dtype, "attn_mask")
    if mask is not None and mask.dim() == 3:
        mask = mask.reshape(n, heads, tgt_len, mask.shape[-1])
    padding = _additive_mask(key_padding_mask, q.dtype, "key_padding_mask")
    if padding is not None:
        padding = padding.reshape(n, 1, 1, padding.shape[-1])
    if padding is not None:
        mask = padding if mask is None else mask + padding
    extra = 0 if mask is None else k.shape[2] - mask.shape[-1]
    if extra > 0:  # the appended keys (bias_k, the zero key) are never masked
        mask = kiln.cat([mask, kiln.zeros(tuple(mask.shape[:-1]) + (extra,), dtype=mask.dtype,
                                          device=mask.device)], dim=-1)
    dropout_p = dropout_p if training else 0.0

    if need_weights:
        scores = kiln.matmul(q * (1.0 / math.sqrt(head_dim)), k.transpose(-2, -1))
        if mask is not None:
            scores = scores + mask
        weights = _nn.softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = _C._dropout(weights, p=dropout_p)
        out = kiln.matmul(weights, v)
        if average_attn_weights:
            weights = weights.mean(dim=1)
    else:
        out = _nn.scaled_dot_product_attention(q, k, v, mask, dropout_p, False)
        weights = None
    out = _nn.linear(out.transpose(1, 2).reshape(n, tgt_len, embed_dim), out_proj_weight,
                     out_proj_bias).transpose(0, 1)
    if not batched:
        out = out.squeeze(1)
        if weights is not None:
            weights = weights.squeeze(0)
    return out, weights
