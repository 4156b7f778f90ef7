"""Standard gamma sampling with a reparameterized (implicit) gradient.

Note [Gamma samples and their gradient]
kiln has no gamma kernel, so samples come from Marsaglia and Tsang's squeeze
method written with kiln ops: every round draws a normal and a uniform for each
element still pending, and stops when all are accepted (about 1.05 rounds on
average; the loop reads one boolean per round). For concentration a < 1 we draw
Gamma(a + 1) and multiply by U**(1/a), in log space so small a does not round
the sample to zero.

The rejection step is not differentiable, so, as PyTorch does, the gradient is
the implicit one: hold the CDF value u = P(a, x) fixed and differentiate
x = P^-1(a, u), giving dx/da = -(dP/da) / p(x; a). P is the regularized lower
incomplete gamma function: its series for x < a + 1 and its continued fraction
(for Q = 1 - P, accurate in the upper tail) otherwise, a fixed number of terms
each so no host sync is needed, and dP/da by a central difference in float64.
Above a = _ASYMPTOTIC_FROM both expansions need too many terms, and the
Wilson-Hilferty approximation (x/a)^(1/3) ~ Normal(1 - 1/(9a), 1/(9a)) is
differentiated at fixed normal score instead (relative error about 1e-3 in the tails there).
Dirichlet and Beta samples normalize gamma samples, so their gradient is this
one pushed through the normalization: unbiased, though not PyTorch's formula.
"""

import kiln
from kiln.autograd.function import Function, once_differentiable

_ASYMPTOTIC_FROM = 60.0
_TERMS = 160
_TINY = 1e-300


def _sample(alpha):
    """Marsaglia-Tsang draws of Gamma(alpha, 1), computed in alpha's dtype."""
    boost = alpha < 1
    a = kiln.where(boost, alpha + 1, alpha)
    d = a - 1.0 / 3.0
    c = 1.0 / kiln.sqrt(9.0 * d)
    accepted = kiln.ones_like(a)
    pending = kiln.ones_like(a, dtype=kiln.bool)
    while bool(pending.any()):
        z = kiln.randn(a.shape, dtype=a.dtype, device=a.device)
        u = kiln.rand(a.shape, dtype=a.dtype, device=a.device)
        v = (1.0 + c * z) ** 3
        log_v = kiln.log(v.clamp(min=kiln.finfo(a.dtype).tiny))
        ok = (v > 0) & (kiln.log(u) < 0.5 * z * z + d - d * v + d * log_v)
        accepted = kiln.where(ok & pending, d * v, accepted)
        pending = pending & ~ok
    u = kiln.rand(a.shape, dtype=a.dtype, device=a.device)
    log_boost = kiln.where(boost, kiln.log(u) / alpha, kiln.zeros_like(alpha))
    return kiln.exp(kiln.log(accepted) + log_boost).clamp(min=kiln.finfo(a.dtype).tiny)


def _lower_series(a, x):
    """P(a, x) by its power series (accurate for x < a + 1)."""
    term = 1.0 / a
    total = term
    ap = a
    for _ in range(_TERMS):
        ap = ap + 1.0
        term = term * x / ap
        total = total + term
    return total * kiln.exp(a * kiln.log(x) - x - kiln.lgamma(a))


def _upper_fraction(a, x):
    """Q(a, x) = 1 - P(a, x) by Lentz's continued fraction (accurate for x >= a + 1)."""
    b = x + 1.0 - a
    c = kiln.full_like(x, 1.0 / _TINY)
    d = 1.0 / b
    h = d
    for i in range(1, _TERMS + 1):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = kiln.where(d.abs() < _TINY, kiln.full_like(d, _TINY), d)
        c = b + an / c
        c = kiln.where(c.abs() < _TINY, kiln.full_like(c, _TINY), c)
        d = 1.0 / d
        h = h * d * c
    return kiln.exp(a * kiln.log(x) - x - kiln.lgamma(a)) * h


def _lower_regularized(a, x):
    """P(a, x) for a in the range served by the expansions; the two branches are
    picked per element (where, not control flow, so nothing syncs)."""
    use_series = x < a + 1.0
    series = _lower_series(a, kiln.where(use_series, x, kiln.zeros_like(x) + a))
    fraction = 1.0 - _upper_fraction(a, kiln.where(use_series, a + 2.0, x))
    return kiln.where(use_series, series, fraction)


def _standard_gamma_grad(alpha, x):
    """dx/dalpha of a Gamma(alpha, 1) sample x at fixed CDF value (float64 inside)."""
    a = alpha.double()
    x = x.double()
    step = 1e-5 * a.clamp(min=1.0)
    dp_da = (_lower_regularized(a + step, x) - _lower_regularized(a - step, x)) / (2 * step)
    log_pdf = (a - 1.0) * kiln.log(x) - x - kiln.lgamma(a)
    exact = -dp_da / kiln.exp(log_pdf)
    # Wilson-Hilferty: x = a * (1 - 1/(9a) + z / sqrt(9a))^3 at the z that gives x.
    w = kiln.pow(x / a, 1.0 / 3.0)
    z = (w - 1.0 + 1.0 / (9.0 * a)) * kiln.sqrt(9.0 * a)
    dw_da = 1.0 / (9.0 * a * a) - z / (6.0 * a * kiln.sqrt(a))
    asymptotic = w ** 3 + 3.0 * a * w * w * dw_da
    grad = kiln.where(a < _ASYMPTOTIC_FROM, exact, asymptotic)
    return kiln.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0).to(alpha.dtype)


class _StandardGamma(Function):
    @staticmethod
    def forward(ctx, alpha):
        x = _sample(alpha)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * _standard_gamma_grad(alpha, x)


def standard_gamma(alpha):
    """Gamma(alpha, 1) samples of alpha's shape, differentiable in alpha."""
    if alpha.requires_grad and kiln.is_grad_enabled():
        return _StandardGamma.apply(alpha)
    return _sample(alpha)


def sample_dirichlet(concentration):
    """Dirichlet samples as normalized gamma samples (differentiable in concentration)."""
    gammas = standard_gamma(concentration)
    return gammas / gammas.sum(-1, keepdim=True)

