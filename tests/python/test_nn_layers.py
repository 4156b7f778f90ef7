"""kiln.nn layers and losses: forward against NumPy references, float64
gradchecks through the modules' parameters, reprs and constructor errors."""

import math

import numpy as np
import pytest

import kiln
from kiln import nn
from helpers import RNG, assert_close, rand


def T(a, **kw):
    return kiln.tensor(np.asarray(a, dtype=np.float64), **kw)


def module_gradcheck(module, *arrays):
    """Float64 finite differences against backward, for the inputs and every parameter."""
    module.double()
    inputs = [T(a, requires_grad=True) for a in arrays]
    params = list(module.parameters())
    n = len(inputs)
    assert kiln.autograd.gradcheck(lambda *args: module(*args[:n]), inputs + params)


def np_(t):
    return t.detach().numpy()


# --- NumPy references ---------------------------------------------------------

def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


def np_erf(x):
    return np.vectorize(math.erf)(x)


ACTIVATIONS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.GELU(), lambda x: 0.5 * x * (1 + np_erf(x / math.sqrt(2)))),
    (nn.GELU("tanh"), lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                                       (x + 0.044715 * x**3)))),
    (nn.SiLU(), lambda x: x * np_sigmoid(x)),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), np_sigmoid),
    (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (nn.ELU(0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    (nn.Softplus(2.0, 3.0), lambda x: np_softplus(x, 2.0, 3.0)),
    (nn.Softmax(dim=1), lambda x: np_softmax(x, 1)),
    (nn.LogSoftmax(dim=0), lambda x: np.log(np_softmax(x, 0))),
    (nn.Softmin(dim=1), lambda x: np_softmax(-x, 1)),
    (nn.ReLU6(), lambda x: np.clip(x, 0, 6)),
    (nn.Hardtanh(-0.5, 1.5), lambda x: np.clip(x, -0.5, 1.5)),
    (nn.Mish(), lambda x: x * np.tanh(np_softplus(x))),
    (nn.Hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (nn.Hardsigmoid(), lambda x: np.clip(x + 3, 0, 6) / 6),
    (nn.Softsign(), lambda x: x / (1 + np.abs(x))),
    (nn.LogSigmoid(), lambda x: -np.log1p(np.exp(-x))),
    (nn.GLU(dim=1), lambda x: x[:, :2] * np_sigmoid(x[:, 2:])),
    (nn.Identity(54, unused=True), lambda x: x),
]


@pytest.mark.parametrize("module,ref", ACTIVATIONS, ids=lambda v: repr(v)[:20])
def test_activation_forward_and_grad(module, ref):
    # Keep clear of the kinks (0, +-3, clip bounds) where finite differences straddle them.
    x = rand(3, 4) * 4
    x[np.abs(x) < 0.05] += 0.2
    x[np.abs(np.abs(x) - 3) < 0.05] += 0.2
    x[np.abs(x - 1.5) < 0.05] += 0.2
    x[np.abs(x + 0.5) < 0.05] += 0.2
    assert_close(module(T(x)), ref(x))
    assert_close(module(T(x).float()), ref(x), dtype=kiln.float32, atol=1e-5, rtol=1e-4)
    module_gradcheck(module, x)


def test_inplace_activations_write_their_input():
    x = T(rand(2, 3))
    for module in (nn.ReLU(inplace=True), nn.LeakyReLU(inplace=True), nn.ELU(inplace=True),
                   nn.SiLU(inplace=True), nn.Hardtanh(inplace=True), nn.ReLU6(inplace=True)):
        y = x.clone()
        assert module(y) is y


def test_linear_and_identity():
    lin = nn.Linear(4, 3)
    x = rand(5, 4)
    w, b = np_(lin.weight), np_(lin.bias)
    assert_close(lin(T(x).float()), x @ w.T + b, dtype=kiln.float32)
    assert nn.Linear(4, 3, bias=False).bias is None
    assert tuple(lin(kiln.randn(2, 7, 4)).shape) == (2, 7, 3)
    module_gradcheck(nn.Linear(3, 2), rand(4, 3))
    module_gradcheck(nn.Linear(3, 2, bias=False), rand(2, 5, 3))
    lin = nn.Linear(2, 3, dtype=kiln.float64)
    assert lin.weight.dtype == kiln.float64 and lin.bias.dtype == kiln.float64
    assert repr(nn.Linear(4, 3, bias=False)) == "Linear(in_features=4, out_features=3, bias=False)"
    with pytest.raises(RuntimeError, match=r"\[linear\]"):
        nn.Linear(4, 3)(kiln.randn(2, 5))


def test_bilinear():
    m = nn.Bilinear(3, 4, 2)
    x1, x2 = rand(5, 3), rand(5, 4)
    ref = np.einsum("bi,kij,bj->bk", x1, np_(m.weight), x2) + np_(m.bias)
    assert_close(m(T(x1).float(), T(x2).float()), ref, dtype=kiln.float32, atol=1e-5, rtol=1e-4)
    assert repr(m) == "Bilinear(in1_features=3, in2_features=4, out_features=2, bias=True)"
    module_gradcheck(nn.Bilinear(2, 3, 2), rand(2, 2), rand(2, 3))
    module_gradcheck(nn.Bilinear(2, 2, 1, bias=False), rand(3, 2), rand(3, 2))


def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def test_layer_norm():
    m = nn.LayerNorm((3, 4), eps=1e-3).double()
    with kiln.no_grad():
        m.weight.copy_(T(rand(3, 4)))
        m.bias.copy_(T(rand(3, 4)))
    x = rand(2, 3, 4)
    assert_close(m(T(x)), np_layer_norm(x, 2, np_(m.weight), np_(m.bias), 1e-3))
    assert repr(m) == "LayerNorm((3, 4), eps=0.001, elementwise_affine=True, bias=True)"
    module_gradcheck(m, x)
    plain = nn.LayerNorm(4, elementwise_affine=False)
    assert plain.weight is None and list(plain.parameters()) == []
    assert_close(plain(T(x)), np_layer_norm(x, 1))
    no_bias = nn.LayerNorm(4, bias=False)
    assert no_bias.bias is None and np.all(np_(no_bias.weight) == 1)
    module_gradcheck(no_bias, rand(2, 4))


def test_rms_norm():
    m = nn.RMSNorm(4, eps=1e-6).double()
    with kiln.no_grad():
        m.weight.copy_(T(rand(4)))
    x = rand(3, 4)
    ref = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * np_(m.weight)
    assert_close(m(T(x)), ref)
    assert repr(m) == "RMSNorm((4,), eps=1e-06, elementwise_affine=True)"
    module_gradcheck(m, x)
    assert repr(nn.RMSNorm([2, 3])) == "RMSNorm((2, 3), eps=None, elementwise_affine=True)"


def test_dropout_respects_training():
    kiln.manual_seed(0)
    m = nn.Dropout(0.25)
    x = kiln.ones(2000)
    y = m(x).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.04
    m.eval()
    assert_close(m(x), np.ones(2000))
    assert repr(m) == "Dropout(p=0.25, inplace=False)"
    with pytest.raises(ValueError, match=r"\[Dropout\] dropout probability"):
        nn.Dropout(1.5)


def test_embedding():
    m = nn.Embedding(6, 3, padding_idx=-1)
    assert m.padding_idx == 5 and np.all(np_(m.weight)[5] == 0)
    idx = np.array([[0, 5, 2], [2, 2, 1]])
    assert_close(m(kiln.tensor(idx)), np_(m.weight)[idx], dtype=kiln.float32)
    (m(kiln.tensor(idx)) * T(rand(2, 3, 3)).float()).sum().backward()
    assert np.all(np_(m.weight.grad)[5] == 0) and np.all(np_(m.weight.grad)[3] == 0)
    assert repr(m) == "Embedding(6, 3, padding_idx=5)"
    w = T(rand(4, 2))
    frozen = nn.Embedding.from_pretrained(w)
    assert not frozen.weight.requires_grad and frozen.weight.data_ptr() == w.data_ptr()
    assert nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad
    with pytest.raises(ValueError, match=r"\[Embedding\] padding_idx"):
        nn.Embedding(3, 2, padding_idx=3)
    with pytest.raises(ValueError, match=r"\[Embedding.from_pretrained\]"):
        nn.Embedding.from_pretrained(kiln.zeros(3))
    emb = nn.Embedding(4, 2).double()
    ids = kiln.tensor([1, 3, 1])
    assert kiln.autograd.gradcheck(lambda w_: emb(ids), [emb.weight])


def test_flatten_unflatten():
    x = rand(2, 3, 4, 5)
    assert_close(nn.Flatten()(T(x)), x.reshape(2, 60))
    assert_close(nn.Flatten(0, 2)(T(x)), x.reshape(24, 5))
    assert_close(nn.Unflatten(1, (3, 20))(T(x.reshape(2, 60))), x.reshape(2, 3, 20))
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert repr(nn.Unflatten(1, (2, 5))) == "Unflatten(dim=1, unflattened_size=(2, 5))"
    module_gradcheck(nn.Flatten(), rand(2, 2, 2))
    with pytest.raises(TypeError, match=r"\[Unflatten\]"):
        nn.Unflatten(1, 4)


# --- losses -------------------------------------------------------------------

def np_log_softmax(x, axis=1):
    return np.log(np_softmax(x, axis))


def reduce_(v, reduction):
    return {"mean": v.mean(), "sum": v.sum(), "none": v}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(reduction):
    x, y = rand(3, 4), rand(3, 4)
    d = x - y
    refs = [
        (nn.MSELoss(reduction=reduction), d**2),
        (nn.L1Loss(reduction=reduction), np.abs(d)),
        (nn.SmoothL1Loss(reduction=reduction, beta=0.5),
         np.where(np.abs(d) < 0.5, 0.5 * d**2 / 0.5, np.abs(d) - 0.25)),
        (nn.HuberLoss(reduction=reduction, delta=0.5),
         np.where(np.abs(d) < 0.5, 0.5 * d**2, 0.5 * (np.abs(d) - 0.25))),
    ]
    for module, ref in refs:
        assert_close(module(T(x), T(y)), reduce_(ref, reduction))
        target = T(y)
        assert kiln.autograd.gradcheck(lambda a, m=module: m(a, target), [T(x, requires_grad=True)])


def test_cross_entropy_and_nll():
    x, t, w = rand(5, 4), RNG.integers(0, 4, 5), RNG.uniform(0.5, 2, 4)
    t[1] = -100
    logp = np_log_softmax(x)
    valid = t != -100
    picked = -logp[np.arange(5)[valid], t[valid]] * w[t[valid]]
    ce = nn.CrossEntropyLoss(weight=T(w))
    assert_close(ce(T(x), kiln.tensor(t)), picked.sum() / w[t[valid]].sum())
    assert_close(nn.NLLLoss(weight=T(w), reduction="sum")(T(logp), kiln.tensor(t)), picked.sum())
    assert [n for n, _ in ce.named_buffers()] == ["weight"]
    smooth = nn.CrossEntropyLoss(label_smoothing=0.2, ignore_index=0, reduction="none")
    t2 = RNG.integers(1, 4, 5)
    ref = 0.8 * -logp[np.arange(5), t2] + 0.2 * -logp.mean(1)
    assert_close(smooth(T(x), kiln.tensor(t2)), ref)
    tt = kiln.tensor(t)
    assert kiln.autograd.gradcheck(lambda a: ce.double()(a, tt), [T(x, requires_grad=True)])
    with pytest.warns(UserWarning):
        assert nn.NLLLoss(size_average=False).reduction == "sum"
    assert repr(ce) == "CrossEntropyLoss()"


def test_binary_losses():
    p, y, w, pw = RNG.uniform(0.05, 0.95, (3, 4)), RNG.uniform(0, 1, (3, 4)), \
        RNG.uniform(0.5, 2, 4), RNG.uniform(0.5, 3, 4)
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p)) * w
    assert_close(nn.BCELoss(weight=T(w))(T(p), T(y)), bce.mean())
    z = rand(3, 4)
    s = np_sigmoid(z)
    ref = -(pw * y * np.log(s) + (1 - y) * np.log(1 - s)) * w
    m = nn.BCEWithLogitsLoss(weight=T(w), pos_weight=T(pw), reduction="sum")
    assert_close(m(T(z), T(y)), ref.sum())
    assert [n for n, _ in m.named_buffers()] == ["weight", "pos_weight"]
    target = T(y)
    assert kiln.autograd.gradcheck(lambda a: m(a, target), [T(z, requires_grad=True)])
    assert kiln.autograd.gradcheck(lambda a: nn.BCELoss()(a, target), [T(p, requires_grad=True)])


@pytest.mark.parametrize("reduction", ["batchmean", "mean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    logq = np_log_softmax(rand(3, 4))
    p = np_softmax(rand(3, 4), 1)
    target = np.log(p) if log_target else p
    pointwise = p * (np.log(p) - logq)
    ref = pointwise.sum() / 3 if reduction == "batchmean" else reduce_(pointwise, reduction)
    m = nn.KLDivLoss(reduction=reduction, log_target=log_target)
    assert_close(m(T(logq), T(target)), ref)
    tt = T(target)
    assert kiln.autograd.gradcheck(lambda a: m(a, tt), [T(logq, requires_grad=True)])


# --- attention ----------------------------------------------------------------

def np_mha(q, k, v, w_in, b_in, w_out, b_out, heads, mask=None):
    """Batch-first multi-head attention; mask is additive (N or 1, heads or 1, L, S)."""
    e = q.shape[-1]
    d = e // heads
    qp, kp, vp = (a @ w_in[i * e:(i + 1) * e].T + b_in[i * e:(i + 1) * e]
                  for i, a in enumerate((q, k, v)))

    def split(a):
        return a.reshape(a.shape[0], a.shape[1], heads, d).transpose(0, 2, 1, 3)

    scores = split(qp) @ split(kp).transpose(0, 1, 3, 2) / math.sqrt(d)
    if mask is not None:
        scores = scores + mask
    weights = np_softmax(scores, -1)
    out = (weights @ split(vp)).transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], e)
    return out @ w_out.T + b_out, weights


def mha_params(m):
    return (np_(m.in_proj_weight), np_(m.in_proj_bias), np_(m.out_proj.weight),
            np_(m.out_proj.bias))


def test_multihead_attention_forward():
    m = nn.MultiheadAttention(8, 2, batch_first=True).double()
    with kiln.no_grad():
        m.in_proj_bias.copy_(T(rand(24)))
        m.out_proj.bias.copy_(T(rand(8)))
    assert [n for n, _ in m.named_parameters()] == [
        "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    q, kv = rand(2, 3, 8), rand(2, 5, 8)
    out, w = m(T(q), T(kv), T(kv))
    ref_out, ref_w = np_mha(q, kv, kv, *mha_params(m), 2)
    assert_close(out, ref_out)
    assert_close(w, ref_w.mean(1))
    _, w_heads = m(T(q), T(kv), T(kv), average_attn_weights=False)
    assert_close(w_heads, ref_w)
    out_fast, none = m(T(q), T(kv), T(kv), need_weights=False)
    assert none is None
    assert_close(out_fast, ref_out)
    # Masks: bool True hides a key; float masks add.
    pad = np.zeros((2, 5), dtype=bool)
    pad[0, 3:] = True
    causal = np.triu(np.ones((3, 5), dtype=bool), 1)
    add = np.where(causal, -np.inf, 0)[None, None] + np.where(pad, -np.inf, 0)[:, None, None]
    ref_out, ref_w = np_mha(q, kv, kv, *mha_params(m), 2, add)
    for need in (True, False):
        out, w = m(T(q), T(kv), T(kv), key_padding_mask=kiln.tensor(pad),
                   attn_mask=kiln.tensor(causal), need_weights=need)
        assert_close(out, ref_out)
        if need:
            assert_close(w, ref_w.mean(1))
        else:
            assert w is None
    float_mask = rand(2 * 2, 3, 5)
    ref_out, _ = np_mha(q, kv, kv, *mha_params(m), 2, float_mask.reshape(2, 2, 3, 5))
    assert_close(m(T(q), T(kv), T(kv), attn_mask=T(float_mask))[0], ref_out)


def test_multihead_attention_layouts_and_grad():
    m = nn.MultiheadAttention(4, 2).double()
    x = rand(3, 2, 4)  # (L, N, E)
    out, w = m(T(x), T(x), T(x))
    ref_out, ref_w = np_mha(x.transpose(1, 0, 2), *(x.transpose(1, 0, 2),) * 2, *mha_params(m), 2)
    assert_close(out, ref_out.transpose(1, 0, 2))
    out1, w1 = m(T(x[:, 0]), T(x[:, 0]), T(x[:, 0]))
    assert_close(out1, ref_out[0])
    assert_close(w1, ref_w[0].mean(0))
    assert repr(m) == ("MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear("
                       "in_features=4, out_features=4, bias=True)\n)")
    params = list(m.parameters())
    xt = T(rand(2, 1, 4), requires_grad=True)
    assert kiln.autograd.gradcheck(lambda a, *ps: m(a, a, a)[0], [xt] + params)
    kv = T(rand(3, 1, 4))
    assert kiln.autograd.gradcheck(lambda a, *ps: m(a, kv, kv, need_weights=False)[0],
                                   [xt] + params)
    with pytest.raises(AssertionError, match=r"divisible"):
        nn.MultiheadAttention(5, 2)
    with pytest.raises(RuntimeError, match=r"Need attn_mask"):
        m(T(x), T(x), T(x), is_causal=True)


def test_multihead_attention_kdim_vdim():
    m = nn.MultiheadAttention(4, 2, kdim=3, vdim=5, batch_first=True).double()
    assert m.in_proj_weight is None
    names = [n for n, _ in m.named_parameters()]
    assert names == ["q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                     "out_proj.weight", "out_proj.bias"]
    q, k, v = rand(1, 2, 4), rand(1, 3, 3), rand(1, 3, 5)
    out, _ = m(T(q), T(k), T(v))
    # With identity input projections, np_mha sees the already-projected q, k, v.
    ref = np_mha(q @ np_(m.q_proj_weight).T, k @ np_(m.k_proj_weight).T,
                 v @ np_(m.v_proj_weight).T, np.concatenate([np.eye(4)] * 3),
                 np_(m.in_proj_bias), np_(m.out_proj.weight), np_(m.out_proj.bias), 2)[0]
    assert_close(out, ref)


def np_encoder_layer(x, m, norm_first, act):
    mha = m.self_attn

    def sa(a):
        return np_mha(a, a, a, *mha_params(mha), mha.num_heads)[0]

    def ff(a):
        h = act(a @ np_(m.linear1.weight).T + np_(m.linear1.bias))
        return h @ np_(m.linear2.weight).T + np_(m.linear2.bias)

    def ln(a, norm):
        return np_layer_norm(a, 1, np_(norm.weight), np_(norm.bias), norm.eps)

    if norm_first:
        x = x + sa(ln(x, m.norm1))
        return x + ff(ln(x, m.norm2))
    x = ln(x + sa(x), m.norm1)
    return ln(x + ff(x), m.norm2)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_layer(norm_first, activation):
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation=activation,
                                   batch_first=True, norm_first=norm_first).double().eval()
    with kiln.no_grad():
        for p in m.parameters():
            p.copy_(T(rand(*p.shape) * 0.5))
    act = (lambda a: np.maximum(a, 0)) if activation == "relu" else \
        (lambda a: 0.5 * a * (1 + np_erf(a / math.sqrt(2))))
    x = rand(2, 3, 8)
    assert_close(m(T(x)), np_encoder_layer(x, m, norm_first, act), atol=1e-9, rtol=1e-9)
    enc = nn.TransformerEncoder(m, 2).eval()
    assert enc.layers[0] is not enc.layers[1] and enc.layers[0].linear1.weight is not \
        m.linear1.weight
    ref = np_encoder_layer(np_encoder_layer(x, m, norm_first, act), m, norm_first, act)
    assert_close(enc(T(x)), ref, atol=1e-9, rtol=1e-9)
    small = nn.TransformerEncoderLayer(4, 2, dim_feedforward=4, dropout=0.0, batch_first=True,
                                       activation=nn.GELU()).double()
    assert isinstance(small.activation, nn.GELU) and "(activation): GELU" in repr(small)
    module_gradcheck(small, rand(1, 2, 4))


def test_transformer_encoder_layer_dropout_trains():
    m = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = kiln.randn(3, 2, 8)
    trained = m.train()(x).detach().numpy()
    assert not np.allclose(trained, m.eval()(x).detach().numpy())


def test_multihead_attention_bias_kv_and_zero_attn():
    m = nn.MultiheadAttention(4, 2, add_bias_kv=True, add_zero_attn=True,
                              batch_first=True).double()
    assert [n for n, _ in m.named_parameters()] == [
        "in_proj_weight", "in_proj_bias", "bias_k", "bias_v", "out_proj.weight", "out_proj.bias"]
    q, kv = rand(2, 3, 4), rand(2, 5, 4)
    pad = np.zeros((2, 5), dtype=bool)
    pad[1, 4] = True
    out, w = m(T(q), T(kv), T(kv), key_padding_mask=kiln.tensor(pad))
    # Reference: the projected bias key/value and a zero key/value join every sequence.
    w_in, b_in, w_out, b_out = mha_params(m)
    e = 4
    k_proj = np.concatenate([kv @ w_in[e:2 * e].T + b_in[e:2 * e],
                             np.broadcast_to(np_(m.bias_k), (2, 1, e)), np.zeros((2, 1, e))], 1)
    v_proj = np.concatenate([kv @ w_in[2 * e:].T + b_in[2 * e:],
                             np.broadcast_to(np_(m.bias_v), (2, 1, e)), np.zeros((2, 1, e))], 1)
    mask = np.where(np.concatenate([pad, np.zeros((2, 2), dtype=bool)], 1), -np.inf, 0)
    eye = np.concatenate([w_in[:e], np.eye(e), np.eye(e)])
    bias = np.concatenate([b_in[:e], np.zeros(2 * e)])
    ref_out, ref_w = np_mha(q, k_proj, v_proj, eye, bias, w_out, b_out, 2,
                            mask[:, None, None, :])
    assert_close(out, ref_out)
    assert_close(w, ref_w.mean(1))
    params = list(m.parameters())
    xt = T(rand(1, 2, 4), requires_grad=True)
    assert kiln.autograd.gradcheck(lambda a, *ps: m(a, a, a)[0], [xt] + params)
