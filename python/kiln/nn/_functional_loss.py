"""Losses of kiln.nn.functional written in Python on kiln ops, so they run on every device and
get their gradients from the composition. Names, arguments, defaults and error types follow
PyTorch's torch.nn.functional."""

import math

import kiln
from kiln import _C

_nn = _C._nn


def _reduction(name, size_average, reduce, reduction):
    """`reduction` after the deprecated size_average/reduce flags, validated."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"[{name}] {reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _zero_where(cond, values):
    return kiln.where(cond, kiln.zeros_like(values), values)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dimension (eps keeps the gradient finite at x1 == x2)."""
    if max(x1.dim(), x2.dim()) == 0:
        raise RuntimeError(f"[pairwise_distance] expected inputs with at least one dimension, "
                           f"got x1 of size {list(x1.shape)} and x2 of size {list(x2.shape)}")
    return kiln.linalg.vector_norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)


def pdist(input, p=2):
    """The p-norm distances between all pairs of rows i < j of a 2-D input, in row-major order
    of (i, j)."""
    if input.dim() != 2:
        raise RuntimeError(f"[pdist] pdist only supports 2D tensors, got: {input.dim()}D "
                           f"(input of size {list(input.shape)})")
    if p < 0:
        raise RuntimeError(f"[pdist] pdist only supports non-negative p values, got p={p}")
    n = input.shape[0]
    rows = [i for i in range(n) for _ in range(i + 1, n)]
    cols = [j for i in range(n) for j in range(i + 1, n)]
    if not rows:
        return input.new_zeros((0,))
    index = lambda ids: kiln.tensor(ids, dtype=kiln.int64, device=input.device)  # noqa: E731
    diff = input.index_select(0, index(rows)) - input.index_select(0, index(cols))
    return kiln.linalg.vector_norm(diff, float(p), dim=1)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1."""
    reduction = _reduction("cosine_embedding_loss", size_average, reduce, reduction)
    tdim = target.dim()
    if tdim > 1:
        raise RuntimeError(f"[cosine_embedding_loss] 0D or 1D target tensor expected, "
                           f"multi-target not supported; got target of size {list(target.shape)}")
    if input1.dim() != tdim + 1 or input2.dim() != tdim + 1:
        raise RuntimeError(f"[cosine_embedding_loss] {tdim}D target tensor expects {tdim + 1}D "
                           f"input tensors, but found inputs with sizes {list(input1.shape)} and "
                           f"{list(input2.shape)}")
    eps = 1e-12
    dot = (input1 * input2).sum(tdim)
    mag1 = (input1 * input1).sum(tdim) + eps
    mag2 = (input2 * input2).sum(tdim) + eps
    cos = dot / (mag1 * mag2).sqrt()
    pos = _zero_where(target != 1, 1 - cos)
    neg = _zero_where(target != -1, (cos - margin).clamp(min=0))
    return _reduce(pos + neg, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    reduction = _reduction("margin_ranking_loss", size_average, reduce, reduction)
    if not input1.dim() == input2.dim() == target.dim():
        raise RuntimeError(f"[margin_ranking_loss] All input tensors should have same dimension "
                           f"but got sizes: input1: {list(input1.shape)}, input2: "
                           f"{list(input2.shape)}, target: {list(target.shape)}")
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1."""
    reduction = _reduction("hinge_embedding_loss", size_average, reduce, reduction)
    below = _zero_where(target == 1, (margin - input).clamp(min=0))
    self_term = _zero_where(target == -1, input)
    return _reduce(below + self_term, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input))."""
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    return _reduce((-target * input).exp().log1p(), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Binary cross-entropy on logits per class, averaged over the classes (last dim)."""
    reduction = _reduction("multilabel_soft_margin_loss", size_average, reduce, reduction)
    loss = -(target * _nn.logsigmoid(input) + (1 - target) * _nn.logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    return _reduce(loss, reduction)


def _class_scores(name, input, target):
    """input as (N, C) and target as (N,), with PyTorch's checks for 0/1/2-D inputs."""
    if input.dim() > 2:
        raise RuntimeError(f"[{name}] Expected non-empty vector or matrix with optional 0-dim "
                           f"batch size, but got input of size {list(input.shape)}")
    if kiln.is_floating_point(target):
        raise RuntimeError(f"[{name}] expected an integer target, got target of dtype "
                           f"{target.dtype}")
    scores = input.reshape(1, -1) if input.dim() < 2 else input
    return scores, target


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """sum_{j != y} max(0, margin - x[y] + x[j])^p (times weight[y]) / C per sample."""
    reduction = _reduction("multi_margin_loss", size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"[multi_margin_loss] only p == 1 and p == 2 supported, got p={p}")
    if weight is not None and weight.dim() != 1:
        raise ValueError(f"[multi_margin_loss] weight must be one-dimensional, got weight of "
                         f"size {list(weight.shape)}")
    scores, target = _class_scores("multi_margin_loss", input, target)
    n, c = scores.shape
    flat_target = target.reshape(-1)
    if flat_target.numel() != n:
        raise RuntimeError(f"[multi_margin_loss] inconsistent target size: got target of size "
                           f"{list(target.shape)} for input of size {list(input.shape)}")
    column = flat_target.unsqueeze(1)
    z = (margin - scores.gather(1, column) + scores).clamp(min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.index_select(0, flat_target).unsqueeze(1)
    classes = kiln.arange(c, device=input.device).unsqueeze(0)
    loss = _zero_where(classes == column, z).sum(1) / c
    if input.dim() < 2:
        loss = loss.reshape(target.shape)
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over target classes y (the leading non-negative entries of target) and non-target
    classes k of max(0, 1 - (x[y] - x[k])), divided by C, per sample."""
    reduction = _reduction("multilabel_margin_loss", size_average, reduce, reduction)
    scores, _ = _class_scores("multilabel_margin_loss", input, target)
    if list(target.shape) != list(input.shape):
        raise RuntimeError(f"[multilabel_margin_loss] inconsistent target size: got target of "
                           f"size {list(target.shape)} for input of size {list(input.shape)}")
    labels = target.reshape(scores.shape)
    c = scores.shape[1]
    # Targets end at the first negative entry.
    valid = (labels < 0).to(kiln.int64).cumsum(1) == 0
    safe = labels.clamp(min=0)
    one_hot = _nn.one_hot(safe, c) * valid.unsqueeze(2).to(kiln.int64)
    is_target = one_hot.sum(1) > 0
    hinge = (1 - scores.gather(1, safe).unsqueeze(2) + scores.unsqueeze(1)).clamp(min=0)
    keep = valid.unsqueeze(2) & is_target.logical_not().unsqueeze(1)
    loss = _zero_where(keep.logical_not(), hinge).sum((1, 2)) / c
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(input) - target * input (log_input) or input - target * log(input + eps); `full`
    adds Stirling's approximation of log(target!) where target > 1."""
    reduction = _reduction("poisson_nll_loss", size_average, reduce, reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + _zero_where(target <= 1, stirling)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(var) + (input - target)^2 / var) (+ 0.5 log(2 pi) when full), var clamped to
    at least eps without stopping its gradient."""
    if not isinstance(var, kiln.Tensor):
        var = kiln.full_like(input, float(var))
    if list(var.shape) != list(input.shape):
        if list(input.shape[:-1]) == list(var.shape):
            var = var.unsqueeze(-1)
        elif not (list(input.shape[:-1]) == list(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError(f"[gaussian_nll_loss] var is of incorrect size: var of size "
                             f"{list(var.shape)} for input of size {list(input.shape)}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"[gaussian_nll_loss] {reduction} is not valid")
    if bool((var < 0).any()):
        raise ValueError("[gaussian_nll_loss] var has negative entry/entries")
    var = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with d the pairwise p-norm distance; `swap` uses
    min(d(a, n), d(p, n)) as the negative distance."""
    reduction = _reduction("triplet_margin_loss", size_average, reduce, reduction)
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if not dims[0] == dims[1] == dims[2]:
        raise RuntimeError(f"[triplet_margin_loss] The anchor, positive, and negative tensors "
                           f"are expected to have the same number of dimensions, but got: anchor "
                           f"{dims[0]}D, positive {dims[1]}D, and negative {dims[2]}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = kiln.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with any distance function (default pairwise_distance)."""
    reduction = _reduction("triplet_margin_with_distance_loss", None, None, reduction)
    if margin <= 0:
        raise ValueError(f"[triplet_margin_with_distance_loss] margin must be greater than 0, "
                         f"got {margin}")
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = kiln.minimum(d_neg, dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)
