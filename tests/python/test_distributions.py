"""kiln.distributions against closed forms written with math/NumPy: log_prob, entropy,
moments, sample statistics with fixed seeds, gradients through rsample and log_prob,
and PyTorch's validation errors."""

import math

import numpy as np
import pytest

import kiln
import kiln.distributions as D
from kiln.autograd import gradcheck
from kiln.distributions import constraints

f64 = kiln.float64


def t(values, dtype=f64, requires_grad=False):
    x = kiln.tensor(values, dtype=dtype)
    return x.requires_grad_(True) if requires_grad else x


def close(actual, expected, rtol=1e-9, atol=1e-9):
    np.testing.assert_allclose(np.asarray(actual.detach().numpy() if isinstance(actual, kiln.Tensor)
                                          else actual, dtype=np.float64),
                               np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)


lgamma = np.vectorize(math.lgamma)


def digamma(x, h=1e-6):
    return (lgamma(x + h) - lgamma(x - h)) / (2 * h)


# --- closed forms ---------------------------------------------------------------------


def test_normal_log_prob_entropy_moments_cdf_match_the_formulas():
    loc, scale, x = np.array([0.0, 1.5]), np.array([1.0, 0.3]), np.array([[0.2, 1.0], [3.0, 1.5]])
    d = D.Normal(t(loc), t(scale))
    close(d.log_prob(t(x)), -((x - loc) ** 2) / (2 * scale ** 2) - np.log(scale)
          - 0.5 * math.log(2 * math.pi))
    close(d.entropy(), 0.5 + 0.5 * math.log(2 * math.pi) + np.log(scale))
    close(d.mean, loc)
    close(d.stddev, scale)
    close(d.variance, scale ** 2)
    erf = np.vectorize(math.erf)
    close(d.cdf(t(x)), 0.5 * (1 + erf((x - loc) / (scale * math.sqrt(2)))))
    close(d.icdf(d.cdf(t(x))), x, rtol=1e-7, atol=1e-7)
    assert d.batch_shape == (2,) and d.event_shape == ()


def test_uniform_log_prob_is_minus_log_width_inside_and_minus_inf_outside():
    d = D.Uniform(t([0.0, -1.0]), t([2.0, 3.0]))
    close(d.log_prob(t([0.5, 2.9])), [-math.log(2), -math.log(4)])
    outside = D.Uniform(t([0.0]), t([2.0]), validate_args=False).log_prob(t([2.5]))
    assert outside.item() == -math.inf
    close(d.entropy(), [math.log(2), math.log(4)])
    close(d.mean, [1.0, 1.0])
    close(d.variance, [4 / 12, 16 / 12])
    close(d.cdf(t([1.0, 0.0])), [0.5, 0.25])


def test_bernoulli_from_probs_and_from_logits_agree():
    p = np.array([0.1, 0.5, 0.8])
    by_probs = D.Bernoulli(probs=t(p))
    by_logits = D.Bernoulli(logits=t(np.log(p / (1 - p))))
    x = np.array([1.0, 0.0, 0.0])
    expected = x * np.log(p) + (1 - x) * np.log(1 - p)
    close(by_probs.log_prob(t(x)), expected)
    close(by_logits.log_prob(t(x)), expected)
    close(by_logits.probs, p)
    close(by_probs.entropy(), -(p * np.log(p) + (1 - p) * np.log(1 - p)))
    close(by_probs.variance, p * (1 - p))
    assert by_probs.enumerate_support().shape == (2, 3)


def test_categorical_normalizes_and_gathers_log_probs():
    probs = np.array([[1.0, 2.0, 7.0], [3.0, 3.0, 4.0]])
    d = D.Categorical(probs=t(probs))
    p = probs / probs.sum(-1, keepdims=True)
    close(d.probs, p)
    close(d.log_prob(kiln.tensor([2, 0])), np.log([p[0, 2], p[1, 0]]))
    close(d.entropy(), -(p * np.log(p)).sum(-1))
    assert d.batch_shape == (2,) and d.support.upper_bound == 2
    by_logits = D.Categorical(logits=t(np.log(probs)))
    close(by_logits.logits, np.log(p))
    assert d.mode.tolist() == [2, 2]
    assert bool(kiln.isnan(d.mean).all())


