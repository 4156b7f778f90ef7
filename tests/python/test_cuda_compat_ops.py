"""Issue 17's op details on CUDA: the same values as the CPU (and PyTorch where installed)
for pow edge cases, integer pow, view(dtype), integer max pooling, uint8 and nearest-exact
interpolation, circular padding, scans, axis= aliases, and distributions sampled on the GPU."""

import math

import numpy as np
import pytest

import kiln
import kiln.distributions as D
import kiln.nn.functional as F
from helpers import requires_gpu

pytestmark = requires_gpu


def same_on_both(fn, *arrays, exact=True):
    cpu = fn(*[kiln.tensor(a) for a in arrays])
    gpu = fn(*[kiln.tensor(a).cuda() for a in arrays])
    assert gpu.device.type == "cuda" and gpu.dtype == cpu.dtype
    if exact:
        np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy())
    else:
        np.testing.assert_allclose(gpu.cpu().double().numpy(), cpu.double().numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
def test_pow_of_signed_zeros_on_cuda(dtype):
    base = kiln.tensor([0.0, -0.0, 0.0, -0.0, -0.0], dtype=dtype, device="cuda")
    exp = kiln.tensor([-1.0, -1.0, -2.0, -2.0, -3.0], dtype=dtype, device="cuda")
    assert kiln.pow(base, exp).float().cpu().tolist() == [math.inf, -math.inf, math.inf,
                                                          math.inf, -math.inf]
    assert (base ** -1).float().cpu().tolist() == [math.inf, -math.inf, math.inf, -math.inf,
                                                   -math.inf]
    assert (base ** -2).float().cpu().tolist() == [math.inf] * 5


def test_integer_pow_on_cuda_raises_and_truncates_like_the_cpu():
    x = kiln.tensor([2, 1, -1, 0, 3, -1], device="cuda")
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        x ** -1
    e = kiln.tensor([-1, -1, -1, -1, -2, -2], device="cuda")
    assert kiln.pow(x, e).cpu().tolist() == [0, 1, -1, 0, 0, 1]


def test_view_dtype_on_cuda():
    a = np.random.default_rng(0).uniform(-1, 1, (3, 8)).astype(np.float32)
    for dt in (kiln.int32, kiln.uint8, kiln.float16):
        same_on_both(lambda t: t.view(dt), a)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_integer_max_pool_on_cuda(dtype):
    a = np.random.default_rng(1).integers(0, 4, (2, 3, 6, 7)).astype(dtype)
    same_on_both(lambda t: F.max_pool2d(t, 3, 2, 1), a)
    same_on_both(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True)[1], a)


def test_uint8_and_nearest_exact_interpolation_on_cuda():
    a = np.random.default_rng(2).integers(0, 256, (1, 3, 5, 4)).astype(np.uint8)
    same_on_both(lambda t: F.interpolate(t, size=(7, 3), mode="nearest-exact"), a)
    # uint8 bilinear computes in float and rounds: a value within float rounding of .5 may
    # round either way on the two devices (PyTorch's own CPU and CUDA kernels differ by 1 too).
    bil = lambda t: F.interpolate(t, scale_factor=1.5, mode="bilinear")  # noqa: E731
    gpu, cpu = bil(kiln.tensor(a).cuda()).cpu().numpy(), bil(kiln.tensor(a)).numpy()
    assert gpu.dtype == cpu.dtype == np.uint8
    assert np.abs(gpu.astype(int) - cpu.astype(int)).max() <= 1
    same_on_both(lambda t: F.interpolate(t.float(), size=(3, 9), mode="nearest-exact"), a)


def test_circular_pad_with_negative_pads_on_cuda():
    a = np.random.default_rng(3).uniform(-1, 1, (2, 3, 5, 6))
    for pads in ((2, -1, 0, 3), (-2, 1, -1, -1), (3, 3, 2, -2)):
        same_on_both(lambda t: F.pad(t, pads, mode="circular"), a)


def test_cumprod_with_zeros_and_axis_aliases_on_cuda():
    a = np.random.default_rng(4).uniform(-2, 2, (4, 50))
    a[:, ::7] = 0.0
    same_on_both(lambda t: kiln.cumprod(t, 1), a, exact=False)
    same_on_both(lambda t: t.sum(axis=1, keepdims=True), a, exact=False)
    same_on_both(lambda t: kiln.amax(t, axis=0), a)


def test_distributions_sample_and_score_on_cuda():
    kiln.manual_seed(0)
    conc = kiln.tensor([0.5, 2.0, 7.0], device="cuda", requires_grad=True)
    g = D.Gamma(conc, kiln.ones(3, device="cuda"))
    x = g.rsample((2000,))
    assert x.device.type == "cuda" and bool((x > 0).all())
    (grad,) = kiln.autograd.grad(x.mean(0).sum(), conc)
    np.testing.assert_allclose(grad.cpu().numpy(), [1.0, 1.0, 1.0], atol=0.1)
    mvn = D.MultivariateNormal(kiln.zeros(2, device="cuda"), kiln.eye(2, device="cuda") * 2)
    assert mvn.log_prob(mvn.sample((5,))).device.type == "cuda"
    cat = D.Categorical(logits=kiln.zeros(4, 3, device="cuda"))
    assert cat.sample((6,)).shape == (6, 4)
    d = D.Dirichlet(kiln.ones(3, device="cuda"))
    np.testing.assert_allclose(d.sample((10,)).sum(-1).cpu().numpy(), 1.0, rtol=1e-5)


def test_distributions_match_torch_on_cuda():
    torch = pytest.importorskip("torch")
    import torch.distributions as TD
    loc, scale = [0.0, 1.0], [1.0, 0.5]
    value = [0.3, 0.8]
    pairs = [
        (D.Normal(kiln.tensor(loc, device="cuda"), kiln.tensor(scale, device="cuda")),
         TD.Normal(torch.tensor(loc, device="cuda"), torch.tensor(scale, device="cuda"))),
        (D.Gamma(kiln.tensor(scale, device="cuda"), kiln.tensor(scale, device="cuda")),
         TD.Gamma(torch.tensor(scale, device="cuda"), torch.tensor(scale, device="cuda"))),
        (D.Beta(kiln.tensor(scale, device="cuda"), kiln.tensor(scale, device="cuda")),
         TD.Beta(torch.tensor(scale, device="cuda"), torch.tensor(scale, device="cuda"))),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.log_prob(kiln.tensor(value, device="cuda")).cpu().numpy(),
                                   theirs.log_prob(torch.tensor(value, device="cuda")).cpu().numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ours.entropy().cpu().numpy(), theirs.entropy().cpu().numpy(),
                                   rtol=1e-5, atol=1e-6)
