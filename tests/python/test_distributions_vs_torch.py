"""kiln.distributions against torch.distributions where PyTorch is installed: the same
log_prob, entropy, moments, KL divergences, shapes and validation errors."""

import numpy as np
import pytest

import kiln
import kiln.distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

COV = [[2.0, 0.5], [0.5, 1.0]]

# (name, constructor over (lib, dist module, tensor factory), a value in the support)
CASES = [
    ("normal", lambda M, T: M.Normal(T([0.0, 1.0]), T([1.0, 2.0])), [0.3, -1.0]),
    ("normal_scalar", lambda M, T: M.Normal(0.5, 2.0), 0.1),
    ("uniform", lambda M, T: M.Uniform(T([0.0, -1.0]), T([2.0, 0.5])), [0.5, 0.0]),
    ("bernoulli_probs", lambda M, T: M.Bernoulli(probs=T([0.3, 0.9])), [1.0, 0.0]),
    ("bernoulli_logits", lambda M, T: M.Bernoulli(logits=T([0.3, -2.0])), [1.0, 0.0]),
    ("categorical", lambda M, T: M.Categorical(probs=T([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])),
     [2, 0]),
    ("categorical_logits", lambda M, T: M.Categorical(logits=T([0.1, -1.0, 2.0])), 1),
    ("gamma", lambda M, T: M.Gamma(T([0.5, 3.0]), T([1.0, 2.0])), [0.3, 2.0]),
    ("beta", lambda M, T: M.Beta(T([0.5, 3.0]), T([1.0, 2.0])), [0.3, 0.7]),
    ("dirichlet", lambda M, T: M.Dirichlet(T([0.5, 3.0, 2.0])), [0.2, 0.3, 0.5]),
    ("mvn_cov", lambda M, T: M.MultivariateNormal(T([0.0, 1.0]), T(COV)), [0.3, -0.2]),
    ("mvn_prec", lambda M, T: M.MultivariateNormal(T([0.0, 1.0]), precision_matrix=T(COV)),
     [0.3, -0.2]),
    ("mvn_tril", lambda M, T: M.MultivariateNormal(T([[0.0, 1.0], [1.0, 0.0]]),
                                                   scale_tril=T([[1.0, 0.0], [0.4, 0.7]])),
     [0.3, -0.2]),
    ("independent", lambda M, T: M.Independent(M.Normal(T([0.0, 1.0, 2.0]), T([1.0, 1.0, 3.0])),
                                                1), [0.3, -0.2, 1.0]),
    ("exponential", lambda M, T: M.Exponential(T([0.5, 2.0])), [0.3, 1.2]),
    ("laplace", lambda M, T: M.Laplace(T([0.0, 1.0]), T([1.0, 0.5])), [0.3, 1.2]),
    ("cauchy", lambda M, T: M.Cauchy(T([0.0, 1.0]), T([1.0, 0.5])), [0.3, 1.2]),
    ("chi2", lambda M, T: M.Chi2(T([1.5, 4.0])), [0.3, 1.2]),
    ("student_t", lambda M, T: M.StudentT(T([0.8, 1.5, 4.0]), T([0.0, 1.0, 2.0]),
                                          T([1.0, 0.5, 2.0])), [0.3, 1.2, -1.0]),
    ("log_normal", lambda M, T: M.LogNormal(T([0.0, 1.0]), T([1.0, 0.5])), [0.3, 1.2]),
    ("half_normal", lambda M, T: M.HalfNormal(T([1.0, 0.5])), [0.3, 1.2]),
    ("gumbel", lambda M, T: M.Gumbel(T([0.0, 1.0]), T([1.0, 0.5])), [0.3, 1.2]),
    ("geometric", lambda M, T: M.Geometric(probs=T([0.3, 0.8])), [0.0, 3.0]),
    ("one_hot", lambda M, T: M.OneHotCategorical(probs=T([[0.2, 0.8], [0.5, 0.5]])),
     [[0.0, 1.0], [1.0, 0.0]]),
]


def both(make):
    ours = make(D, lambda v: kiln.tensor(v, dtype=kiln.float64))
    theirs = make(TD, lambda v: torch.tensor(v, dtype=torch.float64))
    return ours, theirs


def value_pair(v):
    dtype = (kiln.int64, torch.int64) if isinstance(np.asarray(v).flat[0].item(), int) else (
        kiln.float64, torch.float64)
    return kiln.tensor(v, dtype=dtype[0]), torch.tensor(v, dtype=dtype[1])


def same(a, b, rtol=1e-10):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=1e-12,
                               equal_nan=True)


