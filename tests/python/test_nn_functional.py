"""kiln.nn.functional against NumPy references: softmax family, linear,
layer_norm, rms_norm, normalize, embedding, one_hot, activations, attention."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import RNG, assert_close, gradcheck, noncontig, np_attention, rand



# --- NumPy references ---------------------------------------------------------

def np_log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))



def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y



# --- softmax / log_softmax ----------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_matches_numpy(dim):
    x = rand(3, 4, 5) * 10
    ref = np.exp(np_log_softmax(x, dim))
    assert_close(kiln.softmax(kiln.tensor(x), dim), ref)
    assert_close(F.softmax(kiln.tensor(x), dim=dim), ref)
    assert_close(kiln.tensor(x).softmax(dim), ref)
    assert_close(kiln.log_softmax(kiln.tensor(x), dim), np_log_softmax(x, dim))
    assert_close(F.log_softmax(kiln.tensor(x), dim), np_log_softmax(x, dim))
    assert_close(kiln.tensor(x).log_softmax(dim), np_log_softmax(x, dim))


def test_softmax_is_stable_for_large_inputs():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]])
    assert_close(kiln.softmax(kiln.tensor(x), 1), np.exp(np_log_softmax(x, 1)))
    assert_close(kiln.log_softmax(kiln.tensor(x), 1), np_log_softmax(x, 1))


def test_softmax_noncontiguous_float32_dtype_arg_and_edge_shapes():
    x = rand(4, 3)
    assert_close(kiln.softmax(noncontig(x), 0), np.exp(np_log_softmax(x, 0)))
    x32 = kiln.tensor(x.astype(np.float32))
    out = kiln.log_softmax(x32, 1, dtype=kiln.float64)
    assert out.dtype == kiln.float64
    assert_close(out, np_log_softmax(x, 1), atol=1e-6, rtol=1e-6)
    assert kiln.softmax(x32, 1).dtype == kiln.float32
    half = kiln.softmax(kiln.tensor(x, dtype=kiln.float16), 1)
    assert half.dtype == kiln.float16
    assert_close(half, np.exp(np_log_softmax(x, 1)), dtype=kiln.float16)
    assert_close(kiln.softmax(kiln.tensor(2.5), 0), np.float64(1.0))
    assert kiln.softmax(kiln.zeros(0, 3), 1).shape == (0, 3)
    # Deprecated implicit dim: 1 for 2-D inputs.
    assert_close(F.softmax(kiln.tensor(x)), np.exp(np_log_softmax(x, 1)))


def test_softmax_gradients():
    gradcheck(lambda x: kiln.softmax(x, 1), rand(2, 3))
    gradcheck(lambda x: kiln.log_softmax(x, 0), rand(3, 2))
    gradcheck(lambda x: kiln.softmax(x, -1) * kiln.arange(4.0, dtype=kiln.float64), rand(2, 4))


def test_softmax_double_backward():
    x = kiln.tensor(rand(2, 3), requires_grad=True)
    w = kiln.tensor(rand(2, 3))
    (g,) = kiln.autograd.grad((kiln.log_softmax(x, 1) * w).sum(), [x], create_graph=True)
    (gg,) = kiln.autograd.grad((g * g).sum(), [x])
    # d/dx of sum((w - softmax(x) * sum(w))^2), by central differences.
    def f(a):
        s = np.exp(np_log_softmax(a, 1))
        return ((w.numpy() - s * w.numpy().sum(1, keepdims=True)) ** 2).sum()
    a, h = x.detach().numpy(), 1e-6
    num = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[i] = h
        num[i] = (f(a + e) - f(a - e)) / (2 * h)
    assert_close(gg, num, atol=1e-6, rtol=1e-6)


def test_softmax_errors():
    with pytest.raises(IndexError, match=r"\[softmax\]"):
        kiln.softmax(kiln.ones(2, 3), 2)
    with pytest.raises(NotImplementedError, match=r"\[log_softmax\].*int64"):
        kiln.log_softmax(kiln.tensor([1, 2]), 0)


# --- linear / layer_norm ------------------------------------------------------

def test_linear():
    x, w, b = rand(2, 5, 3), rand(4, 3), rand(4)
    assert_close(F.linear(kiln.tensor(x), kiln.tensor(w), kiln.tensor(b)), x @ w.T + b)
    assert_close(F.linear(noncontig(x[0]), kiln.tensor(w)), x[0] @ w.T)
    gradcheck(lambda x, w, b: F.linear(x, w, b), rand(2, 3), rand(4, 3), rand(4))
    with pytest.raises(RuntimeError, match=r"\[linear\].*\[2, 3\].*\[4, 5\]"):
        F.linear(kiln.ones(2, 3), kiln.ones(4, 5))


def test_layer_norm():
    x, w, b = rand(2, 3, 4), rand(3, 4), rand(3, 4)
    got = F.layer_norm(kiln.tensor(x), (3, 4), kiln.tensor(w), kiln.tensor(b), eps=1e-3)
    assert_close(got, np_layer_norm(x, 2, w, b, 1e-3))
    assert_close(F.layer_norm(noncontig(x), [4]), np_layer_norm(x, 1))
    x32 = kiln.tensor(x.astype(np.float32))
    assert_close(F.layer_norm(x32, 4), np_layer_norm(x, 1), dtype=kiln.float32, atol=1e-4)
    assert_close(F.layer_norm(kiln.tensor(x, dtype=kiln.float16), 4), np_layer_norm(x, 1),
                 dtype=kiln.float16)


def test_layer_norm_gradients():
    gradcheck(lambda x, w, b: F.layer_norm(x, (3,), w, b), rand(2, 3), rand(3), rand(3))
    gradcheck(lambda x: F.layer_norm(x, (2, 2)), rand(2, 2, 2))
    x = kiln.tensor(rand(2, 3), requires_grad=True)
    loss = (F.layer_norm(x, 3) * kiln.tensor(rand(2, 3))).sum()
    (g,) = kiln.autograd.grad(loss, [x], create_graph=True)
    (gg,) = kiln.autograd.grad(g.pow(2).sum(), [x])
    assert np.abs(gg.numpy()).sum() > 0


def test_layer_norm_errors():
    with pytest.raises(RuntimeError, match=r"\[layer_norm\].*normalized_shape=\[3\].*\[2, 4\]"):
        F.layer_norm(kiln.ones(2, 4), (3,))
    with pytest.raises(RuntimeError, match=r"\[layer_norm\].*weight.*\[2\]"):
        F.layer_norm(kiln.ones(2, 4), (4,), weight=kiln.ones(2))


# --- embedding / one_hot ------------------------------------------------------

def test_embedding_forward():
    w = rand(6, 3)
    idx = np.array([[0, 5, 2], [2, 2, 1]])
    assert_close(F.embedding(kiln.tensor(idx), kiln.tensor(w)), w[idx])
    assert_close(F.embedding(kiln.tensor(idx, dtype=kiln.int32), noncontig(w)), w[idx])
    assert F.embedding(kiln.zeros(0, dtype=kiln.int64), kiln.tensor(w)).shape == (0, 3)
    assert_close(F.embedding(kiln.tensor(4), kiln.tensor(w)), w[4])


def test_embedding_backward_accumulates_and_skips_padding():
    idx = np.array([[0, 5, 2], [2, 2, 1]])
    g = rand(2, 3, 3)
    for pad, scale in [(None, False), (2, False), (-1, False), (None, True)]:
        w = kiln.tensor(rand(6, 3), requires_grad=True)
        out = F.embedding(kiln.tensor(idx), w, padding_idx=pad, scale_grad_by_freq=scale)
        (out * kiln.tensor(g)).sum().backward()
        ref = np.zeros((6, 3))
        counts = np.bincount(idx.ravel(), minlength=6)
        for i, row in zip(idx.ravel(), g.reshape(-1, 3)):
            if pad is None or i != pad % 6:
                ref[i] += row / counts[i] if scale else row
        assert_close(w.grad, ref)


def test_embedding_gradients_and_errors():
    idx = kiln.tensor([[1, 0], [1, 2]])
    gradcheck(lambda w: F.embedding(idx, w), rand(3, 2))
    w = kiln.tensor(rand(3, 2), requires_grad=True)
    (g,) = kiln.autograd.grad((F.embedding(idx, w) ** 2).sum(), [w], create_graph=True)
    (gg,) = kiln.autograd.grad(g.sum(), [w])
    counts = np.array([1, 2, 1])[:, None]
    assert_close(gg, 2 * np.broadcast_to(counts, (3, 2)))
    with pytest.raises(IndexError, match=r"\[embedding\].*index 3 .*3 rows"):
        F.embedding(kiln.tensor([0, 3]), kiln.ones(3, 2))
    with pytest.raises(IndexError, match=r"\[embedding\].*index -1 "):
        F.embedding(kiln.tensor([-1]), kiln.ones(3, 2))
    with pytest.raises(RuntimeError, match=r"\[embedding\].*float32"):
        F.embedding(kiln.tensor([0.0]), kiln.ones(3, 2))
    with pytest.raises(AssertionError, match="Padding_idx"):
        F.embedding(kiln.tensor([0]), kiln.ones(3, 2), padding_idx=3)
    with pytest.raises(NotImplementedError, match=r"\[embedding\].*max_norm"):
        F.embedding(kiln.tensor([0]), kiln.ones(3, 2), max_norm=1.0)


def test_one_hot():
    t = np.array([[0, 3], [2, 1]])
    ref = np.eye(4, dtype=np.int64)[t]
    got = F.one_hot(kiln.tensor(t))
    assert got.dtype == kiln.int64
    assert_close(got, ref)
    assert_close(F.one_hot(kiln.tensor(t), num_classes=6), np.eye(6, dtype=np.int64)[t])
    assert F.one_hot(kiln.zeros(0, dtype=kiln.int64), 3).shape == (0, 3)
    with pytest.raises(RuntimeError, match=r"\[one_hot\].*int64"):
        F.one_hot(kiln.tensor([1.0]))
    with pytest.raises(RuntimeError, match=r"\[one_hot\].*non-negative"):
        F.one_hot(kiln.tensor([-1, 0]))
    with pytest.raises(RuntimeError, match=r"\[one_hot\].*smaller than num_classes"):
        F.one_hot(kiln.tensor([3]), 3)
    with pytest.raises(RuntimeError, match=r"\[one_hot\].*empty"):
        F.one_hot(kiln.zeros(0, dtype=kiln.int64))


# --- activations --------------------------------------------------------------

def test_composite_activations():
    x = rand(3, 4) * 5
    assert_close(F.logsigmoid(kiln.tensor(x * 10)), -np.logaddexp(0, -x * 10))
    assert_close(F.softsign(kiln.tensor(x)), x / (1 + np.abs(x)))
    assert_close(F.hardtanh(kiln.tensor(x)), np.clip(x, -1, 1))
    assert_close(F.hardtanh(kiln.tensor(x), -2.0, 0.5), np.clip(x, -2, 0.5))
    assert_close(F.relu6(kiln.tensor(x * 3)), np.clip(x * 3, 0, 6))
    y = kiln.tensor(x)
    assert F.relu6(y, inplace=True) is y
    assert_close(y, np.clip(x, 0, 6))
    for name in ("relu", "gelu", "silu", "sigmoid", "tanh", "leaky_relu", "elu", "softplus"):
        assert callable(getattr(F, name))
    gradcheck(F.logsigmoid, rand(2, 3))
    gradcheck(F.softsign, rand(2, 3))
    gradcheck(lambda x: F.hardtanh(x, -1.5, 1.5), rand(2, 3))
    with pytest.raises(ValueError, match=r"\[hardtanh\]"):
        F.hardtanh(kiln.ones(2), 1.0, -1.0)


# --- rms_norm / normalize / more activations / attention -------------------

def test_rms_norm_and_normalize():
    x, w = rand(2, 3, 4), rand(3, 4)
    ms = (x * x).mean(axis=(1, 2), keepdims=True)
    assert_close(F.rms_norm(kiln.tensor(x), (3, 4), kiln.tensor(w), eps=1e-3),
                 x / np.sqrt(ms + 1e-3) * w)
    ms = (x * x).mean(axis=-1, keepdims=True)
    assert_close(F.rms_norm(noncontig(x), [4]), x / np.sqrt(ms + np.finfo(np.float64).eps))
    gradcheck(lambda x, w: F.rms_norm(x, (3,), w), rand(2, 3), rand(3))
    with pytest.raises(RuntimeError, match=r"\[rms_norm\].*normalized_shape=\[3\]"):
        F.rms_norm(kiln.ones(2, 4), (3,))
    for p, dim in [(2.0, 1), (1.0, 0), (3.0, -1)]:
        norm = (np.abs(x) ** p).sum(axis=dim, keepdims=True) ** (1 / p)
        assert_close(F.normalize(kiln.tensor(x), p=p, dim=dim), x / norm)
    zero_row = np.array([[0.0, 0.0], [3.0, 4.0]])
    assert_close(F.normalize(kiln.tensor(zero_row), dim=1), np.array([[0, 0], [0.6, 0.8]]))
    gradcheck(lambda x: F.normalize(x, dim=1), rand(2, 3))
    gradcheck(lambda x: F.normalize(x, p=3.0, dim=0), rand(2, 3))
    # p=inf is Tensor.norm's max-abs norm, as in PyTorch (test_compat_ops covers the others).
    assert_close(F.normalize(kiln.tensor([[1.0, -4.0, 2.0]]), p=float("inf")),
                 np.array([[0.25, -1.0, 0.5]]))


def test_more_activations():
    x = rand(3, 4, low=-5, high=5)
    X = kiln.tensor(x)
    assert_close(F.hardsigmoid(X), np.clip(x / 6 + 0.5, 0, 1))
    assert_close(F.hardswish(X), x * np.clip(x / 6 + 0.5, 0, 1))
    assert_close(F.mish(X), x * np.tanh(np.logaddexp(0, x)))
    assert_close(F.softmin(X, 1), np.exp(np_log_softmax(-x, 1)))
    assert_close(F.glu(X, 1), x[:, :2] / (1 + np.exp(-x[:, 2:])))
    x2 = rand(4, 3)
    assert_close(F.glu(noncontig(x2), 0), x2[:2] / (1 + np.exp(-x2[2:])))
    assert_close(F.leaky_relu(X, 0.2), np.where(x > 0, x, 0.2 * x))
    for name, ref in [("relu", np.maximum(x, 0)), ("hardswish", x * np.clip(x / 6 + 0.5, 0, 1)),
                      ("silu", x / (1 + np.exp(-x))), ("mish", x * np.tanh(np.logaddexp(0, x)))]:
        y = kiln.tensor(x)
        assert getattr(F, name)(y, inplace=True) is y
        assert_close(y, ref)
    y = kiln.tensor(x)
    F.elu(y, alpha=0.5, inplace=True)
    assert_close(y, np.where(x > 0, x, 0.5 * (np.exp(x) - 1)))
    glu0, softmin1 = (lambda t: F.glu(t, 0)), (lambda t: F.softmin(t, 1))
    for fn in (F.hardsigmoid, F.hardswish, F.mish, glu0, softmin1):
        gradcheck(fn, rand(2, 3, low=-2.5, high=2.5))
    # inplace=True under autograd goes through the in-place protocol.
    leaf = kiln.tensor(rand(2, 3), requires_grad=True)
    h = leaf * 1.0
    F.hardswish(h, inplace=True).sum().backward()
    v = leaf.detach().numpy()
    assert_close(leaf.grad, np.where(v < -3, 0, np.where(v > 3, 1, (2 * v + 3) / 6)))
    with pytest.raises(RuntimeError, match=r"\[glu\].*even.*size 3"):
        F.glu(kiln.ones(2, 3))


def test_cosine_similarity():
    a, b = rand(3, 4), rand(3, 4)
    ref = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert_close(F.cosine_similarity(kiln.tensor(a), kiln.tensor(b)), ref)
    c = rand(4)
    ref = (a * c).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(c))
    assert_close(F.cosine_similarity(noncontig(a), kiln.tensor(c), dim=-1), ref)
    gradcheck(lambda x, y: F.cosine_similarity(x, y, dim=0), rand(3, 2), rand(3, 2))


def test_scaled_dot_product_attention():
    q, k, v = rand(2, 3, 5, 4), rand(2, 3, 6, 4), rand(2, 3, 6, 2)
    Q, K, V = kiln.tensor(q), kiln.tensor(k), kiln.tensor(v)
    sdpa = F.scaled_dot_product_attention
    assert_close(sdpa(Q, K, V), np_attention(q, k, v))
    assert_close(sdpa(Q, K, V, scale=0.3), np_attention(q, k, v, scale=0.3))
    assert_close(sdpa(Q, K, V, is_causal=True), np_attention(q, k, v, causal=True))
    bool_mask = RNG.random((5, 6)) > 0.3
    bool_mask[:, 0] = True  # no fully masked row
    assert_close(sdpa(Q, K, V, attn_mask=kiln.tensor(bool_mask)), np_attention(q, k, v, bool_mask))
    float_mask = rand(3, 5, 6)
    assert_close(sdpa(Q, K, V, kiln.tensor(float_mask)), np_attention(q, k, v, float_mask))
    # Grouped-query attention: 3 query heads per key/value head.
    q6 = rand(1, 6, 5, 4)
    k2, v2 = k[:1, :2], v[:1, :2]
    got = sdpa(kiln.tensor(q6), kiln.tensor(k2), kiln.tensor(v2), enable_gqa=True)
    assert_close(got, np_attention(q6, np.repeat(k2, 3, axis=1), np.repeat(v2, 3, axis=1)))


def test_scaled_dot_product_attention_gradients_and_errors():
    sdpa = F.scaled_dot_product_attention
    mask = kiln.tensor(rand(3, 4))
    gradcheck(lambda q, k, v: sdpa(q, k, v, is_causal=True), rand(2, 3, 2), rand(2, 4, 2),
              rand(2, 4, 3))
    gradcheck(lambda q, k, v, m: sdpa(q, k, v, m), rand(3, 2), rand(4, 2), rand(4, 2), rand(3, 4))
    gradcheck(lambda q, k, v: sdpa(q, k, v, mask, scale=0.5), rand(3, 2), rand(4, 2), rand(4, 2))
    with pytest.raises(RuntimeError, match=r"\[scaled_dot_product_attention\].*is_causal"):
        sdpa(kiln.ones(2, 3), kiln.ones(2, 3), kiln.ones(2, 3), kiln.ones(2, 2), is_causal=True)
    with pytest.raises(RuntimeError, match=r"\[scaled_dot_product_attention\].*same dtype"):
        sdpa(kiln.ones(2, 3), kiln.ones(2, 3, dtype=kiln.float64), kiln.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"\[scaled_dot_product_attention\].*embedding size"):
        sdpa(kiln.ones(2, 3), kiln.ones(2, 4), kiln.ones(2, 3))
    with pytest.raises(ValueError, match=r"\[scaled_dot_product_attention\].*dropout.*1.5"):
        sdpa(kiln.ones(2, 3), kiln.ones(2, 3), kiln.ones(2, 3), dropout_p=1.5)


def test_scaled_dot_product_attention_dropout():
    sdpa = F.scaled_dot_product_attention
    q, k, v = (kiln.tensor(rand(2, 8, 4)) for _ in range(3))
    assert_close(sdpa(q, k, v, dropout_p=1.0), np.zeros((2, 8, 4)))
    kiln.manual_seed(3)
    a = sdpa(q, k, v, dropout_p=0.5)
    kiln.manual_seed(3)
    b = sdpa(q, k, v, dropout_p=0.5)
    assert_close(a, b.numpy())
    assert np.abs(a.numpy() - sdpa(q, k, v).numpy()).max() > 1e-3
