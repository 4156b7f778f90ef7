"""Random numbers: generators, seeding, factories, in-place samplers, dropout."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import gradcheck

FLOATS = [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16]


def values(t):
    return t.detach().float().numpy() if t.dtype == kiln.bfloat16 else t.detach().numpy()


# --- seeding and generators ----------------------------------------------------


def test_manual_seed_reproduces_every_factory():
    def draw():
        return [kiln.rand(5), kiln.randn(2, 3), kiln.randint(0, 100, (7,)), kiln.randperm(9),
                kiln.normal(1.0, 2.0, (4,)), kiln.empty(6).uniform_(-1, 1),
                kiln.bernoulli(kiln.full((8,), 0.5))]
    kiln.manual_seed(123)
    first = draw()
    kiln.manual_seed(123)
    second = draw()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(values(a), values(b))


def test_different_seeds_differ():
    kiln.manual_seed(1)
    a = kiln.rand(100)
    kiln.manual_seed(2)
    b = kiln.rand(100)
    assert not np.array_equal(a.numpy(), b.numpy())


def test_consecutive_draws_differ():
    kiln.manual_seed(0)
    assert not np.array_equal(kiln.randn(50).numpy(), kiln.randn(50).numpy())


def test_manual_seed_returns_default_generator_and_initial_seed():
    g = kiln.manual_seed(42)
    assert g is kiln.default_generator
    assert kiln.initial_seed() == 42
    assert kiln.default_generator.initial_seed() == 42
    assert kiln.random.initial_seed() == 42


def test_negative_seed_wraps_and_overflow_raises():
    kiln.manual_seed(-1)
    assert kiln.initial_seed() == 2**64 - 1
    with pytest.raises(RuntimeError, match="Overflow"):
        kiln.manual_seed(2**64)


def test_seed_is_nondeterministic():
    s1 = kiln.seed()
    assert kiln.initial_seed() == s1
    s2 = kiln.seed()
    assert s1 != s2


def test_generator_independent_of_default():
    g = kiln.Generator().manual_seed(7)
    kiln.manual_seed(7)
    a = kiln.rand(10, generator=g)
    b = kiln.rand(10)
    np.testing.assert_array_equal(a.numpy(), b.numpy())  # same seed, same stream
    kiln.rand(3)  # advancing the default generator ...
    c = kiln.rand(10, generator=g)
    g2 = kiln.Generator().manual_seed(7)
    kiln.rand(10, generator=g2)
    np.testing.assert_array_equal(c.numpy(), kiln.rand(10, generator=g2).numpy())  # ... not g


def test_generator_api():
    g = kiln.Generator(device="cpu")
    assert g.manual_seed(5) is g
    assert g.initial_seed() == 5
    assert g.device == kiln.device("cpu")
    s = g.seed()
    assert isinstance(s, int) and g.initial_seed() == s


def test_generator_state_roundtrip():
    g = kiln.Generator().manual_seed(3)
    kiln.randn(4, generator=g)
    state = g.get_state()
    assert state.dtype == kiln.uint8 and state.dim() == 1
    a = kiln.randn(6, generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(a.numpy(), kiln.randn(6, generator=g).numpy())


def test_rng_state_roundtrip():
    kiln.manual_seed(11)
    state = kiln.get_rng_state()
    a = kiln.rand(5)
    kiln.set_rng_state(state)
    np.testing.assert_array_equal(a.numpy(), kiln.rand(5).numpy())


def test_set_state_errors():
    g = kiln.Generator()
    with pytest.raises(TypeError, match=r"\[set_state\]"):
        g.set_state([1, 2, 3])
    with pytest.raises(TypeError, match=r"\[set_state\]"):
        g.set_state(kiln.zeros(16))
    with pytest.raises(RuntimeError, match=r"\[set_state\]"):
        g.set_state(kiln.zeros(3, dtype=kiln.uint8))


def test_generator_type_errors():
    with pytest.raises(TypeError, match=r"\[rand\]"):
        kiln.rand(3, generator=5)
    with pytest.raises(TypeError, match=r"\[manual_seed\]"):
        kiln.Generator().manual_seed(1.5)


# --- factories ----------------------------------------------------------------


def test_factory_signatures():
    assert kiln.rand(2, 3).shape == (2, 3)
    assert kiln.rand((2, 3)).shape == (2, 3)
    assert kiln.randn([4]).shape == (4,)
    assert kiln.rand(size=(3, 1)).shape == (3, 1)
    assert kiln.rand(()).shape == ()
    assert kiln.randn(0, 3).shape == (0, 3)
    t = kiln.randn(2, dtype=kiln.float64, requires_grad=True, device="cpu")
    assert t.dtype == kiln.float64 and t.requires_grad and t.is_leaf


@pytest.mark.parametrize("dtype", FLOATS)
def test_rand_range_and_mean(dtype):
    kiln.manual_seed(0)
    x = values(kiln.rand(100_000, dtype=dtype)).astype(np.float64)
    assert kiln.rand(3, dtype=dtype).dtype == dtype
    assert x.min() >= 0 and x.max() < 1
    assert abs(x.mean() - 0.5) < 0.01
    assert abs(x.std() - np.sqrt(1 / 12)) < 0.01


@pytest.mark.parametrize("dtype", FLOATS)
def test_randn_moments(dtype):
    kiln.manual_seed(0)
    x = values(kiln.randn(100_000, dtype=dtype)).astype(np.float64)
    assert abs(x.mean()) < 0.02
    assert abs(x.std() - 1) < 0.02
    assert np.isfinite(x).all()
    # The tails are there: about 0.27% of samples lie beyond 3 sigma.
    assert 0.001 < np.mean(np.abs(x) > 3) < 0.005


def test_randint_range_and_coverage():
    kiln.manual_seed(0)
    x = kiln.randint(-3, 5, (10_000,))
    assert x.dtype == kiln.int64
    v = x.numpy()
    assert v.min() == -3 and v.max() == 4
    counts = np.bincount(v + 3)
    assert np.all(np.abs(counts / 10_000 - 1 / 8) < 0.02)
    assert kiln.randint(10, (3, 2)).shape == (3, 2)
    assert kiln.randint(10, size=(5,)).numpy().max() < 10
    assert kiln.randint(low=2, high=4, size=(50,)).numpy().min() >= 2
    assert kiln.randint(0, 2, (3,), dtype=kiln.float32).dtype == kiln.float32
    y = kiln.randint(0, 256, (1000,), dtype=kiln.uint8).numpy()
    assert y.max() > 200


def test_randint_errors():
    with pytest.raises(RuntimeError, match=r"\[randint\].*low=5"):
        kiln.randint(5, 5, (3,))
    with pytest.raises(TypeError, match=r"\[randint\]"):
        kiln.randint(5)
    with pytest.raises(RuntimeError, match=r"\[randint\].*uint8"):
        kiln.randint(0, 300, (3,), dtype=kiln.uint8)
    with pytest.raises(RuntimeError, match=r"\[random_\].*int8"):
        kiln.zeros(3, dtype=kiln.int8).random_(-200, 0)


def test_randperm_is_permutation():
    kiln.manual_seed(0)
    p = kiln.randperm(1000)
    assert p.dtype == kiln.int64
    np.testing.assert_array_equal(np.sort(p.numpy()), np.arange(1000))
    assert not np.array_equal(p.numpy(), np.arange(1000))
    assert kiln.randperm(0).shape == (0,)
    assert kiln.randperm(5, dtype=kiln.float32).dtype == kiln.float32
    with pytest.raises(RuntimeError, match=r"\[randperm\]"):
        kiln.randperm(-1)


def test_randperm_positions_are_uniform():
    kiln.manual_seed(0)
    first = np.array([kiln.randperm(4).numpy()[0] for _ in range(4000)])
    assert np.all(np.abs(np.bincount(first, minlength=4) / 4000 - 0.25) < 0.03)


def test_like_factories():
    x = kiln.zeros(3, 4, dtype=kiln.float64)
    for fn in (kiln.rand_like, kiln.randn_like):
        y = fn(x)
        assert y.shape == (3, 4) and y.dtype == kiln.float64
    assert kiln.rand_like(x, dtype=kiln.float16).dtype == kiln.float16
    z = kiln.randint_like(x, 10)
    assert z.dtype == kiln.float64 and z.numpy().max() < 10 and z.numpy().min() >= 0
    w = kiln.randint_like(kiln.zeros(500, dtype=kiln.int32), 3, 6).numpy()
    assert w.min() == 3 and w.max() == 5


def test_normal_float_and_tensor_overloads():
    kiln.manual_seed(0)
    x = kiln.normal(3.0, 2.0, (100_000,)).numpy().astype(np.float64)
    assert abs(x.mean() - 3) < 0.04 and abs(x.std() - 2) < 0.04
    assert kiln.normal(0.0, 1.0, size=(2,), dtype=kiln.float64).dtype == kiln.float64
    means = kiln.tensor([0.0, 100.0, -100.0])
    y = kiln.normal(means, 0.5)
    assert y.shape == (3,)
    np.testing.assert_allclose(y.numpy(), [0, 100, -100], atol=4)
    z = kiln.normal(means, kiln.tensor([1e-3, 1e-3, 1e-3]))
    np.testing.assert_allclose(z.numpy(), [0, 100, -100], atol=0.1)
    assert kiln.normal(kiln.zeros(2, 3, dtype=kiln.float64)).dtype == kiln.float64
    with pytest.raises(RuntimeError, match=r"\[normal\].*std"):
        kiln.normal(0.0, -1.0, (3,))
    with pytest.raises(TypeError, match=r"\[normal\]"):
        kiln.normal(0.0, 1.0)


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int32])
def test_float_samplers_reject_integer_dtypes(dtype):
    with pytest.raises(RuntimeError, match=r"\[rand\]"):
        kiln.rand(3, dtype=dtype)
    with pytest.raises(RuntimeError, match=r"\[normal_\]"):
        kiln.zeros(3, dtype=dtype).normal_()


# --- in-place samplers ------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_normal_inplace(dtype):
    kiln.manual_seed(0)
    t = kiln.empty(50_000, dtype=dtype)
    assert t.uniform_(2, 5) is t
    v = values(t).astype(np.float64)
    assert v.min() >= 2 and v.max() < 5 and abs(v.mean() - 3.5) < 0.05
    assert t.normal_(mean=-1, std=0.5) is t
    v = values(t).astype(np.float64)
    assert abs(v.mean() + 1) < 0.02 and abs(v.std() - 0.5) < 0.02


def test_inplace_on_noncontiguous_view():
    base = kiln.zeros(6, 4)
    view = base.t()
    assert not view.is_contiguous()
    view.uniform_(1, 2)
    b = base.numpy()
    assert np.all(b >= 1) and np.all(b < 2)
    assert len(np.unique(b)) == 24


def test_inplace_bumps_version_and_rejects_grad_leaf():
    t = kiln.zeros(3)
    v = t._version
    t.normal_()
    assert t._version > v
    w = kiln.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[uniform_\]"):
        w.uniform_()
    with kiln.no_grad():
        w.uniform_()
    assert w.detach().numpy().max() > 0


def test_inplace_errors():
    t = kiln.zeros(3)
    with pytest.raises(RuntimeError, match=r"\[uniform_\]"):
        t.uniform_(2, 1)
    with pytest.raises(RuntimeError, match=r"\[normal_\]"):
        t.normal_(0, -1)
    with pytest.raises(RuntimeError, match=r"\[bernoulli_\]"):
        t.bernoulli_(1.5)
    with pytest.raises(RuntimeError, match=r"\[exponential_\]"):
        t.exponential_(-1)
    with pytest.raises(RuntimeError, match=r"\[random_\]"):
        t.random_(5, 2)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int64, kiln.uint8, kiln.bool])
def test_bernoulli_inplace_frequency(dtype):
    kiln.manual_seed(0)
    t = kiln.empty(20_000, dtype=dtype).bernoulli_(0.3)
    v = t.numpy().astype(np.float64)
    assert set(np.unique(v)) <= {0.0, 1.0}
    assert abs(v.mean() - 0.3) < 0.015


def test_bernoulli_tensor_probabilities():
    kiln.manual_seed(0)
    p = kiln.tensor([0.0, 0.2, 0.9, 1.0], dtype=kiln.float64)
    draws = kiln.bernoulli(p.expand(20_000, 4).contiguous())
    assert draws.dtype == kiln.float64
    freq = draws.numpy().mean(0)
    np.testing.assert_allclose(freq, [0, 0.2, 0.9, 1], atol=0.015)
    assert freq[0] == 0 and freq[3] == 1
    assert p.bernoulli().shape == (4,)
    assert kiln.bernoulli(kiln.zeros(3), 1.0).numpy().tolist() == [1, 1, 1]
    # bernoulli_ with a broadcast tensor of probabilities.
    t = kiln.empty(10_000, 2).bernoulli_(kiln.tensor([0.0, 1.0]))
    assert t.numpy()[:, 0].max() == 0 and t.numpy()[:, 1].min() == 1


def test_random_inplace_ranges():
    kiln.manual_seed(0)
    assert kiln.empty(1000, dtype=kiln.int64).random_(10).numpy().max() == 9
    v = kiln.empty(1000, dtype=kiln.int32).random_(-5, 5).numpy()
    assert v.min() == -5 and v.max() == 4
    u = kiln.empty(1000, dtype=kiln.uint8).random_().numpy()
    assert u.max() > 200
    b = kiln.empty(1000, dtype=kiln.bool).random_().numpy()
    assert 0.4 < b.mean() < 0.6
    f = kiln.empty(1000).random_().numpy()
    assert np.all(f == np.round(f)) and f.max() > 2**20 and f.max() <= 2**24


def test_exponential_inplace():
    kiln.manual_seed(0)
    v = kiln.empty(100_000, dtype=kiln.float64).exponential_(2.0).numpy()
    assert v.min() >= 0
    assert abs(v.mean() - 0.5) < 0.01


def test_multinomial_with_replacement_frequencies():
    kiln.manual_seed(0)
    w = kiln.tensor([1.0, 0.0, 3.0, 6.0])
    s = kiln.multinomial(w, 20_000, replacement=True)
    assert s.dtype == kiln.int64 and s.shape == (20_000,)
    freq = np.bincount(s.numpy(), minlength=4) / 20_000
    np.testing.assert_allclose(freq, [0.1, 0.0, 0.3, 0.6], atol=0.015)


def test_multinomial_without_replacement():
    kiln.manual_seed(0)
    w = kiln.tensor([[1.0, 2.0, 3.0, 4.0, 0.0], [0.0, 5.0, 5.0, 0.0, 1.0]])
    s = w.multinomial(3)
    assert s.shape == (2, 3)
    for row, weights in zip(s.numpy(), w.numpy()):
        assert len(set(row.tolist())) == 3
        assert all(weights[i] > 0 for i in row)
    # The first draw follows the weights: category 3 (weight 4/10) most often.
    row = kiln.tensor([1.0, 2.0, 3.0, 4.0, 0.0])
    firsts = np.array([kiln.multinomial(row, 2).numpy()[0] for _ in range(3000)])
    np.testing.assert_allclose(np.bincount(firsts, minlength=5) / 3000, [0.1, 0.2, 0.3, 0.4, 0],
                               atol=0.03)


def test_multinomial_errors():
    with pytest.raises(RuntimeError, match=r"\[multinomial\].*without replacement"):
        kiln.multinomial(kiln.ones(3), 4)
    with pytest.raises(RuntimeError, match=r"\[multinomial\].*1 or 2 dim"):
        kiln.multinomial(kiln.ones(2, 2, 2), 1)
    with pytest.raises(RuntimeError, match=r"\[multinomial\].*element < 0"):
        kiln.multinomial(kiln.tensor([1.0, -1.0]), 1)
    with pytest.raises(RuntimeError, match=r"\[multinomial\].*sum of probabilities"):
        kiln.multinomial(kiln.zeros(3), 1)
    with pytest.raises(RuntimeError, match=r"\[multinomial\].*non-zero"):
        kiln.multinomial(kiln.tensor([1.0, 0.0, 0.0]), 2)


# --- dropout --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_scaling_and_frequency(dtype):
    kiln.manual_seed(0)
    x = kiln.ones(20_000, dtype=dtype)
    y = F.dropout(x, p=0.25)
    assert y.dtype == dtype and y.shape == x.shape
    v = values(y).astype(np.float64)
    kept = v != 0
    np.testing.assert_allclose(v[kept], 1 / 0.75, rtol=1e-2)
    assert abs(kept.mean() - 0.75) < 0.015


def test_dropout_values_match_input_where_kept():
    kiln.manual_seed(3)
    a = np.random.default_rng(0).uniform(1, 2, size=(30, 40))
    y = F.dropout(kiln.tensor(a), 0.5).numpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], a[kept] * 2)


def test_dropout_noncontiguous_input():
    kiln.manual_seed(0)
    x = kiln.tensor(np.arange(1, 13, dtype=np.float64).reshape(3, 4)).t()
    y = F.dropout(x, 0.5).numpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], (x.numpy() * 2)[kept])


def test_dropout_eval_p0_and_p1():
    x = kiln.randn(5, 5)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    z = F.dropout(x, 1.0)
    assert np.all(z.numpy() == 0)


def test_dropout_reproducible_with_seed():
    x = kiln.randn(100)
    kiln.manual_seed(9)
    a = F.dropout(x).numpy()
    kiln.manual_seed(9)
    np.testing.assert_array_equal(a, F.dropout(x).numpy())


def test_dropout_grad_is_mask_times_scale():
    kiln.manual_seed(0)
    x = kiln.randn(50, 40, dtype=kiln.float64, requires_grad=True)
    y = F.dropout(x, 0.3)
    g = np.random.default_rng(1).uniform(-1, 1, size=(50, 40))
    y.backward(kiln.tensor(g))
    kept = y.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, g / 0.7, 0))
    assert 0.6 < kept.mean() < 0.8


def test_dropout_p1_grad_is_zero():
    x = kiln.randn(4, dtype=kiln.float64, requires_grad=True)
    F.dropout(x, 1.0).sum().backward()
    assert np.all(x.grad.numpy() == 0)


def test_dropout_gradcheck():
    # Reseeding inside the function fixes the mask across gradcheck's evaluations.
    def fn(x):
        kiln.manual_seed(5)
        return F.dropout(x, 0.4)
    gradcheck(fn, np.random.default_rng(0).uniform(-2, 2, size=(2, 3)))


def test_dropout_gradgradcheck():
    # The backward (grad * mask * scale, one kernel) is itself differentiable in the gradient.
    def fn(x):
        kiln.manual_seed(5)
        return F.dropout(x, 0.4)
    x = kiln.tensor(np.random.default_rng(0).uniform(-2, 2, size=(3, 5)), requires_grad=True)
    assert kiln.autograd.gradgradcheck(fn, (x,))


def test_dropout_grad_of_grad_is_the_same_mask():
    kiln.manual_seed(2)
    x = kiln.randn(64, dtype=kiln.float64, requires_grad=True)
    y = F.dropout(x, 0.5)
    g = kiln.ones(64, dtype=kiln.float64, requires_grad=True)
    (gx,) = kiln.autograd.grad(y, x, g, create_graph=True)
    (ggx,) = kiln.autograd.grad(gx.sum(), g)
    kept = y.detach().numpy() != 0
    np.testing.assert_array_equal(ggx.numpy(), np.where(kept, 2.0, 0.0))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.bfloat16])
def test_dropout_grad_keeps_nan_at_dropped_elements(dtype):
    # grad * mask * scale, as PyTorch's native_dropout_backward: 0 * NaN is NaN, not 0.
    kiln.manual_seed(0)
    x = kiln.ones(200, dtype=dtype, requires_grad=True)
    y = F.dropout(x, 0.5)
    g = np.full(200, np.nan, dtype=np.float32)
    g[::2] = 3.0
    y.backward(kiln.tensor(g).to(dtype))
    kept = values(y) != 0
    grad = values(x.grad)
    assert np.isnan(grad[1::2]).all()
    np.testing.assert_array_equal(grad[::2], np.where(kept[::2], 6.0, 0.0))


def test_dropout_inplace():
    kiln.manual_seed(0)
    x = kiln.ones(1000)
    y = F.dropout(x, 0.5, inplace=True)
    assert y is x
    assert set(np.unique(x.numpy())) == {0.0, 2.0}
    # Under autograd the in-place version still back-propagates the mask.
    a = kiln.randn(100, dtype=kiln.float64, requires_grad=True)
    b = a * 1
    F.dropout(b, 0.5, inplace=True)
    b.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.where(b.detach().numpy() != 0, 2.0, 0.0))


def test_dropout_torch_spelling():
    kiln.manual_seed(0)
    y = kiln.dropout(kiln.ones(100), 0.5, True)
    assert set(np.unique(y.numpy())) <= {0.0, 2.0}
    assert kiln.dropout(kiln.ones(3), 0.5, False).numpy().tolist() == [1, 1, 1]


def test_dropout_errors():
    with pytest.raises(ValueError, match=r"\[dropout\] dropout probability has to be between 0 "
                                         r"and 1, but got 1.5"):
        F.dropout(kiln.ones(3), 1.5)
    with pytest.raises(ValueError, match=r"\[dropout\].*-0.1"):
        F.dropout(kiln.ones(3), -0.1, training=False)
    with pytest.raises(RuntimeError, match=r"\[dropout\].*int64"):
        F.dropout(kiln.ones(3, dtype=kiln.int64), 0.5)
