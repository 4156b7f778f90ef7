"""kiln.nn extras written in Python on kiln ops (losses, activations, dropout variants,
distances, shuffles, LRN, LP pooling, unpooling, LazyLinear, weight_norm) against NumPy
references, with float64 gradchecks and PyTorch's error types. PyTorch comparisons are in
test_vs_torch_nn_extras.py."""

import math
import warnings

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from helpers import RNG, assert_close, gradcheck, noncontig, rand


def T(a, **kw):
    return kiln.tensor(np.asarray(a), **kw)


def signs(*shape):
    return np.where(RNG.random(shape) > 0.5, 1.0, -1.0)


def np_reduce(loss, reduction):
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]


def np_logsigmoid(x):
    return -np.logaddexp(0, -x)


# ---- losses ----------------------------------------------------------------------------------

REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cosine_embedding_loss(reduction):
    a, b, y = rand(4, 5), rand(4, 5), signs(4)
    cos = (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))
    ref = np.where(y == 1, 1 - cos, np.maximum(cos - 0.2, 0))
    out = F.cosine_embedding_loss(T(a), noncontig(b), T(y), margin=0.2, reduction=reduction)
    assert_close(out, np_reduce(ref, reduction))
    assert_close(nn.CosineEmbeddingLoss(0.2, reduction=reduction)(T(a), T(b), T(y)),
                 np_reduce(ref, reduction))
    # 1-D inputs with a 0-d target.
    assert_close(F.cosine_embedding_loss(T(a[0]), T(b[0]), T(y[0])), np_reduce(ref[:1] * 0 + (
        1 - cos[0] if y[0] == 1 else max(cos[0], 0)), "mean"))
    gradcheck(lambda p, q: F.cosine_embedding_loss(p, q, T(y), 0.1, reduction=reduction), a, b)
    with pytest.raises(RuntimeError, match=r"\[cosine_embedding_loss\]"):
        F.cosine_embedding_loss(T(a), T(b), T(y[:, None]))
    with pytest.raises(RuntimeError, match=r"\[cosine_embedding_loss\]"):
        F.cosine_embedding_loss(T(a[0]), T(b[0]), T(y))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_and_hinge_and_soft_margin(reduction):
    a, b, y = rand(6), rand(6), signs(6)
    ref = np.maximum(-y * (a - b) + 0.3, 0)
    assert_close(F.margin_ranking_loss(T(a), T(b), T(y), 0.3, reduction=reduction),
                 np_reduce(ref, reduction))
    assert_close(nn.MarginRankingLoss(0.3, reduction=reduction)(T(a), T(b), T(y)),
                 np_reduce(ref, reduction))
    gradcheck(lambda p, q: F.margin_ranking_loss(p, q, T(y), 0.3, reduction=reduction), a, b)
    with pytest.raises(RuntimeError, match=r"\[margin_ranking_loss\]"):
        F.margin_ranking_loss(T(a), T(b[None]), T(y))

    x, t = rand(3, 4), signs(3, 4)
    ref = np.where(t == 1, x, np.maximum(0, 1.5 - x))
    assert_close(F.hinge_embedding_loss(noncontig(x), T(t), 1.5, reduction=reduction),
                 np_reduce(ref, reduction))
    assert_close(nn.HingeEmbeddingLoss(1.5, reduction=reduction)(T(x), T(t)),
                 np_reduce(ref, reduction))
    gradcheck(lambda p: F.hinge_embedding_loss(p, T(t), 1.5, reduction=reduction), x)

    ref = np.log1p(np.exp(-t * x))
    assert_close(F.soft_margin_loss(T(x), T(t), reduction=reduction), np_reduce(ref, reduction))
    assert_close(nn.SoftMarginLoss(reduction=reduction)(T(x), T(t)), np_reduce(ref, reduction))
    gradcheck(lambda p: F.soft_margin_loss(p, T(t), reduction=reduction), x)
    with pytest.raises(ValueError, match=r"\[soft_margin_loss\]"):
        F.soft_margin_loss(T(x), T(t), reduction="avg")


def test_legacy_reduction_flags():
    x, t = rand(3, 4), signs(3, 4)
    ref = np.log1p(np.exp(-t * x))
    assert_close(F.soft_margin_loss(T(x), T(t), reduce=False), ref)
    assert_close(F.soft_margin_loss(T(x), T(t), size_average=False), ref.sum())


