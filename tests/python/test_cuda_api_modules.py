"""The Python-composed torch API (Note [PyTorch API modules]) on CUDA: the same values as
on the CPU, the in-place protocol and in-place views on device tensors, gradients, and
seeded samplers that stay on the GPU."""

import numpy as np
import pytest

import kiln
from helpers import requires_gpu

pytestmark = requires_gpu

RNG = np.random.default_rng(17)


def same_on_both(fn, *arrays, atol=1e-10):
    cpu = fn(*[kiln.tensor(a) for a in arrays])
    gpu = fn(*[kiln.tensor(a).cuda() for a in arrays])
    cpu, gpu = (cpu if isinstance(cpu, (tuple, list)) else (cpu,),
                gpu if isinstance(gpu, (tuple, list)) else (gpu,))
    for c, g in zip(cpu, gpu):
        assert g.device.type == "cuda" and g.dtype == c.dtype
        np.testing.assert_allclose(g.cpu().double().numpy(), c.double().numpy(), atol=atol,
                                   rtol=1e-9)


@pytest.mark.parametrize("fn", [
    lambda x: kiln.cummax(x, 1), lambda x: kiln.logcumsumexp(x, 1), lambda x: kiln.mode(x, 1),
    lambda x: kiln.renorm(x, 2, 0, 1.0), lambda x: kiln.matrix_exp(x[:, :5] / 4),
    lambda x: kiln.linalg.lu_factor(x[:, :5]), lambda x: kiln.geqrf(x),
    lambda x: kiln.frexp(x), lambda x: kiln.tensordot(x, x, ([1], [1])),
    lambda x: kiln.select_scatter(x, x[0], 0, 2), lambda x: kiln.t_copy(x),
    lambda x: kiln.igamma(x.abs() + 0.5, x.abs()), lambda x: kiln.angle(x),
    lambda x: kiln.stft(x[0], 8, window=kiln.hann_window(8, dtype=x.dtype, device=x.device),
                        return_complex=False),
])
def test_composed_ops_match_the_cpu(fn):
    same_on_both(fn, RNG.standard_normal((5, 12)))


def test_integer_ops_match_the_cpu():
    a, b = RNG.integers(-50, 50, 20), RNG.integers(0, 8, 20)
    for fn in (kiln.gcd, kiln.lcm, kiln.bitwise_left_shift, kiln.bitwise_right_shift):
        same_on_both(fn, a, b, atol=0)


def test_inplace_protocol_and_views_on_cuda():
    x = kiln.tensor(RNG.standard_normal((3, 4)), device="cuda", requires_grad=True)
    y = x * 1
    y.cumsum_(1)
    y.t_()
    assert tuple(y.shape) == (4, 3) and y.device.type == "cuda"
    y.sum().backward()
    expected = np.cumsum(np.ones((3, 4))[:, ::-1], 1)[:, ::-1]
    np.testing.assert_allclose(x.grad.cpu().numpy(), expected)


def test_samplers_and_windows_stay_on_the_gpu():
    kiln.manual_seed(0)
    p = kiln.poisson(kiln.full((20000,), 30.0, device="cuda"))
    b = kiln.binomial(kiln.full((20000,), 40.0, device="cuda"), kiln.full((20000,), 0.3,
                                                                         device="cuda"))
    g = kiln.empty(20000, device="cuda").geometric_(0.5)
    assert all(t.device.type == "cuda" for t in (p, b, g))
    assert abs(float(p.mean()) - 30) < 0.3 and abs(float(b.mean()) - 12) < 0.15
    assert abs(float(g.mean()) - 2) < 0.05
    w = kiln.kaiser_window(9, device="cuda", dtype=kiln.float64)
    np.testing.assert_allclose(w.cpu().numpy(), kiln.kaiser_window(9, dtype=kiln.float64).numpy())


def test_against_torch_on_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    a = RNG.standard_normal((4, 9))
    kv, ki = kiln.cummin(kiln.tensor(a).cuda(), 1)
    tv, ti = torch.cummin(torch.tensor(a).cuda(), 1)
    np.testing.assert_allclose(kv.cpu().numpy(), tv.cpu().numpy())
    assert ki.cpu().tolist() == ti.cpu().tolist()
    np.testing.assert_allclose(kiln.igammac(kiln.tensor(a).abs().cuda() + 1, kiln.tensor(a).abs()
                                            .cuda()).cpu().numpy(),
                               torch.igammac(torch.tensor(a).abs().cuda() + 1,
                                             torch.tensor(a).abs().cuda()).cpu().numpy(),
                               rtol=1e-8)