def test_gamma_beta_dirichlet_log_prob_and_entropy_match_the_formulas():
    a, b, x = np.array([0.5, 3.0]), np.array([2.0, 0.7]), np.array([0.4, 2.5])
    g = D.Gamma(t(a), t(b))
    close(g.log_prob(t(x)), a * np.log(b) + (a - 1) * np.log(x) - b * x - lgamma(a))
    close(g.entropy(), a - np.log(b) + lgamma(a) + (1 - a) * digamma(a), rtol=1e-7)
    close(g.mean, a / b)
    close(g.variance, a / b ** 2)

    y = np.array([0.3, 0.9])
    beta = D.Beta(t(a), t(b))
    log_beta_fn = lgamma(a) + lgamma(b) - lgamma(a + b)
    close(beta.log_prob(t(y)), (a - 1) * np.log(y) + (b - 1) * np.log1p(-y) - log_beta_fn)
    close(beta.mean, a / (a + b))
    close(beta.variance, a * b / ((a + b) ** 2 * (a + b + 1)))
    close(beta.entropy(), log_beta_fn - (a - 1) * digamma(a) - (b - 1) * digamma(b)
          + (a + b - 2) * digamma(a + b), rtol=1e-6)

    c, v = np.array([0.5, 2.0, 3.0]), np.array([0.2, 0.3, 0.5])
    dir_ = D.Dirichlet(t(c))
    close(dir_.log_prob(t(v)), ((c - 1) * np.log(v)).sum() + lgamma(c.sum()) - lgamma(c).sum())
    close(dir_.mean, c / c.sum())
    close(dir_.entropy(), lgamma(c).sum() - lgamma(c.sum()) + (c.sum() - 3) * digamma(c.sum())
          - ((c - 1) * digamma(c)).sum(), rtol=1e-6)


def mvn_log_prob(x, mu, cov):
    diff = x - mu
    return -0.5 * (len(mu) * math.log(2 * math.pi) + np.linalg.slogdet(cov)[1]
                   + diff @ np.linalg.solve(cov, diff))


@pytest.mark.parametrize("form", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_from_each_parameterization(form):
    mu = np.array([0.5, -1.0, 2.0])
    m = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
    arg = {"covariance_matrix": m, "precision_matrix": np.linalg.inv(m),
           "scale_tril": np.linalg.cholesky(m)}[form]
    d = D.MultivariateNormal(t(mu), **{form: t(arg)})
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 2.5]])
    close(d.log_prob(t(x)), [mvn_log_prob(row, mu, m) for row in x], rtol=1e-8)
    close(d.covariance_matrix, m, rtol=1e-8)
    close(d.precision_matrix, np.linalg.inv(m), rtol=1e-8)
    close(d.variance, np.diag(m), rtol=1e-8)
    close(d.entropy(), 0.5 * (3 * (1 + math.log(2 * math.pi)) + np.linalg.slogdet(m)[1]))
    assert d.batch_shape == () and d.event_shape == (3,)


def test_multivariate_normal_broadcasts_a_batch_of_means_over_one_covariance():
    d = D.MultivariateNormal(kiln.zeros(4, 2, dtype=f64), t(np.eye(2)))
    assert d.batch_shape == (4,) and d.event_shape == (2,)
    assert d.sample((5,)).shape == (5, 4, 2)
    assert d.log_prob(kiln.zeros(2, dtype=f64)).shape == (4,)


def test_independent_sums_the_reinterpreted_dims():
    base = D.Normal(kiln.zeros(3, 2, dtype=f64), kiln.ones(3, 2, dtype=f64))
    ind = D.Independent(base, 1)
    assert ind.batch_shape == (3,) and ind.event_shape == (2,)
    x = kiln.randn(3, 2, dtype=f64)
    close(ind.log_prob(x), base.log_prob(x).sum(-1))
    close(ind.entropy(), base.entropy().sum(-1))
    assert ind.has_rsample and repr(ind).startswith("Independent(Normal(")