@pytest.mark.parametrize("with_weight", [False, True])
def test_multilabel_soft_margin_loss(with_weight):
    x, y = rand(3, 5), (RNG.random((3, 5)) > 0.5).astype(np.float64)
    w = rand(5, low=0.5, high=1.5)
    loss = -(y * np_logsigmoid(x) + (1 - y) * np_logsigmoid(-x))
    if with_weight:
        loss = loss * w
    ref = loss.mean(1)
    weight = T(w) if with_weight else None
    for reduction in REDUCTIONS:
        assert_close(F.multilabel_soft_margin_loss(T(x), T(y), weight, reduction=reduction),
                     np_reduce(ref, reduction))
    assert_close(nn.MultiLabelSoftMarginLoss(weight)(T(x), T(y)), ref.mean())
    gradcheck(lambda p: F.multilabel_soft_margin_loss(p, T(y), weight), x)


def np_multi_margin(x, y, p, margin, w):
    n, c = x.shape
    out = np.zeros(n)
    for i in range(n):
        for j in range(c):
            if j != y[i]:
                z = max(0.0, margin - x[i, y[i]] + x[i, j]) ** p
                out[i] += z * (w[y[i]] if w is not None else 1.0)
    return out / c


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("with_weight", [False, True])
def test_multi_margin_loss(p, with_weight):
    x, y = rand(4, 5), RNG.integers(0, 5, 4)
    w = rand(5, low=0.5, high=1.5) if with_weight else None
    ref = np_multi_margin(x, y, p, 0.7, w)
    weight = T(w) if with_weight else None
    for reduction in REDUCTIONS:
        assert_close(F.multi_margin_loss(T(x), T(y), p, 0.7, weight, reduction=reduction),
                     np_reduce(ref, reduction))
    assert_close(nn.MultiMarginLoss(p, 0.7, weight)(noncontig(x), T(y)), ref.mean())
    # Unbatched: (C,) scores with a 0-d target.
    assert_close(F.multi_margin_loss(T(x[1]), T(y[1]), p, 0.7, weight, reduction="none"),
                 ref[1])
    gradcheck(lambda s: F.multi_margin_loss(s, T(y), p, 0.7, weight), x)


def test_multi_margin_loss_errors():
    x, y = T(rand(2, 3)), T(np.array([0, 2]))
    with pytest.raises(ValueError, match=r"\[multi_margin_loss\]"):
        F.multi_margin_loss(x, y, p=3)
    with pytest.raises(ValueError, match=r"\[multi_margin_loss\]"):
        F.multi_margin_loss(x, y, weight=T(rand(3, 1)))
    with pytest.raises(ValueError, match=r"\[MultiMarginLoss\]"):
        nn.MultiMarginLoss(p=0)
    with pytest.raises(RuntimeError, match=r"\[multi_margin_loss\]"):
        F.multi_margin_loss(x, T(np.array([0, 1, 2])))


def np_multilabel_margin(x, y):
    n, c = x.shape
    out = np.zeros(n)
    for i in range(n):
        targets = []
        for v in y[i]:
            if v < 0:
                break
            targets.append(v)
        for j in targets:
            for k in range(c):
                if k not in targets:
                    out[i] += max(0.0, 1 - (x[i, j] - x[i, k]))
    return out / c


def test_multilabel_margin_loss():
    x = rand(3, 4)
    y = np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 0]])
    ref = np_multilabel_margin(x, y)
    for reduction in REDUCTIONS:
        assert_close(F.multilabel_margin_loss(T(x), T(y), reduction=reduction),
                     np_reduce(ref, reduction))
    assert_close(nn.MultiLabelMarginLoss()(T(x), T(y)), ref.mean())
    assert_close(F.multilabel_margin_loss(T(x[0]), T(y[0]), reduction="none"), ref[0])
    gradcheck(lambda s: F.multilabel_margin_loss(s, T(y)), x)
    with pytest.raises(RuntimeError, match=r"\[multilabel_margin_loss\]"):
        F.multilabel_margin_loss(T(x), T(y[:, :2]))


@pytest.mark.parametrize("log_input", [True, False])
@pytest.mark.parametrize("full", [False, True])
def test_poisson_nll_loss(log_input, full):
    x = rand(3, 4, low=0.1, high=2.0)
    t = RNG.integers(0, 5, (3, 4)).astype(np.float64)
    ref = np.exp(x) - t * x if log_input else x - t * np.log(x + 1e-8)
    if full:
        safe = np.where(t > 1, t, 2.0)
        ref = ref + np.where(t > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * np.pi * safe),
                             0)
    for reduction in REDUCTIONS:
        assert_close(F.poisson_nll_loss(T(x), T(t), log_input, full, reduction=reduction),
                     np_reduce(ref, reduction))
    assert_close(nn.PoissonNLLLoss(log_input, full)(T(x), T(t)), ref.mean())
    gradcheck(lambda p: F.poisson_nll_loss(p, T(t), log_input, full), x)


