"""torch.poisson and torch.binomial: exact samplers from kiln's Philox uniforms.

Note [Discrete samplers]: both are elementwise rejection loops over the elements
still pending, like the gamma sampler (Note [Gamma samples and their gradient]):
each round draws uniforms for every element, accepts where the test passes, and
the loop reads one boolean per round. Small means use inversion by waiting
times (Knuth's product of uniforms for Poisson, sums of geometric gaps for the
binomial: about mean + 1 rounds); means of 10 and more use Hormann's transformed
rejection (PTRS for Poisson, BTRS for the binomial), accepted in about 1.1 rounds
on average. Samples are float64 internally and returned in the input's dtype, with
no gradient (PyTorch's poisson and binomial are not differentiable either).
"""


from kiln import _C

__all__ = ["poisson", "binomial"]

_TRANSFORMED_FROM = 10.0


def _uniform(shape, device, generator):
    return _C.rand(shape, dtype=_C.float64, device=device, generator=generator)


def _rejection_loop(shape, device, generator, propose):
    """Runs propose(u, v) -> (value, accepted) until every element is accepted."""
    result = _C.zeros(shape, dtype=_C.float64, device=device)
    pending = _C.ones(shape, dtype=_C.bool, device=device)
    while bool(pending.any()):
        value, accepted = propose(_uniform(shape, device, generator) - 0.5,
                                  _uniform(shape, device, generator))
        take = pending & accepted
        result = _C.where(take, value, result)
        pending = pending & ~take
    return result


def _poisson_small(lam, generator):
    """Knuth: the number of uniforms whose running product stays above e**-lam."""
    limit = _C.exp(-lam)
    product = _C.ones_like(lam)
    count = _C.zeros_like(lam)
    pending = lam > 0
    while bool(pending.any()):
        product = product * _uniform(lam.shape, lam.device, generator)
        still = pending & (product > limit)
        count = count + still.to(count.dtype)
        pending = still
    return count


def _poisson_ptrs(lam, generator):
    slam, loglam = _C.sqrt(lam), _C.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2)

    def propose(u, v):
        us = 0.5 - u.abs()
        k = _C.floor((2 * a / us + b) * u + lam + 0.43)
        quick = (us >= 0.07) & (v <= vr)
        log_ratio = (_C.log(v) + _C.log(inv_alpha) - _C.log(a / (us * us) + b))
        exact = log_ratio <= -lam + k * loglam - _C.lgamma(k + 1)
        valid = (k >= 0) & ~((us < 0.013) & (v > us))
        return k, quick | (valid & exact)

    return _rejection_loop(lam.shape, lam.device, generator, propose)


def poisson(input, generator=None):
    """Poisson(rate) samples, one per element of input (rates >= 0)."""
    if not input.is_floating_point():
        raise RuntimeError(f"[poisson] expected a floating point rate tensor, got {input.dtype}")
    lam = input.detach().double()
    if bool((lam < 0).any()) or bool((lam != lam).any()):
        raise RuntimeError("[poisson] invalid Poisson rate, expected rate to be non-negative")
    large = lam >= _TRANSFORMED_FROM
    small = _poisson_small(_C.where(large, _C.zeros_like(lam), lam), generator)
    if bool(large.any()):
        big = _poisson_ptrs(_C.where(large, lam, _C.full_like(lam, _TRANSFORMED_FROM)),
                            generator)
        small = _C.where(large, big, small)
    return small.to(input.dtype)


def _binomial_inversion(n, p, generator):
    """Counts successes by summing geometric gaps between them until they pass n."""
    log_q = _C.log1p(-p)
    count = _C.zeros_like(n)
    position = _C.zeros_like(n)
    pending = (n > 0) & (p > 0)
    while bool(pending.any()):
        u = 1 - _uniform(n.shape, n.device, generator)  # (0, 1]
        gap = _C.ceil(_C.log(u) / _C.where(pending, log_q, -_C.ones_like(log_q)))
        position = position + _C.where(pending, gap, _C.zeros_like(gap))
        still = pending & (position <= n)
        count = count + still.to(count.dtype)
        pending = still
    return count


def _binomial_btrs(n, p, generator):
    q = 1 - p
    spq = _C.sqrt(n * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = _C.log(p / q)
    m = _C.floor((n + 1) * p)
    h = _C.lgamma(m + 1) + _C.lgamma(n - m + 1)

    def propose(u, v):
        us = 0.5 - u.abs()
        k = _C.floor((2 * a / us + b) * u + c)
        valid = (k >= 0) & (k <= n)
        quick = (us >= 0.07) & (v <= vr)
        k_safe = _C.clamp(_C.minimum(k, n), min=0)
        log_v = _C.log(v * alpha / (a / (us * us) + b))
        exact = log_v <= h - _C.lgamma(k_safe + 1) - _C.lgamma(n - k_safe + 1) + (k - m) * lpq
        return k, valid & (quick | exact)

    return _rejection_loop(n.shape, n.device, generator, propose)


def binomial(count, prob, generator=None):
    """Binomial(count, prob) samples, elementwise (count and prob broadcast)."""
    if not count.is_floating_point() or not prob.is_floating_point():
        raise RuntimeError("[binomial] expected floating point count and prob tensors")
    from kiln.functional import broadcast_tensors

    n, p = (t.detach().double() for t in broadcast_tensors(count, prob))
    if bool(((p < 0) | (p > 1) | (p != p)).any()):
        raise RuntimeError("[binomial] Expected prob to be in [0, 1]")
    if bool(((n < 0) | (n != n) | (n != _C.floor(n))).any()):
        raise RuntimeError("[binomial] Expected count to be a non-negative integer")
    flip = p > 0.5  # sample the rarer outcome: Binomial(n, p) = n - Binomial(n, 1 - p)
    p_low = _C.where(flip, 1 - p, p)
    large = n * p_low >= _TRANSFORMED_FROM
    samples = _binomial_inversion(n, _C.where(large, _C.zeros_like(p_low), p_low), generator)
    if bool(large.any()):
        safe_n = _C.where(large, n, _C.full_like(n, 100.0))
        safe_p = _C.where(large, p_low, _C.full_like(p_low, 0.5))
        samples = _C.where(large, _binomial_btrs(safe_n, safe_p, generator), samples)
    samples = _C.where(flip, n - samples, samples)
    return samples.to(_C.result_type(count, prob))
