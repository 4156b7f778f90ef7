"""float16/bfloat16 arithmetic keeps float32 precision where PyTorch does:
Python numbers meet half tensors at float precision (opmath), and means and
variances of half tensors accumulate in float32, so neither overflows where
the result itself fits (Note [Reduced-precision scalar operands])."""

import numpy as np
import pytest

import kiln
from helpers import requires_gpu

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]
HALF = [kiln.float16, kiln.bfloat16]


def values(t):
    return t.detach().float().cpu().numpy()


@pytest.mark.parametrize("device", DEVICES)
def test_scalar_beyond_float16_range_divides_at_float_precision(device):
    x = kiln.full((5,), 70.0, dtype=kiln.float16, device=device)
    # 70000 is inf in float16: rounding it first would give 0 and inf here.
    np.testing.assert_allclose(values(x / 70000.0), 1e-3, rtol=1e-3)
    np.testing.assert_allclose(values(70000.0 / x), 1000.0, rtol=1e-3)
    np.testing.assert_allclose(values(x * 1e-5 * 1e5), 70.0, rtol=1e-3)
    assert np.isinf(values(x * 100000.0)).all()  # the result itself overflows


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
def test_scalar_keeps_its_precision(device, dtype):
    x = kiln.tensor([1.0, 2.0, 3.0], dtype=dtype, device=device)
    s = 1.0 + 2.0 ** -12  # rounds to 1.0 in both half types
    expected = np.array([1.0, 2.0, 3.0]) * s
    got = values(x * s)
    ref_rounded = values(kiln.tensor(expected, dtype=kiln.float64).to(dtype))
    np.testing.assert_array_equal(got, ref_rounded)
    # The in-place form and a left-hand scalar take the same path.
    y = x.clone()
    y.mul_(s)
    np.testing.assert_array_equal(values(y), ref_rounded)
    np.testing.assert_array_equal(values(s * x), ref_rounded)


@pytest.mark.parametrize("device", DEVICES)
def test_half_operands_and_comparisons_keep_their_rules(device):
    x = kiln.tensor([1.0, 2.0], dtype=kiln.float16, device=device)
    assert (x + 1).dtype == kiln.float16
    assert (x + kiln.tensor(1.5)).dtype == kiln.float16  # a 0-d float32 tensor does not promote
    assert (x < 70000.0).all().item()
    zero_d = kiln.tensor(3.0, dtype=kiln.float16)
    assert (zero_d + 2.5).item() == 5.5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
def test_mean_and_var_of_long_half_tensors(device, dtype):
    rng = np.random.default_rng(0)
    data = (2.0 + rng.standard_normal(70000)).astype(np.float32)
    x = kiln.tensor(data, device=device).to(dtype)
    ref = values(x).astype(np.float64)
    # The sum of 70000 values near 2 (and of their squares) is beyond float16's 65504.
    np.testing.assert_allclose(x.mean().float().item(), ref.mean(), rtol=1e-2)
    np.testing.assert_allclose(x.var().float().item(), ref.var(ddof=1), rtol=2e-2)
    var, mean = kiln.var_mean(x, correction=0)
    assert var.dtype == dtype and mean.dtype == dtype
    np.testing.assert_allclose(var.float().item(), ref.var(), rtol=2e-2)
    assert np.isinf(x.sum().float().item()) == (dtype == kiln.float16)


@pytest.mark.parametrize("device", DEVICES)
def test_batch_norm_of_a_large_float16_batch_is_finite(device):
    # 64 x 32 x 32 values per channel: the statistics' sums overflow float16.
    x = kiln.randn(64, 4, 32, 32, device=device).half().requires_grad_()
    bn = kiln.nn.BatchNorm2d(4).to(device)
    y = bn(x)
    assert y.dtype == kiln.float16
    assert kiln.isfinite(y).all().item()
    (y.float() * kiln.randn(y.shape, device=device)).sum().backward()
    assert kiln.isfinite(x.grad).all().item()
    assert kiln.isfinite(bn.weight.grad).all().item()
    np.testing.assert_allclose(values(y).std(axis=(0, 2, 3)), 1.0, rtol=1e-2)