@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll_loss(full):
    x, t = rand(3, 4), rand(3, 4)
    v = rand(3, 4, low=0.2, high=2.0)
    v[0, 0] = 1e-9  # clamped to eps
    vc = np.maximum(v, 1e-6)
    ref = 0.5 * (np.log(vc) + (x - t) ** 2 / vc) + (0.5 * np.log(2 * np.pi) if full else 0)
    for reduction in REDUCTIONS:
        assert_close(F.gaussian_nll_loss(T(x), T(t), T(v), full, reduction=reduction),
                     np_reduce(ref, reduction))
    assert_close(nn.GaussianNLLLoss(full=full)(T(x), T(t), T(v)), ref.mean())
    # One variance per sample, with or without the trailing 1.
    ref1 = 0.5 * (np.log(v[:, 1:2]) + (x - t) ** 2 / v[:, 1:2])
    assert_close(F.gaussian_nll_loss(T(x), T(t), T(v[:, 1])), ref1.mean())
    assert_close(F.gaussian_nll_loss(T(x), T(t), T(v[:, 1:2])), ref1.mean())
    v2 = rand(3, 4, low=0.2, high=2.0)
    gradcheck(lambda p, q: F.gaussian_nll_loss(p, T(t), q, full), x, v2)
    with pytest.raises(ValueError, match=r"\[gaussian_nll_loss\]"):
        F.gaussian_nll_loss(T(x), T(t), T(v[:2]))
    with pytest.raises(ValueError, match=r"\[gaussian_nll_loss\]"):
        F.gaussian_nll_loss(T(x), T(t), T(-v))
    with pytest.raises(ValueError, match=r"\[gaussian_nll_loss\]"):
        F.gaussian_nll_loss(T(x), T(t), T(v), reduction="avg")


def np_pdist(a, b, p, eps=1e-6):
    return (np.abs(a - b + eps) ** p).sum(-1) ** (1 / p)


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_triplet_margin_loss(swap, p):
    a, pos, neg = rand(4, 3), rand(4, 3), rand(4, 3)
    d_neg = np_pdist(a, neg, p)
    if swap:
        d_neg = np.minimum(d_neg, np_pdist(pos, neg, p))
    ref = np.maximum(0.5 + np_pdist(a, pos, p) - d_neg, 0)
    for reduction in REDUCTIONS:
        assert_close(F.triplet_margin_loss(T(a), T(pos), T(neg), 0.5, p, swap=swap,
                                           reduction=reduction), np_reduce(ref, reduction))
    assert_close(nn.TripletMarginLoss(0.5, p, swap=swap)(T(a), T(pos), T(neg)), ref.mean())
    gradcheck(lambda x, y, z: F.triplet_margin_loss(x, y, z, 0.5, p, swap=swap), a, pos, neg)
    with pytest.raises(RuntimeError, match=r"\[triplet_margin_loss\]"):
        F.triplet_margin_loss(T(a), T(pos[0]), T(neg))


def test_triplet_margin_with_distance_loss():
    a, pos, neg = rand(4, 3), rand(4, 3), rand(4, 3)
    ref = np.maximum(1.0 + np_pdist(a, pos, 2) - np_pdist(a, neg, 2), 0)
    assert_close(F.triplet_margin_with_distance_loss(T(a), T(pos), T(neg)), ref.mean())
    l1 = lambda x, y: (x - y).abs().sum(-1)  # noqa: E731
    ref = np.maximum(0.5 + np.abs(a - pos).sum(-1) - np.minimum(
        np.abs(a - neg).sum(-1), np.abs(pos - neg).sum(-1)), 0)
    loss = nn.TripletMarginWithDistanceLoss(distance_function=l1, margin=0.5, swap=True,
                                            reduction="none")
    assert_close(loss(T(a), T(pos), T(neg)), ref)
    with pytest.raises(ValueError, match=r"\[triplet_margin_with_distance_loss\]"):
        F.triplet_margin_with_distance_loss(T(a), T(pos), T(neg), margin=0)
    with pytest.raises(ValueError, match=r"\[TripletMarginWithDistanceLoss\]"):
        nn.TripletMarginWithDistanceLoss(margin=-1.0)


