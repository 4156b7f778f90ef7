"""kiln.nn.init: gains and fans exactly, distributions statistically (fixed
seeds, large samples), and the layers' default initialisation."""

import math

import numpy as np
import pytest

import kiln
from kiln import nn
from kiln.nn import init


def sample(shape, fn, *args, **kwargs):
    t = kiln.empty(shape)
    assert fn(t, *args, **kwargs) is t
    return t.numpy().astype(np.float64)


def test_calculate_gain():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01**2)))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("selu") == pytest.approx(0.75)
    with pytest.raises(ValueError, match=r"\[init.calculate_gain\] Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match=r"negative_slope"):
        init.calculate_gain("leaky_relu", "big")


def test_fans():
    assert init._calculate_fan_in_and_fan_out(kiln.empty(5, 3)) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(kiln.empty(5, 3, 2, 4)) == (24, 40)
    assert init._calculate_correct_fan(kiln.empty(5, 3, 2), "fan_out") == 10
    with pytest.raises(ValueError, match=r"fewer than 2 dimensions"):
        init.xavier_uniform_(kiln.empty(4))
    with pytest.raises(ValueError, match=r"Mode fan_avg not supported"):
        init.kaiming_uniform_(kiln.empty(2, 2), mode="fan_avg")


def test_uniform_normal_constant():
    kiln.manual_seed(1)
    u = sample((200, 200), init.uniform_, -2.0, 3.0)
    assert u.min() >= -2 and u.max() < 3
    assert u.mean() == pytest.approx(0.5, abs=0.03)
    assert u.std() == pytest.approx(5 / math.sqrt(12), rel=0.02)
    n = sample((200, 200), init.normal_, 1.5, 0.5)
    assert n.mean() == pytest.approx(1.5, abs=0.01) and n.std() == pytest.approx(0.5, rel=0.02)
    assert np.all(sample((3, 2), init.constant_, 0.25) == 0.25)
    assert np.all(sample((3, 2), init.zeros_) == 0) and np.all(sample((3,), init.ones_) == 1)
    assert np.array_equal(sample((2, 3), init.eye_), np.eye(2, 3))
    with pytest.raises(ValueError, match=r"\[init.eye_\] Only tensors with 2 dimensions"):
        init.eye_(kiln.empty(2, 2, 2))


def test_xavier_and_kaiming():
    kiln.manual_seed(2)
    shape = (300, 200)
    bound = 0.5 * math.sqrt(6 / 500)
    x = sample(shape, init.xavier_uniform_, gain=0.5)
    assert np.abs(x).max() <= bound and np.abs(x).max() > 0.99 * bound
    assert x.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    x = sample(shape, init.xavier_normal_, gain=2.0)
    assert x.std() == pytest.approx(2 * math.sqrt(2 / 500), rel=0.02)
    k = sample(shape, init.kaiming_uniform_, a=math.sqrt(5))
    bound = math.sqrt(3) * math.sqrt(2 / 6) / math.sqrt(200)  # = 1 / sqrt(fan_in)
    assert np.abs(k).max() <= bound and np.abs(k).max() > 0.99 * bound
    k = sample(shape, init.kaiming_normal_, mode="fan_out", nonlinearity="relu")
    assert k.std() == pytest.approx(math.sqrt(2) / math.sqrt(300), rel=0.02)
    assert abs(k.mean()) < 0.002


def test_trunc_normal():
    kiln.manual_seed(3)
    t = sample((400, 250), init.trunc_normal_, mean=0.5, std=2.0, a=-1.0, b=3.0)
    assert t.min() >= -1.0 and t.max() <= 3.0
    assert t.min() < -0.99 and t.max() > 2.99
    # Moments of N(0.5, 2^2) truncated to [-1, 3].
    alpha, beta = (-1.0 - 0.5) / 2, (3.0 - 0.5) / 2
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    zmass = cdf(beta) - cdf(alpha)
    mean = 0.5 + 2 * (pdf(alpha) - pdf(beta)) / zmass
    var = 4 * (1 + (alpha * pdf(alpha) - beta * pdf(beta)) / zmass -
               ((pdf(alpha) - pdf(beta)) / zmass) ** 2)
    assert t.mean() == pytest.approx(mean, abs=0.01)
    assert t.std() == pytest.approx(math.sqrt(var), rel=0.01)
    # The float64 path: one tail only, far from the mean.
    t = kiln.empty(20000, dtype=kiln.float64)
    init.trunc_normal_(t, a=2.0, b=10.0)
    assert t.numpy().min() >= 2.0 and np.isfinite(t.numpy()).all()


def test_orthogonal():
    kiln.manual_seed(4)
    for shape in [(6, 4), (4, 6), (3, 2, 2)]:
        t = sample(shape, init.orthogonal_, gain=2.0).reshape(shape[0], -1)
        small = t @ t.T if shape[0] <= t.shape[1] else t.T @ t
        np.testing.assert_allclose(small, 4 * np.eye(small.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match=r"\[init.orthogonal_\]"):
        init.orthogonal_(kiln.empty(3))


@pytest.mark.parametrize("fn", [init.uniform_, init.normal_, init.xavier_uniform_,
                                init.xavier_normal_, init.kaiming_uniform_, init.kaiming_normal_,
                                init.trunc_normal_, init.orthogonal_])
def test_generator_reproducible_and_no_grad(fn):
    a, b = kiln.empty(5, 4), kiln.empty(5, 4)
    fn(a, generator=kiln.Generator().manual_seed(7))
    fn(b, generator=kiln.Generator().manual_seed(7))
    assert np.array_equal(a.numpy(), b.numpy())
    p = nn.Parameter(kiln.empty(5, 4))
    assert fn(p) is p and p.is_leaf and p.grad_fn is None and p.requires_grad


def test_zero_element_tensor_warns():
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(kiln.empty(0, 3))


def test_layer_default_initialisation():
    kiln.manual_seed(5)
    lin = nn.Linear(400, 300)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    bound = 1 / math.sqrt(400)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert w.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    assert np.abs(b).max() <= bound and b.std() == pytest.approx(bound / math.sqrt(3), rel=0.15)
    emb = nn.Embedding(500, 100).weight.detach().numpy()
    assert emb.std() == pytest.approx(1.0, rel=0.02) and abs(emb.mean()) < 0.01
    ln = nn.LayerNorm(7)
    assert np.all(ln.weight.detach().numpy() == 1) and np.all(ln.bias.detach().numpy() == 0)
    mha = nn.MultiheadAttention(64, 4)
    w_in = mha.in_proj_weight.detach().numpy()
    assert np.abs(w_in).max() <= math.sqrt(6 / (64 + 192))
    assert np.all(mha.in_proj_bias.detach().numpy() == 0)
    assert np.all(mha.out_proj.bias.detach().numpy() == 0)
    bil = nn.Bilinear(25, 4, 300).weight.detach().numpy()
    assert np.abs(bil).max() <= 1 / 5 and bil.std() == pytest.approx(0.2 / math.sqrt(3), rel=0.02)
