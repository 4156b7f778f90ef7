"""embedding_bag: sums, means or maxima of embedding rows over bags of indices, composed from
embedding and index reductions so it runs on every device with autograd."""

import kiln
from kiln import _C

_MODES = ("sum", "mean", "max")


def _bags(input, offsets, per_sample_weights, include_last_offset):
    """(flat indices, flat per-sample weights or None, bag id of each index, number of bags)."""
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(f"[embedding_bag] if input is 2D, then offsets has to be None, as "
                             f"input is treated as a mini-batch of fixed length sequences, got "
                             f"offsets of shape {list(offsets.shape)}")
        n_bags, length = input.shape
        bag_of = kiln.arange(n_bags, device=input.device).repeat_interleave(length)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
        return input.reshape(-1), per_sample_weights, bag_of, n_bags
    if input.dim() != 1:
        raise ValueError(f"[embedding_bag] input has to be 1D or 2D Tensor, but got Tensor of "
                         f"dimension {input.dim()}")
    if offsets is None:
        raise ValueError("[embedding_bag] offsets has to be a 1D Tensor but got None")
    if offsets.dim() != 1:
        raise ValueError(f"[embedding_bag] offsets has to be a 1D Tensor, got shape "
                         f"{list(offsets.shape)}")
    starts = offsets[:-1] if include_last_offset else offsets
    n_bags = starts.shape[0]
    # Index j belongs to the last bag whose start is <= j (empty bags share a start).
    positions = kiln.arange(input.shape[0], device=input.device)
    bag_of = kiln.searchsorted(starts.to(kiln.int64), positions, right=True) - 1
    if include_last_offset:  # indices at or past the final offset belong to no bag
        keep = positions < offsets[-1]
        input, bag_of = input[keep], bag_of[keep]
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights[keep]
    return input, per_sample_weights, bag_of, n_bags


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """One row per bag: the sum, mean or max of weight[i] over the bag's indices i. Bags are the
    rows of a 2-D input, or the slices of a 1-D input that start at `offsets`; indices equal to
    padding_idx are left out, and empty bags give zeros."""
    if mode not in _MODES:
        raise ValueError(f"[embedding_bag] mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"[embedding_bag] per_sample_weights was not None. "
                                      f"per_sample_weights is only supported for mode='sum' "
                                      f"(got mode={mode!r})")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"[embedding_bag] per_sample_weights of shape "
                             f"{list(per_sample_weights.shape)} must have the shape of input "
                             f"{list(input.shape)}")
    if input.is_floating_point() or input.dtype == kiln.bool:
        raise TypeError(f"[embedding_bag] input must be an integer tensor, got {input.dtype}")
    if padding_idx is not None:
        rows = weight.shape[0]
        if not -rows <= padding_idx < rows:
            raise ValueError(f"[embedding_bag] padding_idx {padding_idx} must be within "
                             f"[-{rows}, {rows})")
        padding_idx %= rows
    idx, psw, bag_of, n_bags = _bags(input, offsets, per_sample_weights, include_last_offset)
    if padding_idx is not None:
        keep = idx != padding_idx
        idx, bag_of = idx[keep], bag_of[keep]
        if psw is not None:
            psw = psw[keep]
    rows = _C._nn.embedding(idx, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    dim = weight.shape[1]
    out = kiln.zeros((n_bags, dim), dtype=weight.dtype, device=weight.device)
    if mode == "max":
        index = bag_of.unsqueeze(1).expand(bag_of.shape[0], dim)
        return out.scatter_reduce(0, index, rows, "amax", include_self=False)
    if psw is not None:
        rows = rows * psw.to(rows.dtype).unsqueeze(1)
    out = out.index_add(0, bag_of, rows)
    if mode == "mean":
        ones = kiln.ones((bag_of.shape[0],), dtype=weight.dtype, device=weight.device)
        counts = kiln.zeros((n_bags,), dtype=weight.dtype, device=weight.device)
        out = out / counts.index_add(0, bag_of, ones).clamp(min=1).unsqueeze(1)
    return out