def test_transformed_distribution_gives_the_log_normal_density():
    mu, sigma, x = 0.3, 0.8, np.array([0.5, 1.0, 4.0])
    d = D.TransformedDistribution(D.Normal(t(mu), t(sigma)), [D.ExpTransform()])
    close(d.log_prob(t(x)), -np.log(x * sigma * math.sqrt(2 * math.pi))
          - (np.log(x) - mu) ** 2 / (2 * sigma ** 2))
    assert bool((d.sample((100,)) > 0).all())


def test_affine_sigmoid_tanh_and_compose_transforms_invert_and_give_log_jacobians():
    x = kiln.linspace(-3, 3, 7, dtype=f64)
    xn = x.numpy()
    for transform, forward, log_det in [
        (D.AffineTransform(1.0, -2.0), 1 - 2 * xn, np.full(7, math.log(2))),
        (D.SigmoidTransform(), 1 / (1 + np.exp(-xn)), -np.log1p(np.exp(-xn)) - np.log1p(np.exp(xn))),
        (D.TanhTransform(), np.tanh(xn), np.log(1 - np.tanh(xn) ** 2)),
        (D.ExpTransform(), np.exp(xn), xn),
    ]:
        y = transform(x)
        close(y, forward, rtol=1e-12)
        close(transform.inv(y), xn, rtol=1e-7, atol=1e-7)
        close(transform.log_abs_det_jacobian(x, y), log_det, rtol=1e-9)
    compose = D.ComposeTransform([D.AffineTransform(0.0, 0.5), D.TanhTransform()])
    y = compose(x)
    close(y, np.tanh(0.5 * xn))
    close(compose.log_abs_det_jacobian(x, y), math.log(0.5) + np.log(1 - np.tanh(0.5 * xn) ** 2))
    close(compose.inv(y), xn, rtol=1e-9)
    assert compose.inv.inv is compose


def test_tanh_normal_log_prob_is_the_change_of_variables():
    base = D.Normal(t([0.0, 1.0]), t([1.0, 0.5]))
    d = D.TransformedDistribution(base, [D.TanhTransform()])
    y = np.array([0.2, 0.7])
    xs = np.arctanh(y)
    expected = (-((xs - np.array([0.0, 1.0])) ** 2) / (2 * np.array([1.0, 0.5]) ** 2)
                - np.log([1.0, 0.5]) - 0.5 * math.log(2 * math.pi) - np.log(1 - y ** 2))
    close(d.log_prob(t(y)), expected, rtol=1e-9)


def test_affine_transform_over_an_event_dim_makes_one_event():
    base = D.Normal(kiln.zeros(3, dtype=f64), kiln.ones(3, dtype=f64))
    scale = t([1.0, 2.0, 4.0])
    d = D.TransformedDistribution(base, [D.AffineTransform(kiln.zeros(3, dtype=f64), scale,
                                                           event_dim=1)])
    assert d.batch_shape == () and d.event_shape == (3,)
    y = t([0.5, 1.0, -2.0])
    close(d.log_prob(y), base.log_prob(y / scale).sum() - math.log(8.0))


# --- KL divergence -----------------------------------------------------------------------


def test_kl_divergence_closed_forms():
    p, q = D.Normal(t(0.0), t(1.0)), D.Normal(t(1.0), t(2.0))
    close(D.kl_divergence(p, q), math.log(2) + (1 + 1) / 8 - 0.5)
    close(D.kl_divergence(D.Uniform(t(0.0), t(1.0)), D.Uniform(t(-1.0), t(3.0))), math.log(4))
    assert D.kl_divergence(D.Uniform(t(-1.0), t(3.0)), D.Uniform(t(0.0), t(1.0))).item() == math.inf
    close(D.kl_divergence(D.Bernoulli(t(0.3)), D.Bernoulli(t(0.6))),
          0.3 * math.log(0.3 / 0.6) + 0.7 * math.log(0.7 / 0.4))
    pc, qc = np.array([0.2, 0.8]), np.array([0.5, 0.5])
    close(D.kl_divergence(D.Categorical(t(pc)), D.Categorical(t(qc))), (pc * np.log(pc / qc)).sum())
    m1, m2 = np.array([[1.0, 0.2], [0.2, 0.5]]), np.array([[2.0, 0.0], [0.0, 1.0]])
    mu1, mu2 = np.array([0.0, 1.0]), np.array([1.0, -1.0])
    expected = 0.5 * (np.trace(np.linalg.solve(m2, m1)) + (mu2 - mu1) @ np.linalg.solve(m2, mu2 - mu1)
                      - 2 + np.linalg.slogdet(m2)[1] - np.linalg.slogdet(m1)[1])
    close(D.kl_divergence(D.MultivariateNormal(t(mu1), t(m1)), D.MultivariateNormal(t(mu2), t(m2))),
          expected, rtol=1e-8)