def test_pairwise_distance_and_pdist():
    a, b = rand(4, 3), rand(4, 3)
    assert_close(F.pairwise_distance(T(a), noncontig(b)), np_pdist(a, b, 2))
    assert_close(nn.PairwiseDistance(1.0, keepdim=True)(T(a), T(b)), np_pdist(a, b, 1)[:, None])
    assert_close(F.pairwise_distance(T(a), T(b[0])), np_pdist(a, b[:1], 2))
    gradcheck(lambda x, y: F.pairwise_distance(x, y, 3.0), a, b)
    x = rand(5, 3)
    ref = [np.sqrt(((x[i] - x[j]) ** 2).sum()) for i in range(5) for j in range(i + 1, 5)]
    assert_close(F.pdist(T(x)), np.array(ref))
    gradcheck(lambda t: F.pdist(t, 1.5), x)
    assert F.pdist(T(x[:1])).shape == (0,)
    with pytest.raises(RuntimeError, match=r"\[pdist\]"):
        F.pdist(T(x[0]))
    c = nn.CosineSimilarity(dim=0)(T(a), T(b))
    ref = (a * b).sum(0) / (np.linalg.norm(a, axis=0) * np.linalg.norm(b, axis=0))
    assert_close(c, ref)


# ---- activations -----------------------------------------------------------------------------

SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

ACTIVATIONS = [
    ("selu", lambda x: F.selu(x), lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x)),
     nn.SELU()),
    ("celu", lambda x: F.celu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x / 0.7)),
     nn.CELU(0.7)),
    ("threshold", lambda x: F.threshold(x, 0.3, -2.0), lambda x: np.where(x > 0.3, x, -2.0),
     nn.Threshold(0.3, -2.0)),
    ("tanhshrink", F.tanhshrink, lambda x: x - np.tanh(x), nn.Tanhshrink()),
    ("softshrink", lambda x: F.softshrink(x, 0.6),
     lambda x: np.where(x > 0.6, x - 0.6, np.where(x < -0.6, x + 0.6, 0)), nn.Softshrink(0.6)),
    ("hardshrink", lambda x: F.hardshrink(x, 0.6), lambda x: np.where(np.abs(x) > 0.6, x, 0),
     nn.Hardshrink(0.6)),
    ("rrelu_eval", lambda x: F.rrelu(x, 0.1, 0.3), lambda x: np.where(x >= 0, x, 0.2 * x),
     nn.RReLU(0.1, 0.3).eval()),
]


@pytest.mark.parametrize("name,fn,ref,module", ACTIVATIONS, ids=[c[0] for c in ACTIVATIONS])
def test_activation(name, fn, ref, module):
    x = rand(3, 4)
    assert_close(fn(T(x)), ref(x))
    assert_close(fn(noncontig(x)), ref(x))
    assert_close(module(T(x)), ref(x))
    assert_close(fn(T(x, dtype=kiln.float32)), ref(x), dtype=kiln.float32)
    assert fn(T(np.zeros((0, 2)))).shape == (0, 2)
    gradcheck(fn, x)


@pytest.mark.parametrize("name,fn,ref", [
    ("selu_", F.selu_, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x))),
    ("celu_", lambda x: F.celu_(x, 1.3), lambda x: np.where(x > 0, x, 1.3 * np.expm1(x / 1.3))),
    ("threshold_", lambda x: F.threshold_(x, 0.1, 5.0), lambda x: np.where(x > 0.1, x, 5.0)),
    ("rrelu_", lambda x: F.rrelu_(x), lambda x: np.where(x >= 0, x, x * (1 / 8 + 1 / 3) / 2)),
])
def test_inplace_activations(name, fn, ref):
    x = rand(3, 4)
    t = T(x)
    assert fn(t) is t
    assert_close(t, ref(x))
    # Through autograd: the in-place result on a non-leaf, gradients checked numerically.
    gradcheck(lambda a: fn(a * 1.0), x)
    leaf = T(x, requires_grad=True)
    with pytest.raises(RuntimeError):
        fn(leaf)


def test_rrelu_training_slopes():
    x = -rand(2000, low=0.5, high=1.0)
    out = F.rrelu(T(x), 0.1, 0.3, training=True).numpy()
    slope = out / x
    assert slope.min() >= 0.1 and slope.max() <= 0.3
    assert abs(slope.mean() - 0.2) < 0.01 and slope.std() > 0.03
    assert_close(nn.RReLU()(T(-x)), -x)
    with pytest.raises(RuntimeError, match=r"\[rrelu\]"):
        F.rrelu(T(x), 0.5, 0.1)


def test_shrink_and_celu_errors():
    with pytest.raises(RuntimeError, match=r"\[softshrink\]"):
        F.softshrink(T(rand(3)), -0.1)
    with pytest.raises(RuntimeError, match=r"\[hardshrink\]"):
        F.hardshrink(T(rand(3)), -0.1)


