"""kiln.nn.functional against torch.nn.functional on the same device, forward and input
gradients (runs where PyTorch is installed: the GPU machine)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

# seeded_data is an autouse fixture: importing it enables it here.
from torch_compare import (  # noqa: E402, F401
    Const, DEVICES, Fixed, GRAD_DTYPES, HALF_DTYPES, Strided, U, bools, check, check_raises,
    reseed, seeded_data)

reseed(__name__)


def F(lib):
    return lib.nn.functional


def labels(*shape, classes=4):
    return Fixed(np.random.default_rng(sum(shape) + classes).integers(0, classes, shape))


def probs(*shape, dim=1):
    e = np.exp(U(*shape))
    return e / e.sum(axis=dim, keepdims=True)


def positive(*shape):
    return U(*shape, low=0.5, high=2.0)


# Ignored class 2 appears in the labels so ignore_index changes the result.
LABELS_WITH_2 = Fixed(np.array([0, 2, 3, 1, 2, 0]))

SOFTMAX = [
    ("softmax_d0", lambda lib, x: F(lib).softmax(x, dim=0)),
    ("softmax_d1", lambda lib, x: F(lib).softmax(x, dim=1)),
    ("softmax_dlast", lambda lib, x: lib.softmax(x, -1)),
    ("softmax_dtype", lambda lib, x: F(lib).softmax(x, dim=1, dtype=lib.float64)),
    ("log_softmax_d0", lambda lib, x: F(lib).log_softmax(x, dim=0)),
    ("log_softmax_d2", lambda lib, x: x.log_softmax(2)),
    ("log_softmax_fn", lambda lib, x: lib.log_softmax(x, dim=-2)),
    ("softmin", lambda lib, x: F(lib).softmin(x, dim=1)),
    ("softmax_method", lambda lib, x: x.softmax(-1)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in SOFTMAX])
def test_softmax_family(fn, dtype, device):
    x = U(2, 3, 5) * 3
    check(fn, [x], device, dtype)
    check(fn, [Strided(x)], device, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_empty_and_0d(device):
    check(lambda lib, x: F(lib).softmax(x, dim=1), [U(0, 3)], device, grad=False)
    check(lambda lib, x: F(lib).log_softmax(x, dim=0), [U()], device)


# (id, fn, inputs): float inputs of the tested dtype; Const inputs never require grad.
LOSSES = [
    ("ce", lambda lib, x, y: F(lib).cross_entropy(x, y), [U(5, 4), labels(5)]),
    ("ce_weight", lambda lib, x, y, w: F(lib).cross_entropy(x, y, weight=w),
     [U(6, 4), LABELS_WITH_2, Const(positive(4))]),
    ("ce_ignore_index", lambda lib, x, y: F(lib).cross_entropy(x, y, ignore_index=2),
     [U(6, 4), LABELS_WITH_2]),
    ("ce_label_smoothing", lambda lib, x, y: F(lib).cross_entropy(x, y, label_smoothing=0.2),
     [U(5, 4), labels(5)]),
    ("ce_all_options", lambda lib, x, y, w: F(lib).cross_entropy(
        x, y, weight=w, ignore_index=2, label_smoothing=0.1, reduction="sum"),
     [U(6, 4), LABELS_WITH_2, Const(positive(4))]),
    ("ce_weight_smoothing_mean", lambda lib, x, y, w: F(lib).cross_entropy(
        x, y, weight=w, label_smoothing=0.3), [U(6, 4), LABELS_WITH_2, Const(positive(4))]),
    ("ce_none", lambda lib, x, y: F(lib).cross_entropy(x, y, reduction="none"),
     [Strided(U(5, 4)), labels(5)]),
    ("ce_probs", lambda lib, x, p: F(lib).cross_entropy(x, p), [U(5, 4), Const(probs(5, 4))]),
    ("ce_probs_smoothing_weight", lambda lib, x, p, w: F(lib).cross_entropy(
        x, p, weight=w, label_smoothing=0.2, reduction="sum"),
     [U(5, 4), Const(probs(5, 4)), Const(positive(4))]),
    ("ce_probs_grad", lambda lib, x, p: F(lib).cross_entropy(x, p, reduction="none"),
     [U(5, 4), probs(5, 4)]),
    ("ce_spatial", lambda lib, x, y: F(lib).cross_entropy(x, y), [U(2, 4, 3), labels(2, 3)]),
    ("ce_spatial_probs", lambda lib, x, p: F(lib).cross_entropy(x, p),
     [U(2, 4, 3), Const(probs(2, 4, 3))]),
    ("ce_unbatched", lambda lib, x, y: F(lib).cross_entropy(x, y), [U(4), Fixed(np.array(3))]),
    ("nll", lambda lib, x, y: F(lib).nll_loss(F(lib).log_softmax(x, 1), y),
     [U(5, 4), labels(5)]),
    ("nll_weight_ignore_sum", lambda lib, x, y, w: F(lib).nll_loss(
        x, y, weight=w, ignore_index=2, reduction="sum"),
     [U(6, 4), LABELS_WITH_2, Const(positive(4))]),
    ("nll_weight_mean", lambda lib, x, y, w: F(lib).nll_loss(x, y, weight=w),
     [U(6, 4), LABELS_WITH_2, Const(positive(4))]),
    ("nll_spatial_none", lambda lib, x, y: F(lib).nll_loss(x, y, reduction="none"),
     [U(2, 4, 3), labels(2, 3)]),
    ("mse", lambda lib, a, b: F(lib).mse_loss(a, b), [U(3, 4), U(3, 4)]),
    ("mse_sum", lambda lib, a, b: F(lib).mse_loss(a, b, reduction="sum"),
     [Strided(U(3, 4)), U(3, 4)]),
    ("mse_none", lambda lib, a, b: F(lib).mse_loss(a, b, reduction="none"), [U(3, 4), U(3, 4)]),
    ("l1", lambda lib, a, b: F(lib).l1_loss(a, b), [U(3, 4), U(3, 4)]),
    ("l1_sum", lambda lib, a, b: F(lib).l1_loss(a, b, reduction="sum"), [U(3, 4), U(3, 4)]),
    ("smooth_l1", lambda lib, a, b: F(lib).smooth_l1_loss(a, b, beta=0.5),
     [U(3, 4), U(3, 4)]),
    ("smooth_l1_default", lambda lib, a, b: F(lib).smooth_l1_loss(a, b, reduction="none"),
     [U(3, 4), U(3, 4)]),
    ("huber", lambda lib, a, b: F(lib).huber_loss(a, b, delta=0.7), [U(3, 4), U(3, 4)]),
    ("huber_none", lambda lib, a, b: F(lib).huber_loss(a, b, reduction="none", delta=1.5),
     [U(3, 4), U(3, 4)]),
    ("bce", lambda lib, p, t: F(lib).binary_cross_entropy(p, t),
     [U(3, 4, low=0.05, high=0.95), Const(U(3, 4, low=0, high=1))]),
    ("bce_weight_sum", lambda lib, p, t, w: F(lib).binary_cross_entropy(
        p, t, weight=w, reduction="sum"),
     [U(3, 4, low=0.05, high=0.95), U(3, 4, low=0, high=1), Const(positive(4))]),
    ("bce_logits", lambda lib, x, t: F(lib).binary_cross_entropy_with_logits(x, t),
     [U(3, 4), U(3, 4, low=0, high=1)]),
    ("bce_logits_pos_weight", lambda lib, x, t, w, pw: F(lib).binary_cross_entropy_with_logits(
        x, t, weight=w, pos_weight=pw, reduction="none"),
     [U(3, 4), Const(U(3, 4, low=0, high=1)), Const(positive(3, 1)), Const(positive(4))]),
    ("kl_batchmean", lambda lib, a, b: F(lib).kl_div(a, b, reduction="batchmean"),
     [np.log(probs(3, 4)), probs(3, 4)]),
    ("kl_log_target_sum", lambda lib, a, b: F(lib).kl_div(a, b, reduction="sum",
                                                          log_target=True),
     [np.log(probs(3, 4)), np.log(probs(3, 4))]),
    ("kl_none", lambda lib, a, b: F(lib).kl_div(a, b, reduction="none"),
     [np.log(probs(3, 4)), Const(probs(3, 4))]),
]

LAYERS = [
    ("linear", lambda lib, x, w, b: F(lib).linear(x, w, b), [U(2, 5, 4), U(3, 4), U(3)]),
    ("linear_nobias", lambda lib, x, w: F(lib).linear(x, w), [Strided(U(5, 4)), U(3, 4)]),
    ("linear_1d", lambda lib, x, w, b: F(lib).linear(x, w, b), [U(4), Strided(U(3, 4)), U(3)]),
    ("bilinear", lambda lib, a, b, w, c: F(lib).bilinear(a, b, w, c),
     [U(5, 3), U(5, 4), U(2, 3, 4), U(2)]),
    ("layer_norm", lambda lib, x, w, b: F(lib).layer_norm(x, (4,), w, b, eps=1e-5),
     [U(2, 3, 4), U(4), U(4)]),
    ("layer_norm_2d", lambda lib, x, w, b: F(lib).layer_norm(x, [3, 4], w, b),
     [Strided(U(2, 3, 4)), U(3, 4), U(3, 4)]),
    ("layer_norm_plain", lambda lib, x: F(lib).layer_norm(x, (4,), eps=1e-3), [U(5, 4)]),
    ("rms_norm", lambda lib, x, w: F(lib).rms_norm(x, (4,), w, eps=1e-6), [U(2, 3, 4), U(4)]),
    ("rms_norm_default_eps", lambda lib, x: F(lib).rms_norm(x, [3, 4]), [U(2, 3, 4)]),
    ("embedding", lambda lib, i, w: F(lib).embedding(i, w),
     [Fixed(np.array([[0, 1, 2], [5, 2, 2]])), U(6, 3)]),
    ("embedding_padding", lambda lib, i, w: F(lib).embedding(i, w, padding_idx=1),
     [Fixed(np.array([[0, 1, 1], [5, 2, 2]])), U(6, 3)]),
    ("normalize", lambda lib, x: F(lib).normalize(x, p=2.0, dim=1), [U(3, 4)]),
    ("normalize_p1", lambda lib, x: F(lib).normalize(x, p=1.0, dim=0), [Strided(U(3, 4))]),
    ("cosine_similarity", lambda lib, a, b: F(lib).cosine_similarity(a, b, dim=1),
     [U(3, 4), U(1, 4)]),
    ("glu", lambda lib, x: F(lib).glu(x, dim=-1), [U(3, 4)]),
    ("one_hot", lambda lib, i: F(lib).one_hot(i, num_classes=5), [Fixed(np.array([0, 4, 2]))]),
    ("one_hot_infer", lambda lib, i: F(lib).one_hot(i), [Fixed(np.array([[1, 3], [0, 0]]))]),
]


def _sdpa(**kw):
    def fn(lib, q, k, v, *mask):
        return F(lib).scaled_dot_product_attention(q, k, v, attn_mask=mask[0] if mask else None,
                                                   **kw)
    return fn


ATTENTION = [
    ("sdpa", _sdpa(), [U(2, 2, 3, 4), U(2, 2, 5, 4), U(2, 2, 5, 6)]),
    ("sdpa_causal", _sdpa(is_causal=True), [U(2, 2, 4, 4), U(2, 2, 4, 4), U(2, 2, 4, 4)]),
    ("sdpa_causal_rect", _sdpa(is_causal=True), [U(1, 2, 3, 4), U(1, 2, 5, 4), U(1, 2, 5, 4)]),
    ("sdpa_bool_mask", _sdpa(), [U(2, 2, 3, 4), U(2, 2, 5, 4), U(2, 2, 5, 4),
                                 Fixed(np.triu(np.ones((3, 5), dtype=bool), -1))]),
    ("sdpa_float_mask", _sdpa(), [U(2, 2, 3, 4), U(2, 2, 5, 4), U(2, 2, 5, 4),
                                  Const(U(2, 1, 3, 5))]),
    ("sdpa_scale", _sdpa(scale=0.3), [U(2, 3, 4), U(2, 5, 4), Strided(U(2, 5, 4))]),
    ("sdpa_3d", _sdpa(), [U(3, 3, 4), U(3, 2, 4), U(3, 2, 4)]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES)
@pytest.mark.parametrize("fn,inputs", [pytest.param(f, i, id=n) for n, f, i in
                                       LOSSES + LAYERS + ATTENTION])
def test_functional(fn, inputs, dtype, device):
    # Fused GPU attention kernels accumulate float32 in a different order.
    tol = (1e-4, 1e-4) if dtype == "float32" and device == "cuda" else None
    check(fn, inputs, device, dtype, tol=tol)


HALF_OK = {"ce_probs", "mse", "l1", "smooth_l1", "huber", "bce_logits", "kl_batchmean",
           "linear", "linear_nobias", "layer_norm", "layer_norm_plain", "rms_norm", "embedding",
           "normalize", "glu", "sdpa", "sdpa_causal", "sdpa_bool_mask", "sdpa_scale"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("fn,inputs", [pytest.param(f, i, id=n) for n, f, i in
                                       LOSSES + LAYERS + ATTENTION if n in HALF_OK])
def test_functional_half(fn, inputs, dtype, device):
    check(fn, inputs, device, dtype, tol=(3e-2, 3e-2))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_silu_wide_range(approximate, device):
    x = U(4, 6, low=-8, high=8)
    for dtype in GRAD_DTYPES + HALF_DTYPES:
        check(lambda lib, a: F(lib).gelu(a, approximate=approximate), [x], device, dtype)
        check(lambda lib, a: F(lib).silu(a), [x], device, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_functional_rejections(device):
    check_raises(lambda lib, x, y: F(lib).cross_entropy(x, y), [U(5, 4), labels(4)], device)
    check_raises(lambda lib, x, w: F(lib).linear(x, w), [U(2, 3), U(4, 4)], device)
    check_raises(lambda lib, x: F(lib).layer_norm(x, (3,)), [U(2, 4)], device)
    check_raises(lambda lib, a, b: F(lib).mse_loss(a, b, reduction="avg"), [U(3), U(3)], device)
    check_raises(lambda lib, q, k, v, m: F(lib).scaled_dot_product_attention(q, k, v, m),
                 [U(1, 3, 4), U(1, 5, 4), U(1, 5, 4), Fixed(bools(3, 4))], device)


def test_out_of_range_indices_cpu():
    # On CUDA PyTorch reports these through a device-side assert that poisons the context.
    check_raises(lambda lib, x, y: F(lib).nll_loss(x, y), [U(5, 4), Fixed(np.arange(5) + 1)],
                 "cpu")
    check_raises(lambda lib, i, w: F(lib).embedding(i, w), [Fixed(np.array([6])), U(6, 3)],
                 "cpu")