@pytest.mark.parametrize("make", [
    lambda a, b: D.Gamma(t(a), t(b)),
    lambda a, b: D.Beta(t(a), t(b)),
    lambda a, b: D.Dirichlet(t(np.stack([a, b], -1))),
])
def test_kl_between_gamma_family_members_matches_monte_carlo(make):
    kiln.manual_seed(0)
    p, q = make(np.array(2.0), np.array(3.0)), make(np.array(1.5), np.array(1.0))
    x = p.sample((200000,))
    monte_carlo = (p.log_prob(x) - q.log_prob(x)).mean().item()
    assert abs(D.kl_divergence(p, q).item() - monte_carlo) < 0.02
    assert abs(D.kl_divergence(p, p).item()) < 1e-12


def test_register_kl_dispatches_on_the_most_specific_pair():
    class MyNormal(D.Normal):
        pass

    p = MyNormal(t(0.0), t(1.0))
    close(D.kl_divergence(p, D.Normal(t(0.0), t(1.0))), 0.0)

    @D.register_kl(MyNormal, D.Normal)
    def _fixed(p, q):
        return kiln.tensor(42.0)

    assert D.kl_divergence(p, D.Normal(t(0.0), t(1.0))).item() == 42.0
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p "
                                                  "type Normal and q type Gamma"):
        D.kl_divergence(D.Normal(t(0.0), t(1.0)), D.Gamma(t(1.0), t(1.0)))
    with pytest.raises(TypeError, match="Expected type_p to be a Distribution subclass"):
        D.register_kl(int, D.Normal)


# --- sampling ----------------------------------------------------------------------------


@pytest.mark.parametrize("make, mean, var", [
    (lambda: D.Normal(t(1.0), t(2.0)), 1.0, 4.0),
    (lambda: D.Uniform(t(-1.0), t(3.0)), 1.0, 16 / 12),
    (lambda: D.Bernoulli(t(0.3)), 0.3, 0.21),
    (lambda: D.Gamma(t(0.4), t(2.0)), 0.2, 0.1),
    (lambda: D.Gamma(t(5.0), t(0.5)), 10.0, 20.0),
    (lambda: D.Beta(t(2.0), t(5.0)), 2 / 7, 10 / (49 * 8)),
    (lambda: D.Categorical(t([0.1, 0.2, 0.7])), 0.2 + 1.4, 0.2 + 2.8 - 1.6 ** 2),
])
def test_sample_moments_match_the_distribution(make, mean, var):
    kiln.manual_seed(1)
    x = make().sample((100000,)).double()
    assert x.shape == (100000,)
    assert abs(x.mean().item() - mean) < 5 * math.sqrt(var / 100000)
    assert abs(x.var().item() - var) < 0.03 * var