def test_softmax2d():
    x = rand(2, 3, 2, 2)
    e = np.exp(x)
    assert_close(nn.Softmax2d()(T(x)), e / e.sum(1, keepdims=True))
    assert_close(nn.Softmax2d()(T(x[0])), e[0] / e[0].sum(0, keepdims=True))
    with pytest.raises(ValueError, match=r"\[Softmax2d\]"):
        nn.Softmax2d()(T(x[0, 0]))


def test_gumbel_softmax():
    logits = np.log(np.array([0.1, 0.6, 0.3]))
    batch = T(np.tile(logits, (4000, 1)))
    soft = F.gumbel_softmax(batch, tau=0.5)
    assert_close(soft.sum(-1), np.ones(4000))
    hard = F.gumbel_softmax(batch, hard=True)
    h = hard.numpy()
    assert set(np.unique(h)) <= {0.0, 1.0} and np.all(h.sum(-1) == 1)
    freq = h.mean(0)
    np.testing.assert_allclose(freq, [0.1, 0.6, 0.3], atol=0.03)
    # Straight-through: the hard sample carries the soft sample's gradient.
    x = T(rand(2, 3), requires_grad=True)
    kiln.manual_seed(3)
    (F.gumbel_softmax(x, hard=True, dim=0) * T(rand(2, 3))).sum().backward()
    assert x.grad is not None and np.abs(x.grad.numpy()).sum() > 0


# ---- dropout variants ------------------------------------------------------------------------

def test_alpha_dropout_statistics():
    x = RNG.standard_normal(200000)
    out = F.alpha_dropout(T(x), 0.3, training=True).numpy()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02
    alpha = 1.7580993408473766
    a = ((alpha ** 2 * 0.3 + 1) * 0.7) ** -0.5
    dropped = np.isclose(out, -alpha * a + alpha * a * 0.3)
    assert abs(dropped.mean() - 0.3) < 0.01
    m = nn.AlphaDropout(0.3)
    assert_close(m.eval()(T(x[:10])), x[:10])
    assert_close(F.alpha_dropout(T(x[:10]), 0.3), x[:10])  # training=False by default
    assert_close(F.alpha_dropout(T(x[:10]), 1.0, True), np.zeros(10))
    with pytest.raises(ValueError, match=r"\[alpha_dropout\]"):
        F.alpha_dropout(T(x), 1.5, True)


def test_alpha_dropout_affine_values():
    x = rand(50, 40)
    out = F.alpha_dropout(T(x), 0.5, True).numpy()
    p, alpha = 0.5, 1.7580993408473766
    a = ((alpha ** 2 * p + 1) * (1 - p)) ** -0.5
    kept = np.isclose(out, a * x + alpha * a * p)
    dropped = np.isclose(out, -alpha * a + alpha * a * p)
    assert np.all(kept | dropped) and kept.any() and dropped.any()


def channel_constant(out, x, dims):
    """Each (n, c) channel of out is either all zeros or x / (1 - p) (scale returned)."""
    ratio = np.where(x != 0, out / x, 0)
    flat = ratio.reshape(ratio.shape[:dims] + (-1,))
    assert np.allclose(flat, flat[..., :1])
    return flat[..., 0]


@pytest.mark.parametrize("fn,module,shape", [
    (F.dropout1d, nn.Dropout1d, (8, 16, 5)),
    (F.dropout1d, nn.Dropout1d, (16, 5)),
    (F.dropout3d, nn.Dropout3d, (4, 16, 2, 3, 2)),
    (F.dropout3d, nn.Dropout3d, (16, 2, 3, 2)),
])
def test_channel_dropout(fn, module, shape):
    x = rand(*shape, low=0.5, high=1.5)
    out = fn(T(x), 0.4).numpy()
    batched = len(shape) in (3, 5)
    scales = channel_constant(out, x, 2 if batched else 1)
    assert set(np.round(np.unique(scales), 6)) <= {0.0, round(1 / 0.6, 6)}
    assert 0 < (scales == 0).mean() < 1
    m = module(0.4)
    assert_close(m.eval()(T(x)), x)
    t = T(x)
    assert fn(t, 0.4, True, True) is t
    gradcheck(lambda a: fn(a, 0.0), x)


def test_feature_alpha_dropout_channels():
    x = rand(6, 20, 7)
    out = F.feature_alpha_dropout(T(x), 0.5, training=True).numpy()
    alpha = 1.7580993408473766
    a = ((alpha ** 2 * 0.5 + 1) * 0.5) ** -0.5
    dropped_value = -alpha * a + alpha * a * 0.5
    dropped = np.all(np.isclose(out, dropped_value), axis=2)
    kept = np.all(np.isclose(out, a * x + alpha * a * 0.5), axis=2)
    assert np.all(dropped | kept) and dropped.any() and kept.any()
    assert_close(nn.FeatureAlphaDropout(0.5).eval()(T(x)), x)


