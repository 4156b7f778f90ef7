"""CUDA random kernels give the CPU's values for the same seed (one Philox
stream per generator, Note [Random streams])."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import assert_close, requires_gpu

pytestmark = requires_gpu


def sample(device, fn):
    kiln.manual_seed(1234)
    return fn(device).cpu()


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
def test_uniform_matches_cpu_exactly(dtype):
    fn = lambda d: kiln.rand(1000, dtype=dtype, device=d)  # noqa: E731
    cpu, gpu = sample("cpu", fn), sample("cuda", fn)
    assert (gpu.float().numpy() == cpu.float().numpy()).all()
    assert float(gpu.float().min()) >= 0 and float(gpu.float().max()) < 1


def test_normal_randint_bernoulli_dropout_match_cpu():
    cases = [
        (lambda d: kiln.randn(4097, device=d), 1e-5),
        (lambda d: kiln.randint(-5, 17, (999,), device=d), 0),
        (lambda d: kiln.bernoulli(kiln.full((500,), 0.3, device=d)), 0),
        (lambda d: F.dropout(kiln.ones(777, device=d), p=0.25), 0),
    ]
    for fn, tol in cases:
        cpu, gpu = sample("cpu", fn), sample("cuda", fn)
        assert gpu.dtype == cpu.dtype
        assert_close(gpu.double(), cpu.double().numpy(), atol=tol, rtol=tol)


def test_randn_statistics_on_gpu():
    kiln.manual_seed(0)
    x = kiln.randn(1 << 20, device="cuda")
    assert abs(float(x.mean())) < 0.01 and abs(float(x.std()) - 1) < 0.01