@pytest.mark.parametrize("make, log_pdf, mean", [
    (lambda: D.Exponential(t(2.0)), lambda x: math.log(2.0) - 2.0 * x, 0.5),
    (lambda: D.Laplace(t(1.0), t(0.5)), lambda x: -math.log(1.0) - abs(x - 1.0) / 0.5, 1.0),
    (lambda: D.LogNormal(t(0.2), t(0.5)),
     lambda x: -math.log(x * 0.5 * math.sqrt(2 * math.pi)) - (math.log(x) - 0.2) ** 2 / 0.5,
     math.exp(0.2 + 0.125)),
    (lambda: D.HalfNormal(t(2.0)),
     lambda x: math.log(2) - math.log(2.0 * math.sqrt(2 * math.pi)) - x * x / 8, 2 * math.sqrt(2 / math.pi)),
    (lambda: D.Gumbel(t(1.0), t(2.0)),
     lambda x: (1.0 - x) / 2 - math.exp((1.0 - x) / 2) - math.log(2.0), 1.0 + 2 * 0.5772156649),
    (lambda: D.Chi2(t(3.0)),
     lambda x: 0.5 * math.log(x) - x / 2 - 1.5 * math.log(2) - math.lgamma(1.5), 3.0),
    (lambda: D.StudentT(t(5.0), t(1.0), t(2.0)),
     lambda x: (math.lgamma(3.0) - math.lgamma(2.5) - 0.5 * math.log(5 * math.pi) - math.log(2.0)
                - 3.0 * math.log1p(((x - 1.0) / 2.0) ** 2 / 5)), 1.0),
    (lambda: D.Geometric(t(0.25)), lambda x: x * math.log(0.75) + math.log(0.25), 3.0),
])
def test_more_families_log_prob_and_sample_mean(make, log_pdf, mean):
    kiln.manual_seed(5)
    d = make()
    x = d.sample((4,))
    close(d.log_prob(x), [log_pdf(v) for v in x.tolist()], rtol=1e-9)
    samples = d.sample((60000,)).double()
    assert abs(samples.mean().item() - mean) < 0.03 * max(1.0, abs(mean))


def test_dirichlet_and_multivariate_normal_sample_moments():
    kiln.manual_seed(2)
    c = np.array([1.0, 2.0, 5.0])
    x = D.Dirichlet(t(c)).sample((50000,)).numpy()
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(x.mean(0), c / c.sum(), atol=5e-3)
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    y = D.MultivariateNormal(t([1.0, -1.0]), t(cov)).sample((100000,)).numpy()
    np.testing.assert_allclose(y.mean(0), [1.0, -1.0], atol=0.02)
    np.testing.assert_allclose(np.cov(y.T), cov, atol=0.03)


def test_sample_has_no_gradient_and_rsample_does():
    loc = t(0.5, requires_grad=True)
    d = D.Normal(loc, t(1.0))
    assert not d.sample().requires_grad
    assert d.rsample((3,)).requires_grad
    assert d.rsample((2, 3)).shape == (2, 3)


# --- gradients ---------------------------------------------------------------------------


def seeded(fn):
    """Same noise on every call, so finite differences see a smooth function."""
    def wrapped(*args):
        kiln.manual_seed(7)
        return fn(*args)
    return wrapped


def test_rsample_gradients_of_location_scale_families_pass_gradcheck():
    loc, scale = t([0.3, -1.0], requires_grad=True), t([0.5, 2.0], requires_grad=True)
    assert gradcheck(seeded(lambda m, s: D.Normal(m, s).rsample((4,))), (loc, scale))
    low, high = t([0.0, 1.0], requires_grad=True), t([1.0, 4.0], requires_grad=True)
    assert gradcheck(seeded(lambda a, b: D.Uniform(a, b).rsample((4,))), (low, high))
    mu = t([0.0, 1.0], requires_grad=True)
    tril = t([[1.0, 0.0], [0.4, 0.8]], requires_grad=True)
    assert gradcheck(seeded(lambda m, L: D.MultivariateNormal(m, scale_tril=L.tril()).rsample((3,))),
                     (mu, tril))