@pytest.mark.parametrize("name, make, value", CASES, ids=[c[0] for c in CASES])
def test_scores_moments_and_shapes_match_torch(name, make, value):
    ours, theirs = both(make)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    kv, tv = value_pair(value)
    same(ours.log_prob(kv), theirs.log_prob(tv))
    same(ours.entropy(), theirs.entropy())
    same(ours.mean, theirs.mean)
    same(ours.variance, theirs.variance)
    assert tuple(ours.sample((3,)).shape) == tuple(theirs.sample((3,)).shape)
    assert repr(ours).replace("kiln.Size", "torch.Size") == repr(theirs)
    expanded = (4,) + tuple(ours.batch_shape)
    try:
        expected = TD.kl_divergence(theirs.expand(expanded), theirs.expand(expanded))
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            D.kl_divergence(ours.expand(expanded), ours.expand(expanded))
        return
    same(D.kl_divergence(ours.expand(expanded), ours.expand(expanded)), expected)


KL_PAIRS = [
    (lambda M, T: M.Normal(T(0.0), T(1.0)), lambda M, T: M.Normal(T(1.0), T(2.0))),
    (lambda M, T: M.Uniform(T(0.0), T(1.0)), lambda M, T: M.Normal(T(0.3), T(2.0))),
    (lambda M, T: M.Gamma(T(2.0), T(3.0)), lambda M, T: M.Gamma(T(1.5), T(1.0))),
    (lambda M, T: M.Beta(T(2.0), T(3.0)), lambda M, T: M.Beta(T(1.5), T(1.0))),
    (lambda M, T: M.Dirichlet(T([1.0, 2.0])), lambda M, T: M.Dirichlet(T([3.0, 0.5]))),
    (lambda M, T: M.Bernoulli(T([0.2, 0.0])), lambda M, T: M.Bernoulli(T([0.5, 0.5]))),
    (lambda M, T: M.Categorical(T([0.2, 0.8])), lambda M, T: M.Categorical(T([0.6, 0.4]))),
    (lambda M, T: M.MultivariateNormal(T([0.0, 1.0]), T(COV)),
     lambda M, T: M.MultivariateNormal(T([1.0, 0.0]), T([[1.0, 0.0], [0.0, 3.0]]))),
]


@pytest.mark.parametrize("make_p, make_q", KL_PAIRS)
def test_kl_divergences_match_torch(make_p, make_q):
    p, tp = both(make_p)
    q, tq = both(make_q)
    same(D.kl_divergence(p, q), TD.kl_divergence(tp, tq))


def test_transformed_distributions_match_torch():
    base, tbase = both(lambda M, T: M.Normal(T([0.0, 0.5, 1.0]), T([1.0, 0.5, 2.0])))
    chains = [
        (lambda M: [M.ExpTransform()]),
        (lambda M: [M.AffineTransform(1.0, -2.0)]),
        (lambda M: [M.SigmoidTransform()]),
        (lambda M: [M.AffineTransform(0.0, 0.5), M.TanhTransform()]),
        (lambda M: M.ComposeTransform([M.ExpTransform(), M.AffineTransform(1.0, 3.0)])),
    ]
    for chain in chains:
        ours = D.TransformedDistribution(base, chain(D))
        theirs = TD.TransformedDistribution(tbase, chain(TD))
        value = theirs.sample()
        same(ours.log_prob(kiln.tensor(value.numpy())), theirs.log_prob(value), rtol=1e-9)
        assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
        assert repr(ours.support) == repr(theirs.support)


ERRORS = [
    lambda M, T: M.Normal(0.0, -1.0),
    lambda M, T: M.Uniform(1.0, 0.0),
    lambda M, T: M.Bernoulli(),
    lambda M, T: M.Gamma(1.0, 1.0).log_prob(T(-1.0)),
    lambda M, T: M.Independent(M.Normal(0.0, 1.0), 1),
    lambda M, T: M.MultivariateNormal(T([0.0, 0.0])),
    lambda M, T: M.Dirichlet(T(1.0)),
    lambda M, T: M.Normal(T([0.0, 0.0]), T([1.0, 1.0])).log_prob(T([0.0] * 3)),
    lambda M, T: M.Categorical(T([0.5, 0.5])).log_prob(T(3)),
]


@pytest.mark.parametrize("make", ERRORS)
def test_validation_errors_match_torch(make):
    # Compared up to the printed values ("... but found invalid values:\n<tensor>").
    messages = []
    for module, factory in ((D, kiln.tensor), (TD, torch.tensor)):
        with pytest.raises(Exception) as info:
            make(module, factory)
        text = str(info.value).replace("kiln.Size", "torch.Size").split(":\n")[0]
        messages.append((info.type, text))
    assert messages[0] == messages[1]


def test_gamma_rsample_gradient_matches_torchs_standard_gamma_grad():
    from kiln.distributions._gamma import _standard_gamma_grad
    for a in (0.1, 0.7, 3.0, 25.0, 200.0):
        alpha = torch.full((500,), a, dtype=torch.float64)
        x = torch._standard_gamma(alpha)
        ours = _standard_gamma_grad(kiln.tensor(alpha.numpy()), kiln.tensor(x.numpy())).numpy()
        np.testing.assert_allclose(ours, torch._standard_gamma_grad(alpha, x).numpy(), rtol=5e-3)
