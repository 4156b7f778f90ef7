"""kiln.nn.functional losses against NumPy references: cross_entropy,
nll_loss, pointwise and binary losses, kl_div."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import RNG, assert_close, gradcheck, noncontig, rand



# --- NumPy references ---------------------------------------------------------

def np_log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))



def np_cross_entropy(x, t, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0):
    """Class-index targets; x is [N, C, ...] or unbatched [C]."""
    unbatched = x.ndim == 1
    if unbatched:
        x, t = x[None], np.asarray(t)[None]
    c = x.shape[1]
    logp = np.moveaxis(np_log_softmax(x, 1), 1, -1).reshape(-1, c)
    flat_t = t.reshape(-1)
    w = np.ones(c) if weight is None else weight
    valid = flat_t != ignore_index
    safe = np.where(valid, flat_t, 0)
    w_t = w[safe] * valid
    nll = -logp[np.arange(len(flat_t)), safe] * w_t
    smooth = -(logp * w).sum(1) * valid
    loss = (1 - smoothing) * nll + smoothing / c * smooth
    if reduction == "none":
        return loss.reshape(t.shape)[0] if unbatched else loss.reshape(t.shape)
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w_t.sum()


def np_cross_entropy_probs(x, p, weight=None, reduction="mean", smoothing=0.0):
    class_dim = 0 if x.ndim == 1 else 1
    c = x.shape[class_dim]
    p = p * (1 - smoothing) + smoothing / c
    shape = [1] * x.ndim
    shape[class_dim] = c
    w = np.ones(c) if weight is None else weight
    loss = -(np_log_softmax(x, class_dim) * p * w.reshape(shape)).sum(class_dim)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / (x.size / c)


def np_reduce(loss, reduction):
    return {"none": loss, "mean": np.mean(loss), "sum": np.sum(loss)}[reduction]


def targets(shape, classes, ignore=None, ignore_index=-100):
    t = RNG.integers(0, classes, size=shape)
    if ignore is not None:
        t[ignore] = ignore_index
    return t



# --- cross_entropy / nll_loss -------------------------------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_indices(reduction, smoothing, weighted):
    x = rand(6, 4) * 3
    w = rand(4, low=0.5, high=2.0) if weighted else None
    t = targets(6, 4, ignore=[1, 4])
    weight = None if w is None else kiln.tensor(w)
    got = F.cross_entropy(kiln.tensor(x), kiln.tensor(t), weight=weight, reduction=reduction,
                          label_smoothing=smoothing)
    assert_close(got, np_cross_entropy(x, t, w, -100, reduction, smoothing))


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_k_dim_targets_and_custom_ignore_index(reduction):
    x = rand(2, 3, 4, 5)
    w = rand(3, low=0.5, high=2.0)
    t = targets((2, 4, 5), 3)
    t[0, 1, :2] = 1  # ignore_index=1 is also a valid class
    got = F.cross_entropy(kiln.tensor(x), kiln.tensor(t), kiln.tensor(w), ignore_index=1,
                          reduction=reduction, label_smoothing=0.1)
    assert_close(got, np_cross_entropy(x, t, w, 1, reduction, 0.1))


def test_cross_entropy_unbatched_and_noncontiguous():
    x = rand(5)
    for reduction in ("mean", "none"):
        got = F.cross_entropy(kiln.tensor(x), kiln.tensor(3), reduction=reduction)
        assert_close(got, np_cross_entropy(x, np.int64(3), reduction=reduction))
    x = rand(3, 4)
    t = targets(4, 3)
    got = F.cross_entropy(noncontig(x).t(), kiln.tensor(t), label_smoothing=0.3)
    assert_close(got, np_cross_entropy(np.ascontiguousarray(x.T), t, smoothing=0.3))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_probability_targets(reduction, smoothing):
    x = rand(3, 4, 2)
    p = np.exp(np_log_softmax(rand(3, 4, 2), 1))
    w = rand(4, low=0.5, high=2.0)
    got = F.cross_entropy(kiln.tensor(x), kiln.tensor(p), weight=kiln.tensor(w),
                          reduction=reduction, label_smoothing=smoothing)
    assert_close(got, np_cross_entropy_probs(x, p, w, reduction, smoothing))
    x1, p1 = rand(4), np.exp(np_log_softmax(rand(4), 0))
    assert_close(F.cross_entropy(kiln.tensor(x1), kiln.tensor(p1)), np_cross_entropy_probs(x1, p1))


def test_cross_entropy_float32_and_all_ignored():
    x = rand(5, 3).astype(np.float32)
    t = targets(5, 3)
    got = F.cross_entropy(kiln.tensor(x), kiln.tensor(t))
    assert got.dtype == kiln.float32
    assert_close(got, np_cross_entropy(x.astype(np.float64), t), dtype=kiln.float32)
    assert np.isnan(F.cross_entropy(kiln.tensor(x), kiln.full((5,), -100, dtype=kiln.int64)).item())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
    logp = np_log_softmax(rand(5, 4), 1)
    w = rand(4, low=0.5, high=2.0)
    t = targets(5, 4, ignore=[2])
    got = F.nll_loss(kiln.tensor(logp), kiln.tensor(t), weight=kiln.tensor(w), reduction=reduction)
    valid = t != -100
    safe = np.where(valid, t, 0)
    per = -logp[np.arange(5), safe] * w[safe] * valid
    ref = {"none": per, "sum": per.sum(), "mean": per.sum() / (w[safe] * valid).sum()}[reduction]
    assert_close(got, ref)
    # size_average/reduce (deprecated) override reduction.
    assert_close(F.nll_loss(kiln.tensor(logp), kiln.tensor(t), reduce=False),
                 -logp[np.arange(5), safe] * valid)


def test_cross_entropy_and_nll_gradients():
    t = kiln.tensor(targets(3, 4, ignore=[1]))
    w = kiln.tensor(rand(4, low=0.5, high=2.0))
    gradcheck(lambda x: F.cross_entropy(x, t, weight=w, label_smoothing=0.1), rand(3, 4))
    gradcheck(lambda x: F.cross_entropy(x, t, reduction="none"), rand(3, 4))
    t3 = kiln.tensor(targets((2, 3), 4))
    gradcheck(lambda x: F.cross_entropy(x, t3, reduction="sum"), rand(2, 4, 3))
    gradcheck(lambda x, p: F.cross_entropy(x, p, label_smoothing=0.2), rand(2, 3),
              rand(2, 3, low=0, high=1))
    gradcheck(lambda x: F.nll_loss(x, t, weight=w), rand(3, 4))


def test_cross_entropy_double_backward_runs():
    x = kiln.tensor(rand(3, 4), requires_grad=True)
    loss = F.cross_entropy(x, kiln.tensor(targets(3, 4)))
    (g,) = kiln.autograd.grad(loss, [x], create_graph=True)
    (gg,) = kiln.autograd.grad(g.pow(2).sum(), [x])
    assert gg.shape == (3, 4) and np.abs(gg.numpy()).sum() > 0


def test_cross_entropy_and_nll_errors():
    x = kiln.ones(3, 4)
    with pytest.raises(IndexError, match=r"\[cross_entropy\].*Target 4 .*4 classes"):
        F.cross_entropy(x, kiln.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match=r"\[nll_loss\].*Target -3 .*4 classes"):
        F.nll_loss(x, kiln.tensor([0, -3, 1]))
    with pytest.raises(ValueError, match=r"\[cross_entropy\].*batch_size \(3\).*\(2\)"):
        F.cross_entropy(x, kiln.tensor([0, 1]))
    with pytest.raises(RuntimeError, match=r"\[nll_loss\].*int64"):
        F.nll_loss(x, kiln.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(RuntimeError, match=r"\[cross_entropy\].*Expected floating point type"):
        F.cross_entropy(x, kiln.ones(3, 4, dtype=kiln.int64))
    with pytest.raises(RuntimeError, match=r"\[cross_entropy\].*weight tensor"):
        F.cross_entropy(x, kiln.tensor([0, 1, 2]), weight=kiln.ones(3))
    with pytest.raises(RuntimeError, match=r"\[nll_loss\].*Expected target size \[2, 3\]"):
        F.nll_loss(kiln.ones(2, 4, 3), kiln.zeros(2, 4, dtype=kiln.int64))
    with pytest.raises(RuntimeError, match=r"\[cross_entropy\].*label_smoothing"):
        F.cross_entropy(x, kiln.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"\[cross_entropy\] 'avg' is not a valid value for redu"):
        F.cross_entropy(x, kiln.tensor([0, 1, 2]), reduction="avg")


# --- pointwise losses ---------------------------------------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1_loss(reduction):
    a, b = rand(3, 4), rand(3, 4)
    assert_close(F.mse_loss(kiln.tensor(a), kiln.tensor(b), reduction=reduction),
                 np_reduce((a - b) ** 2, reduction))
    assert_close(F.l1_loss(noncontig(a), kiln.tensor(b), reduction=reduction),
                 np_reduce(np.abs(a - b), reduction))
    # Broadcasting, as PyTorch allows (with a warning there).
    c = rand(4)
    assert_close(F.mse_loss(kiln.tensor(a), kiln.tensor(c), reduction=reduction),
                 np_reduce((a - c) ** 2, reduction))


def test_mse_and_l1_gradients_and_errors():
    gradcheck(lambda a, b: F.mse_loss(a, b), rand(2, 3), rand(2, 3))
    gradcheck(lambda a, b: F.l1_loss(a, b, reduction="sum"), rand(2, 3), rand(2, 3))
    with pytest.raises(ValueError, match=r"\[mse_loss\] 'elementwise' is not a valid value for"):
        F.mse_loss(kiln.ones(2), kiln.ones(2), reduction="elementwise")
    with pytest.raises(ValueError, match=r"\[l1_loss\].*not a valid value for reduction"):
        F.l1_loss(kiln.ones(2), kiln.ones(2), reduction="")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(reduction):
    x = rand(3, 4, low=0.05, high=0.95)
    t = rand(3, 4, low=0, high=1)
    w = rand(4, low=0.5, high=2.0)
    ref = -w * (t * np.log(x) + (1 - t) * np.log(1 - x))
    got = F.binary_cross_entropy(kiln.tensor(x), kiln.tensor(t), weight=kiln.tensor(w),
                                 reduction=reduction)
    assert_close(got, np_reduce(ref, reduction))


def test_binary_cross_entropy_clamps_logs_at_exact_zero_and_one():
    x = kiln.tensor([0.0, 1.0, 0.5], dtype=kiln.float64, requires_grad=True)
    t = kiln.tensor([1.0, 1.0, 0.0], dtype=kiln.float64)
    loss = F.binary_cross_entropy(x, t, reduction="none")
    assert_close(loss, np.array([100.0, 0.0, np.log(2.0)]))
    loss.sum().backward()
    assert np.all(np.isfinite(x.grad.numpy()))
    assert_close(x.grad, np.array([-1e12, 0.0, 2.0]), rtol=1e-6)


def test_binary_cross_entropy_gradients_and_errors():
    t = rand(2, 3, low=0, high=1)
    gradcheck(lambda x: F.binary_cross_entropy(x, kiln.tensor(t)), rand(2, 3, low=0.1, high=0.9))
    gradcheck(lambda x, tt: F.binary_cross_entropy(x, tt, reduction="sum"),
              rand(2, 3, low=0.1, high=0.9), t)
    with pytest.raises(RuntimeError, match=r"\[binary_cross_entropy\].*between 0 and 1"):
        F.binary_cross_entropy(kiln.tensor([0.5, 1.5]), kiln.tensor([1.0, 0.0]))
    with pytest.raises(RuntimeError, match=r"\[binary_cross_entropy\].*between 0 and 1"):
        F.binary_cross_entropy(kiln.tensor([0.5, float("nan")]), kiln.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"\[binary_cross_entropy\].*target size \[2\].*\[2, 1\]"):
        F.binary_cross_entropy(kiln.full((2, 1), 0.5), kiln.ones(2))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits(reduction):
    x = rand(3, 4) * 20  # large logits: the naive formula would overflow
    t = rand(3, 4, low=0, high=1)
    w = rand(3, 1, low=0.5, high=2.0)
    pw = rand(4, low=0.5, high=3.0)
    log_sig = -np.logaddexp(0, -x)
    log_sig_neg = -np.logaddexp(0, x)
    ref = -w * (pw * t * log_sig + (1 - t) * log_sig_neg)
    got = F.binary_cross_entropy_with_logits(kiln.tensor(x), kiln.tensor(t), weight=kiln.tensor(w),
                                             reduction=reduction, pos_weight=kiln.tensor(pw))
    assert_close(got, np_reduce(ref, reduction))
    plain = F.binary_cross_entropy_with_logits(kiln.tensor(x), kiln.tensor(t), reduction=reduction)
    assert_close(plain, np_reduce(-(t * log_sig + (1 - t) * log_sig_neg), reduction))


def test_binary_cross_entropy_with_logits_gradients_and_errors():
    t = kiln.tensor(rand(2, 3, low=0, high=1))
    pw = kiln.tensor(rand(3, low=0.5, high=3.0))
    gradcheck(lambda x: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw), rand(2, 3))
    gradcheck(lambda x, tt: F.binary_cross_entropy_with_logits(x, tt), rand(2, 3),
              rand(2, 3, low=0, high=1))
    with pytest.raises(ValueError, match=r"\[binary_cross_entropy_with_logits\] Target size \[3\]"):
        F.binary_cross_entropy_with_logits(kiln.ones(2), kiln.ones(3))


# --- smooth_l1 / huber / weighted pointwise / kl_div --------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_smooth_l1_huber_and_weighted_pointwise_losses(reduction):
    a, b, w = rand(3, 4), rand(3, 4), rand(3, 4, low=0.5, high=2.0)
    d = np.abs(a - b)
    sl1 = np.where(d < 0.8, 0.5 * d * d / 0.8, d - 0.4)
    hub = np.where(d < 0.8, 0.5 * d * d, 0.8 * (d - 0.4))
    A, B, W = kiln.tensor(a), kiln.tensor(b), kiln.tensor(w)
    assert_close(F.smooth_l1_loss(A, B, reduction=reduction, beta=0.8), np_reduce(sl1, reduction))
    assert_close(F.huber_loss(A, B, reduction=reduction, delta=0.8), np_reduce(hub, reduction))
    assert_close(F.huber_loss(A, B, reduction=reduction, delta=0.8, weight=W),
                 np_reduce(hub * w, reduction))
    weighted_mean = {"mean": lambda v: v.sum() / w.sum(), "sum": np.sum, "none": lambda v: v}
    assert_close(F.mse_loss(A, B, reduction=reduction, weight=W),
                 weighted_mean[reduction](w * d * d))
    assert_close(F.l1_loss(A, B, reduction=reduction, weight=W), weighted_mean[reduction](w * d))
    assert_close(F.smooth_l1_loss(A, B, reduction=reduction, beta=0.0), np_reduce(d, reduction))


@pytest.mark.parametrize("reduction", ["mean", "sum", "batchmean", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    lp = np_log_softmax(rand(4, 5), 1)
    q = np.exp(np_log_softmax(rand(4, 5), 1))
    q[1, 2] = 0.0
    if log_target:
        tq = np_log_softmax(rand(4, 5), 1)
        pointwise = np.exp(tq) * (tq - lp)
    else:
        tq = q
        pointwise = np.where(q > 0, q * np.log(np.where(q > 0, q, 1)), 0) - q * lp
    ref = pointwise.sum() / 4 if reduction == "batchmean" else np_reduce(pointwise, reduction)
    got = F.kl_div(kiln.tensor(lp), kiln.tensor(tq), reduction=reduction, log_target=log_target)
    assert_close(got, ref)


def test_more_losses_gradients_and_errors():
    w = kiln.tensor(rand(2, 3, low=0.5, high=2.0))
    gradcheck(lambda a, b: F.smooth_l1_loss(a, b, beta=0.7), rand(2, 3), rand(2, 3))
    gradcheck(lambda a, b: F.huber_loss(a, b, delta=0.7, weight=w), rand(2, 3), rand(2, 3))
    gradcheck(lambda a, b: F.mse_loss(a, b, weight=w), rand(2, 3), rand(2, 3))
    q = np.exp(np_log_softmax(rand(2, 3), 1))
    gradcheck(lambda lp, t: F.kl_div(lp, t, reduction="batchmean"), rand(2, 3), q)
    gradcheck(lambda lp, t: F.kl_div(lp, t, log_target=True), rand(2, 3), rand(2, 3))
    with pytest.raises(ValueError, match=r"\[mse_loss\] Weights and input must have the same size"):
        F.mse_loss(kiln.ones(2, 3), kiln.ones(2, 3), weight=kiln.ones(3))
    with pytest.raises(RuntimeError, match=r"\[smooth_l1_loss\].*negative.*-1"):
        F.smooth_l1_loss(kiln.ones(2), kiln.ones(2), beta=-1.0)
    with pytest.raises(RuntimeError, match=r"\[huber_loss\].*non-positive"):
        F.huber_loss(kiln.ones(2), kiln.ones(2), delta=0.0)
    with pytest.raises(ValueError, match=r"\[kl_div\] 'batch' is not a valid value for reduction"):
        F.kl_div(kiln.ones(2), kiln.ones(2), reduction="batch")