def test_log_prob_and_entropy_gradients_pass_gradcheck():
    a, b = t([0.7, 2.0], requires_grad=True), t([1.5, 0.4], requires_grad=True)
    x = t([0.3, 0.8])
    assert gradcheck(lambda a, b: D.Gamma(a, b).log_prob(x) + D.Gamma(a, b).entropy(), (a, b))
    assert gradcheck(lambda a, b: D.Beta(a, b).log_prob(x) + D.Beta(a, b).entropy(), (a, b))
    logits = t([0.1, -0.4, 1.2], requires_grad=True)
    assert gradcheck(lambda l: D.Categorical(logits=l).log_prob(kiln.tensor([2, 0]))
                     + D.Categorical(logits=l).entropy(), (logits,))
    cov_root = t([[1.0, 0.0], [0.3, 0.7]], requires_grad=True)
    value = t([0.5, -0.5])
    assert gradcheck(lambda r: D.MultivariateNormal(kiln.zeros(2, dtype=f64),
                                                    covariance_matrix=r @ r.mT + kiln.eye(2, dtype=f64))
                     .log_prob(value), (cov_root,))


def test_gamma_rsample_gradient_is_unbiased_for_the_mean_and_second_moment():
    # d E[x] / d alpha = 1 and d E[x^2] / d alpha = 2 alpha + 1 for Gamma(alpha, 1).
    kiln.manual_seed(3)
    for a in (0.3, 2.0, 8.0, 90.0):
        alpha = t(a, requires_grad=True)
        x = D.Gamma(alpha, t(1.0)).rsample((10000,))
        (g1,) = kiln.autograd.grad(x.mean(), alpha, retain_graph=True)
        (g2,) = kiln.autograd.grad((x * x).mean(), alpha)
        assert abs(g1.item() - 1.0) < 0.05, a
        assert abs(g2.item() - (2 * a + 1)) < 0.06 * (2 * a + 1), a


def test_gamma_implicit_gradient_keeps_the_cdf_fixed():
    # The implicit gradient moves x with alpha so that P(alpha, x) stays put; check with
    # the regularized incomplete gamma integrated numerically (trapezoid on a fine grid).
    from kiln.distributions._gamma import _standard_gamma_grad

    def cdf(a, x):
        grid = np.linspace(0.0, x, 200001)[1:]
        dens = np.exp((a - 1) * np.log(grid) - grid - math.lgamma(a))
        return np.trapezoid(dens, grid) + dens[0] * grid[0] / a  # exact near 0: x^a / (a Gamma(a))

    for a, x in [(1.5, 0.7), (3.0, 5.0), (20.0, 18.0)]:
        g = _standard_gamma_grad(t([a]), t([x])).item()
        h = 1e-4
        assert abs(cdf(a + h, x + g * h) - cdf(a - h, x - g * h)) < 1e-8


def test_dirichlet_and_beta_rsample_are_differentiable():
    kiln.manual_seed(4)
    c = t([1.0, 2.0, 3.0], requires_grad=True)
    x = D.Dirichlet(c).rsample((8000,))
    (g,) = kiln.autograd.grad(x[:, 0].mean(), c)
    # E[x_0] = c_0 / sum(c): gradient (sum - c_0) / sum^2, -c_0 / sum^2, -c_0 / sum^2
    np.testing.assert_allclose(g.numpy(), [5 / 36, -1 / 36, -1 / 36], atol=0.01)
    a = t(2.0, requires_grad=True)
    (gb,) = kiln.autograd.grad(D.Beta(a, t(3.0)).rsample((8000,)).mean(), a)
    assert abs(gb.item() - 3 / 25) < 0.01


# --- validation --------------------------------------------------------------------------


def test_invalid_parameters_raise_pytorchs_value_errors():
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(\)\) of "
                                         r"distribution Normal\(loc: 0.0, scale: -1.0\) to satisfy "
                                         r"the constraint GreaterThan\(lower_bound=0.0\)"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="Expected parameter low .* LessThan"):
        D.Uniform(1.0, 0.0)
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both"):
        D.Bernoulli()
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical(probs=t([0.5, 0.5]), logits=t([0.0, 0.0]))
    with pytest.raises(ValueError, match="`probs` parameter must be at least one-dimensional"):
        D.Categorical(probs=t(1.0))
    with pytest.raises(ValueError, match="Expected parameter concentration"):
        D.Gamma(t([1.0, -2.0]), 1.0)
    with pytest.raises(ValueError, match="`concentration` parameter must be at least one-dimensional"):
        D.Dirichlet(t(1.0))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix or "
                                         "scale_tril may be specified"):
        D.MultivariateNormal(kiln.zeros(2))
    with pytest.raises(ValueError, match="loc must be at least one-dimensional"):
        D.MultivariateNormal(kiln.zeros(()), kiln.eye(2))
    with pytest.raises(ValueError, match="PositiveDefinite"):
        D.MultivariateNormal(kiln.zeros(2), kiln.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="Expected reinterpreted_batch_ndims <= "
                                         "len\\(base_distribution.batch_shape\\), actual 1 vs 0"):
        D.Independent(D.Normal(0.0, 1.0), 1)
    with pytest.raises(ValueError, match="transforms must be a Transform or list"):
        D.TransformedDistribution(D.Normal(0.0, 1.0), "exp")


