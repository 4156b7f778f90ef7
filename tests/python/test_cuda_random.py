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


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("n, offset", [(1, 0), (777, 0), (4096, 0), (1001, 1), (4096, 3)])
def test_dropout_mask_and_grad_match_cpu(dtype, n, offset):
    # Note [Dropout on the GPU]: paired stores (even n, aligned input) and the element-wise path
    # (odd n, an input starting at an odd element) draw the CPU's mask; the backward reads it.
    def run(device):
        kiln.manual_seed(77)
        base = kiln.arange(1, n + offset + 1, dtype=kiln.float64).to(device)
        x = (base.to(dtype) / 64)[offset:].detach().requires_grad_(True)
        y = F.dropout(x, p=0.3)
        g = kiln.linspace(-2, 2, n, dtype=kiln.float64).to(device).to(dtype)
        y.backward(g)
        return y.detach().cpu().double().numpy(), x.grad.cpu().double().numpy()
    (y_cpu, g_cpu), (y_gpu, g_gpu) = run("cpu"), run("cuda")
    np.testing.assert_array_equal(y_gpu, y_cpu)
    np.testing.assert_array_equal(g_gpu, g_cpu)
    kept = y_cpu != 0
    if n > 100:
        assert 0.6 < kept.mean() < 0.8


def test_dropout_p1_on_gpu_drops_everything():
    x = kiln.ones(1000, device="cuda", requires_grad=True)
    y = F.dropout(x, p=1.0)
    y.sum().backward()
    assert float(y.abs().sum()) == 0 and float(x.grad.abs().sum()) == 0