def test_channel_dropout_input_rules():
    with pytest.raises(RuntimeError, match=r"\[dropout1d\]"):
        F.dropout1d(T(rand(2, 3, 4, 5)))
    with pytest.raises(ValueError, match=r"\[dropout1d\]"):
        F.dropout1d(T(rand(2, 3)), p=-0.1)
    with pytest.raises(ValueError, match=r"\[Dropout3d\]"):
        nn.Dropout3d(2.0)
    with pytest.warns(UserWarning, match=r"\[dropout3d\]"):
        F.dropout3d(T(rand(2, 3, 4)), 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.dropout3d(T(rand(2, 3, 4, 5)), 0.5)


# ---- shape, normalisation and pooling modules --------------------------------------------

def test_channel_shuffle():
    x = rand(2, 6, 3)
    ref = x.reshape(2, 2, 3, 3).transpose(0, 2, 1, 3).reshape(2, 6, 3)
    assert_close(F.channel_shuffle(T(x), 2), ref)
    assert_close(nn.ChannelShuffle(2)(noncontig(x)), ref)
    gradcheck(lambda t: F.channel_shuffle(t, 3), x)
    with pytest.raises(RuntimeError, match=r"\[channel_shuffle\]"):
        F.channel_shuffle(T(x), 4)
    with pytest.raises(RuntimeError, match=r"\[channel_shuffle\]"):
        F.channel_shuffle(T(x[0]), 2)


def np_lrn(x, size, alpha, beta, k):
    c = x.shape[1]
    sq = x * x
    div = np.zeros_like(x)
    for ch in range(c):
        lo, hi = max(0, ch - size // 2), min(c, ch + (size - 1) // 2 + 1)
        div[:, ch] = sq[:, lo:hi].sum(1)
    return x / (k + alpha / size * div) ** beta


@pytest.mark.parametrize("shape", [(2, 5, 4), (2, 5, 3, 2), (1, 6, 2, 2, 2)])
@pytest.mark.parametrize("size", [2, 3])
def test_local_response_norm(shape, size):
    x = rand(*shape)
    ref = np_lrn(x, size, 0.3, 0.75, 1.5)
    assert_close(F.local_response_norm(T(x), size, 0.3, 0.75, 1.5), ref)
    assert_close(nn.LocalResponseNorm(size, 0.3, 0.75, 1.5)(T(x)), ref)
    gradcheck(lambda t: F.local_response_norm(t, size, 0.3, 0.75, 1.5), rand(1, 4, 3))
    with pytest.raises(ValueError, match=r"\[local_response_norm\]"):
        F.local_response_norm(T(rand(2, 3)), size)


def test_lp_pool():
    x = rand(2, 3, 7, low=0.1, high=2.0)
    ref = (x[..., :6].reshape(2, 3, 3, 2) ** 3).sum(-1) ** (1 / 3)
    assert_close(F.lp_pool1d(T(x), 3, 2), ref)
    assert_close(nn.LPPool1d(3, 2)(T(x)), ref)
    x2 = rand(1, 2, 4, 6, low=0.1, high=2.0)
    ref = np.sqrt((x2.reshape(1, 2, 2, 2, 2, 3) ** 2).sum((3, 5)))
    assert_close(F.lp_pool2d(T(x2), 2, (2, 3)), ref)
    assert_close(nn.LPPool2d(2.0, (2, 3))(T(x2)), ref)
    gradcheck(lambda t: F.lp_pool2d(t, 2, 2, stride=1), rand(1, 1, 3, 3, low=0.1, high=2.0))
    gradcheck(lambda t: F.lp_pool1d(t, 1.5, 3), rand(1, 2, 6, low=0.1, high=2.0))


def test_max_unpool():
    x = rand(2, 3, 4, 6)
    pooled, idx = F.max_pool2d(T(x), 2, return_indices=True)
    out = F.max_unpool2d(pooled, idx, 2)
    windows = x.reshape(2, 3, 2, 2, 3, 2)
    is_max = windows == windows.max(axis=(3, 5), keepdims=True)
    assert_close(out, np.where(is_max, windows, 0).reshape(2, 3, 4, 6))
    assert_close(nn.MaxUnpool2d(2)(pooled, idx), out.numpy())
    big = F.max_unpool2d(pooled, idx, 2, output_size=[2, 3, 5, 7])
    assert big.shape == (2, 3, 5, 7)
    assert_close(big.sum(), out.sum().item())
    gradcheck(lambda p: F.max_unpool2d(p, idx, 2), pooled.detach().numpy())
    x1 = rand(2, 8)
    p1, i1 = F.max_pool1d(T(x1), 2, return_indices=True)
    u1 = nn.MaxUnpool1d(2)(p1, i1)
    w = x1.reshape(2, 4, 2)
    assert_close(u1, np.where(w == w.max(-1, keepdims=True), w, 0).reshape(2, 8))
    with pytest.raises(RuntimeError, match=r"\[max_unpool2d\]"):
        F.max_unpool2d(pooled, idx[..., :1], 2)
    with pytest.raises(RuntimeError, match=r"\[max_unpool2d\]"):
        F.max_unpool2d(pooled, idx, 2, output_size=(2, 2))


def test_upsampling_modules():
    x = rand(1, 2, 2, 3)
    near = nn.UpsamplingNearest2d(scale_factor=2)(T(x))
    assert_close(near, x.repeat(2, axis=2).repeat(2, axis=3))
    bil = nn.UpsamplingBilinear2d(size=(3, 5))(T(x))
    # align_corners=True keeps the corners and puts midpoints halfway.
    assert_close(bil[..., ::2, ::2], x)
    assert_close(bil[..., 1, 0], (x[..., 0, 0] + x[..., 1, 0]) / 2)


def test_lazy_linear():
    m = nn.LazyLinear(3)
    assert m.has_uninitialized_params() and isinstance(m.weight, nn.UninitializedParameter)
    x = rand(2, 5).astype(np.float32)
    y = m(T(x))
    assert type(m) is nn.Linear and m.in_features == 5 and m.weight.shape == (3, 5)
    assert_close(y, x @ m.weight.detach().numpy().T + m.bias.detach().numpy(), kiln.float32)
    bound = 1 / math.sqrt(5)
    assert np.abs(m.weight.detach().numpy()).max() <= bound
    with pytest.raises(RuntimeError):
        m(T(rand(2, 4).astype(np.float32)))
    fresh = nn.LazyLinear(3)
    fresh.load_state_dict(m.state_dict())
    assert type(fresh) is nn.Linear and fresh.in_features == 5
    assert_close(fresh(T(x)), y.detach().numpy(), kiln.float32)
    nb = nn.LazyLinear(2, bias=False, dtype=kiln.float64)
    assert nb(T(rand(4, 3))).dtype == kiln.float64 and nb.bias is None


# ---- nn.utils ----------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm(dim):
    m = nn.Linear(3, 4).double()
    w = m.weight.detach().numpy().copy()
    nn.utils.weight_norm(m, dim=dim)
    names = sorted(n for n, _ in m.named_parameters())
    assert names == ["bias", "weight_g", "weight_v"]
    g_ref = (np.linalg.norm(w) if dim is None else
             np.linalg.norm(w, axis=1 - dim, keepdims=True))
    assert_close(m.weight_g, np.reshape(g_ref, m.weight_g.shape))
    x = rand(2, 3)
    assert_close(m(T(x)), x @ w.T + m.bias.detach().numpy())
    with kiln.no_grad():
        m.weight_g.mul_(2.0)
    assert_close(m(T(x)), x @ (2 * w).T + m.bias.detach().numpy())
    m(T(x)).sum().backward()
    assert m.weight_g.grad is not None and m.weight_v.grad is not None
    with pytest.raises(RuntimeError, match=r"\[weight_norm\]"):
        nn.utils.weight_norm(m, dim=dim)
    nn.utils.remove_weight_norm(m)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]
    assert_close(m.weight, 2 * w)
    with pytest.raises(ValueError, match=r"\[remove_weight_norm\]"):
        nn.utils.remove_weight_norm(m)


def test_weight_norm_gradcheck():
    m = nn.Linear(3, 2).double()
    nn.utils.weight_norm(m)
    x = T(rand(4, 3))

    # Plain tensors in place of the parameters, so the graph reaches gradcheck's inputs.
    del m.weight_g, m.weight_v

    def f(g, v):
        m.weight_g, m.weight_v = g, v
        return m(x)

    gradcheck(f, rand(2, 1), rand(2, 3))


# ---- affine_grid / grid_sample ---------------------------------------------------------------

def np_affine_grid(theta, h, w, align_corners):
    def axis(n):
        if n == 1:
            return np.zeros(1)
        c = np.linspace(-1, 1, n)
        return c if align_corners else c * (n - 1) / n
    xs, ys = np.meshgrid(axis(w), axis(h))
    base = np.stack([xs, ys, np.ones_like(xs)], -1)
    return np.einsum("hwk,njk->nhwj", base, theta)


def np_reflect(x, lo2, hi2):
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    d = abs(x - lo)
    flips = math.floor(d / span)
    extra = math.fmod(d, span)
    return extra + lo if flips % 2 == 0 else span - extra + lo


def np_grid_sample(x, grid, mode, padding, ac):
    n, c, h, w = x.shape
    _, ho, wo, _ = grid.shape
    out = np.zeros((n, c, ho, wo))

    def coord(g, size):
        p = (g + 1) / 2 * (size - 1) if ac else ((g + 1) * size - 1) / 2
        if padding == "reflection":
            p = np_reflect(p, 0, 2 * (size - 1)) if ac else np_reflect(p, -1, 2 * size - 1)
        if padding != "zeros":
            p = min(max(p, 0), size - 1)
        return p

    def pixel(b, xi, yi):
        if 0 <= xi < w and 0 <= yi < h:
            return x[b, :, yi, xi]
        return np.zeros(c)

    for b in range(n):
        for i in range(ho):
            for j in range(wo):
                px, py = coord(grid[b, i, j, 0], w), coord(grid[b, i, j, 1], h)
                if mode == "nearest":
                    out[b, :, i, j] = pixel(b, int(np.rint(px)), int(np.rint(py)))
                    continue
                x0, y0 = math.floor(px), math.floor(py)
                fx, fy = px - x0, py - y0
                out[b, :, i, j] = (pixel(b, x0, y0) * (1 - fx) * (1 - fy)
                                   + pixel(b, x0 + 1, y0) * fx * (1 - fy)
                                   + pixel(b, x0, y0 + 1) * (1 - fx) * fy
                                   + pixel(b, x0 + 1, y0 + 1) * fx * fy)
    return out


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid(align_corners):
    theta = rand(2, 2, 3)
    ref = np_affine_grid(theta, 3, 4, align_corners)
    assert_close(F.affine_grid(T(theta), (2, 5, 3, 4), align_corners), ref)
    assert_close(F.affine_grid(T(theta), [2, 1, 1, 4], align_corners),
                 np_affine_grid(theta, 1, 4, align_corners))
    gradcheck(lambda t: F.affine_grid(t, (2, 1, 2, 3), align_corners), theta)
    with pytest.raises(ValueError, match=r"\[affine_grid\]"):
        F.affine_grid(T(rand(2, 3, 3)), (2, 1, 3, 4))
    with pytest.raises(ValueError, match=r"\[affine_grid\]"):
        F.affine_grid(T(np.ones((2, 2, 3), dtype=np.int64)), (2, 1, 3, 4))
    with pytest.raises(ValueError, match=r"\[affine_grid\]"):
        F.affine_grid(T(theta), (2, 1, 0, 4))
    with pytest.raises(NotImplementedError, match=r"\[affine_grid\]"):
        F.affine_grid(T(theta), (2, 1, 3))


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(mode, padding, align_corners):
    x = rand(2, 2, 3, 4)
    # Positions well outside [-1, 1] exercise the padding modes (reflection folds twice).
    grid = rand(2, 3, 5, 2, low=-3.2, high=3.2)
    ref = np_grid_sample(x, grid, mode, padding, align_corners)
    out = F.grid_sample(T(x), T(grid), mode, padding, align_corners)
    assert_close(out, ref)
    assert_close(F.grid_sample(noncontig(x), T(grid), mode, padding, align_corners), ref)
    gradcheck(lambda a: F.grid_sample(a, T(grid[:1, :2, :2]), mode, padding, align_corners),
              x[:1])
    if mode == "bilinear":
        gradcheck(lambda g: F.grid_sample(T(x[:1]), g, mode, padding, align_corners),
                  grid[:1, :2, :2])


def test_grid_sample_errors():
    x, g = T(rand(1, 1, 3, 3)), T(rand(1, 2, 2, 2))
    with pytest.raises(ValueError, match=r"\[grid_sample\]"):
        F.grid_sample(x, g, mode="area")
    with pytest.raises(ValueError, match=r"\[grid_sample\]"):
        F.grid_sample(x, g, padding_mode="wrap")
    with pytest.raises(NotImplementedError, match=r"\[grid_sample\]"):
        F.grid_sample(x, g, mode="bicubic")
    with pytest.raises(RuntimeError, match=r"\[grid_sample\]"):
        F.grid_sample(x, T(rand(1, 2, 2, 3)))


@pytest.mark.parametrize("name", ["selu", "celu", "rrelu", "threshold", "hardshrink", "prelu",
                                  "alpha_dropout", "conv2d", "pixel_shuffle", "pdist",
                                  "cosine_similarity", "pairwise_distance"])
def test_top_level_aliases_are_the_functional_ops(name):
    # PyTorch scripts call torch.selu(x) etc.; kiln's top level serves nn.functional's op.
    assert getattr(kiln, name) is getattr(kiln.nn.functional, name)
