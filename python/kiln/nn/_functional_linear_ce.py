"""linear_cross_entropy: cross_entropy of a linear projection, optionally over batch chunks
whose logits are recomputed in the backward pass (kiln.utils.checkpoint), so peak memory
holds one chunk's (rows, num_classes) logits instead of all of them."""

import kiln
from kiln import _C

_nn = _C._nn


def _reference(input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
               label_smoothing):
    num_classes, *out_features, in_features = linear_weight.shape
    bias = None if linear_bias is None else linear_bias.reshape(-1)
    logits = _nn.linear(input, linear_weight.reshape(-1, in_features), bias)
    logits = logits.reshape(list(input.shape[:-1]) + [num_classes] + out_features)
    return _nn.cross_entropy(logits, target, weight, ignore_index=ignore_index,
                             reduction=reduction, label_smoothing=label_smoothing)


def _chunk_sum(input, linear_weight, target, linear_bias, weight, ignore_index,
               label_smoothing):
    return _reference(input, linear_weight, target, linear_bias, weight, "sum", ignore_index,
                      label_smoothing)


def _chunked(input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
             label_smoothing, rows):
    """Index targets, (N, F) input, 2-d weight: per-chunk sums (or per-row losses) whose
    logits the checkpoint recomputes in backward; "mean" divides by the summed weights of the
    counted targets, as cross_entropy does."""
    from kiln.utils.checkpoint import checkpoint  # lazily: import kiln stays fast

    n = input.shape[0]
    needs_grad = kiln.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (input, linear_weight, linear_bias, weight))
    parts = []
    for start in range(0, n, rows):
        length = min(rows, n - start)
        x, y = input.narrow(0, start, length), target.narrow(0, start, length)
        fn, args = ((_reference, (x, linear_weight, y, linear_bias, weight, "none"))
                    if reduction == "none" else
                    (_chunk_sum, (x, linear_weight, y, linear_bias, weight)))
        args = args + (ignore_index, label_smoothing)
        # Without a graph no logits outlive their chunk anyway: nothing to recompute.
        parts.append(checkpoint(fn, *args, use_reentrant=False) if needs_grad else fn(*args))
    if reduction == "none":
        return kiln.cat(parts)
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    if reduction == "sum":
        return total
    counted = target != ignore_index
    if weight is None:
        denom = counted.sum().to(total.dtype)
    else:
        safe = kiln.where(counted, target, kiln.zeros_like(target))
        denom = (weight.to(total.dtype).index_select(0, safe) * counted.to(total.dtype)).sum()
    return total / denom


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...) with
    linear_weight (C, [d1, ..., dK,] F) and input (F) or (N, F). options (a
    LinearCrossEntropyOptions) runs index targets of (N, F) inputs in batch chunks; other
    cases take the reference path."""
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"[linear_cross_entropy] expected input with dimensionality 1 or 2, "
                           f"got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"[linear_cross_entropy] expected linear_weight with dimensionality "
                           f"at least 2, got {linear_weight.dim()}")
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(f"[linear_cross_entropy] expected equal input and linear_weight last "
                           f"dimensions (in_features), got {in_features} and "
                           f"{linear_weight.shape[-1]}, respectively")
    num_classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes,) + out_features:
        raise RuntimeError(f"[linear_cross_entropy] expected linear_bias shape "
                           f"{(num_classes,) + out_features}, got {tuple(linear_bias.shape)}")
    if out_features and input.dim() == 1:
        raise RuntimeError(f"[linear_cross_entropy] K-dimensional loss defined by linear_weight "
                           f"shape {tuple(linear_weight.shape)} requires batched input, (N, "
                           f"{in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    logits_shape = tuple(input.shape[:-1]) + (num_classes,) + out_features
    probabilities = tuple(target.shape) == logits_shape
    if probabilities and ignore_index is not None:
        raise RuntimeError("[linear_cross_entropy] ignore_index cannot be specified when target "
                           "contains probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    if options is not None and input.dim() == 2 and not out_features and not probabilities:
        rows = options.chunk_rows(input.shape[0], in_features, num_classes)
        if rows < input.shape[0]:
            if reduction not in ("none", "mean", "sum"):
                raise ValueError(f"[linear_cross_entropy] {reduction} is not a valid value for "
                                 f"reduction")
            return _chunked(input, linear_weight, target, linear_bias, weight, reduction,
                            ignore_index, label_smoothing, rows)
    return _reference(input, linear_weight, target, linear_bias, weight, reduction,
                      ignore_index, label_smoothing)