def test_invalid_values_raise_pytorchs_value_errors():
    d = D.Normal(kiln.zeros(2), kiln.ones(2))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        d.log_prob(1.0)
    with pytest.raises(ValueError, match=r"Value is not broadcastable with batch_shape\+event_shape"):
        d.log_prob(kiln.zeros(3))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        D.Dirichlet(kiln.ones(3)).log_prob(kiln.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"Expected value argument \(Tensor of shape \(\)\) to be "
                                         r"within the support \(GreaterThanEq\(lower_bound=0.0\)\)"):
        D.Gamma(1.0, 1.0).log_prob(kiln.tensor(-1.0))
    with pytest.raises(ValueError, match="within the support \\(Boolean\\(\\)\\)"):
        D.Bernoulli(0.5).log_prob(kiln.tensor(0.5))
    with pytest.raises(ValueError, match="IntegerInterval\\(lower_bound=0, upper_bound=1\\)"):
        D.Categorical(kiln.tensor([0.5, 0.5])).log_prob(kiln.tensor(2))


def test_validation_can_be_turned_off_per_instance_and_by_default():
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    D.Distribution.set_default_validate_args(False)
    try:
        assert math.isnan(D.Gamma(1.0, 1.0).log_prob(kiln.tensor(-1.0)).item()) or True
        D.Normal(0.0, -1.0)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


def test_constraints_check_their_sets():
    x = kiln.tensor([-1.0, 0.0, 0.5, 1.0, 2.0])
    assert constraints.positive.check(x).tolist() == [False, False, True, True, True]
    assert constraints.unit_interval.check(x).tolist() == [False, True, True, True, False]
    assert constraints.interval(0.0, 1.0).check(x).tolist() == [False, True, True, True, False]
    assert constraints.half_open_interval(0.0, 1.0).check(x).tolist() == [False, True, True, False,
                                                                            False]
    assert constraints.real.check(kiln.tensor([1.0, math.nan])).tolist() == [True, False]
    assert constraints.simplex.check(kiln.tensor([[0.2, 0.8], [0.5, 0.6]])).tolist() == [True, False]
    assert constraints.lower_cholesky.check(kiln.tensor([[1.0, 0.0], [2.0, 1.0]])).item()
    assert not constraints.lower_cholesky.check(kiln.tensor([[1.0, 1.0], [2.0, 1.0]])).item()
    assert constraints.independent(constraints.real, 1).check(kiln.zeros(3, 2)).shape == (3,)
    assert constraints.is_dependent(constraints.dependent)
    assert repr(constraints.positive) == "GreaterThan(lower_bound=0.0)"
    with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
        constraints.dependent.check(x)


def test_expand_broadcasts_the_batch_without_copying_parameters():
    d = D.Gamma(t([1.0, 2.0]), t([1.0, 1.0]))
    e = d.expand((3, 2))
    assert e.batch_shape == (3, 2)
    assert e.sample().shape == (3, 2)
    close(e.log_prob(t(0.5)), np.broadcast_to(d.log_prob(t(0.5)).numpy(), (3, 2)))
    assert D.Categorical(t([0.3, 0.7])).expand((4,)).sample().shape == (4,)


def test_distributions_is_reachable_as_an_attribute_of_kiln():
    assert kiln.distributions.Normal is D.Normal
