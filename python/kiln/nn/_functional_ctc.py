"""Connectionist temporal classification loss (Graves et al., 2006) in Python on kiln ops.

Note [CTC as a log-space recursion]: the forward variable alpha over the extended label
sequence (blank, l1, blank, l2, ..., blank) is updated once per time step with vectorised
ops over the batch and the 2S + 1 positions, so autograd differentiates the recursion itself:
T small steps instead of a dedicated kernel. Sums of probabilities are log-sum-exps written
to stay finite where every term is -inf (impossible alignments), so their gradient is 0 there
rather than NaN. The gradient is the true derivative with respect to log_probs; PyTorch's
kernel adds exp(log_probs) to it, a term that cancels when log_probs come from log_softmax
(as CTC requires), so gradients with respect to the logits agree."""

import kiln

_REDUCTIONS = ("none", "mean", "sum")


def _log_add(terms):
    """log(sum(exp(t))) over a list of same-shape tensors, finite-gradient at all -inf."""
    top = terms[0]
    for t in terms[1:]:
        top = kiln.maximum(top, t)
    finite_top = kiln.where(kiln.isinf(top), kiln.zeros_like(top), top)
    total = terms[0].sub(finite_top).exp()
    for t in terms[1:]:
        total = total + t.sub(finite_top).exp()
    empty = total == 0
    safe = kiln.where(empty, kiln.ones_like(total), total)
    return kiln.where(empty, kiln.full_like(total, float("-inf")), safe.log() + finite_top)


def _lengths(value, batch, name):
    if isinstance(value, kiln.Tensor):
        value = value.detach().cpu().reshape(-1).tolist()
    value = [int(v) for v in value]
    if len(value) != batch:
        raise RuntimeError(f"[ctc_loss] Expected {name} to have value at most batch size "
                           f"{batch}, got {len(value)} values")
    return value


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """-log p(target | input) summed over all CTC alignments. log_probs (T, N, C) or (T, C)
    (log_softmax outputs); targets (N, S) padded or the concatenation of all targets;
    lengths as tensors or sequences. reduction "mean" divides each loss by its target length
    (at least 1) before averaging over the batch."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"[ctc_loss] {reduction} is not a valid value for reduction")
    batched = log_probs.dim() == 3
    if log_probs.dim() not in (2, 3):
        raise RuntimeError(f"[ctc_loss] log_probs must be (T, N, C) or (T, C), got size "
                           f"{list(log_probs.shape)}")
    lp = log_probs if batched else log_probs.unsqueeze(1)
    steps, batch, classes = lp.shape
    if not 0 <= blank < classes:
        raise RuntimeError(f"[ctc_loss] blank must be in label range [0, {classes}), got {blank}")
    in_lens = _lengths(input_lengths, batch, "input_lengths")
    tgt_lens = _lengths(target_lengths, batch, "target_lengths")
    for n in range(batch):
        if not 0 <= in_lens[n] <= steps:
            raise RuntimeError(f"[ctc_loss] Expected input_lengths to have value at most {steps}, "
                               f"but got value {in_lens[n]} (batch element {n})")
        if tgt_lens[n] < 0:
            raise RuntimeError(f"[ctc_loss] target_lengths must be non-negative, got "
                               f"{tgt_lens[n]} (batch element {n})")
    targets = targets.to(device=lp.device, dtype=kiln.int64)
    longest = max(tgt_lens + [0])
    if targets.dim() == 1 or (not batched and targets.dim() == 1):
        if targets.numel() < sum(tgt_lens):
            raise RuntimeError(f"[ctc_loss] Expected tensor to have size at least "
                               f"{sum(tgt_lens)} at dimension 0, but got size {targets.numel()}")
        rows, start = [], 0
        for length in tgt_lens:
            row = targets[start:start + length]
            rows.append(kiln.cat([row, kiln.full((longest - length,), blank, dtype=kiln.int64,
                                                 device=lp.device)]))
            start += length
        padded = kiln.stack(rows) if rows else targets.reshape(0, 0)
    else:
        padded = targets if targets.dim() == 2 else targets.unsqueeze(0)
        if padded.shape[1] < longest:
            raise RuntimeError(f"[ctc_loss] Expected tensor to have size at least {longest} at "
                               f"dimension 1, but got size {padded.shape[1]}")
        padded = padded[:, :longest]
    # Extended labels (N, 2S + 1): blanks between and around the target labels.
    width = 2 * longest + 1
    ext = kiln.full((batch, width), blank, dtype=kiln.int64, device=lp.device)
    if longest:
        ext[:, 1::2] = padded
    # s - 2 may be skipped when l'(s) is a label different from l'(s - 2).
    skip = kiln.zeros((batch, width), dtype=kiln.bool, device=lp.device)
    if longest > 1:
        skip[:, 3::2] = padded[:, 1:] != padded[:, :-1]
    neg_inf = float("-inf")
    init_mask = kiln.zeros((batch, width), dtype=kiln.bool, device=lp.device)
    init_mask[:, :2] = True
    emit = lp.gather(2, ext.unsqueeze(0).expand(steps, batch, width))  # (T, N, 2S + 1)
    alpha = kiln.where(init_mask, emit[0], kiln.full_like(emit[0], neg_inf))
    active = kiln.tensor([[t < length for length in in_lens] for t in range(steps)],
                         device=lp.device).unsqueeze(-1)
    pad1 = kiln.full((batch, 1), neg_inf, dtype=lp.dtype, device=lp.device)
    pad2 = kiln.full((batch, 2), neg_inf, dtype=lp.dtype, device=lp.device)
    for t in range(1, steps):
        from_prev = kiln.cat([pad1, alpha[:, :-1]], dim=1)
        from_skip = kiln.cat([pad2, alpha[:, :-2]], dim=1)
        from_skip = kiln.where(skip, from_skip, kiln.full_like(from_skip, neg_inf))
        updated = _log_add([alpha, from_prev, from_skip]) + emit[t]
        alpha = kiln.where(active[t], updated, alpha)
    last = kiln.tensor([[2 * s, max(2 * s - 1, 0)] for s in tgt_lens], dtype=kiln.int64,
                       device=lp.device)
    ends = alpha.gather(1, last)
    has_label = kiln.tensor([s > 0 for s in tgt_lens], device=lp.device)
    second = kiln.where(has_label, ends[:, 1], kiln.full_like(ends[:, 1], neg_inf))
    loss = -_log_add([ends[:, 0], second])
    # An empty input can only emit an empty target.
    no_input = kiln.tensor([length == 0 for length in in_lens], device=lp.device)
    empty_ok = kiln.tensor([s == 0 for s in tgt_lens], device=lp.device)
    loss = kiln.where(no_input, kiln.where(empty_ok, kiln.zeros_like(loss),
                                           kiln.full_like(loss, float("inf"))), loss)
    if zero_infinity:
        loss = kiln.where(kiln.isinf(loss), kiln.zeros_like(loss), loss)
    if reduction == "none":
        return loss if batched else loss.squeeze(0)
    if reduction == "sum":
        return loss.sum()
    divisor = kiln.tensor([max(s, 1) for s in tgt_lens], dtype=lp.dtype, device=lp.device)
    return (loss / divisor).mean()
