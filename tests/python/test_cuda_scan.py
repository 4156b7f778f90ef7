"""CUDA scans (CUB's device-wide scan around the shared scan functors, Note [Scan functors])
match the CPU: every op of the scan table (its domain from scan_cases.py), one long row or many
short ones, every dtype, forward and backward."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, rand, requires_gpu
from scan_cases import SCAN

pytestmark = requires_gpu

NAN = float("nan")


def on_both(fn, a, dtype):
    return fn(kiln.tensor(a, dtype=dtype)), fn(kiln.tensor(a, dtype=dtype).to("cuda"))


def tied(*shape):
    return np.round(rand(*shape) * 1.5)


SHAPES = [(1, 1), (1, 5000), (1, 2 ** 20 + 3), (37, 1000), (5000, 3), (4, 3, 7)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int64])
def test_cumsum_matches_cpu(shape, dim, dtype):
    a = rand(*shape, dtype=np.int64) if dtype == kiln.int64 else rand(*shape)
    want, got = on_both(lambda x: x.cumsum(dim), a, dtype)
    assert got.device.type == "cuda" and got.dtype == want.dtype
    if dtype == kiln.int64:
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    else:
        # A parallel float sum rounds in a different order than the CPU's chunks.
        tol = 1e-10 if dtype == kiln.float64 else 2e-3
        assert_close(got.cpu(), want.numpy(), atol=tol * max(1, shape[-1]) ** 0.5, rtol=tol)


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16, kiln.int32, kiln.int8,
                                   kiln.uint8, kiln.bool])
def test_cumsum_cumprod_small_dtypes(dtype):
    a = rand(6, 40, dtype=np.bool_) if dtype == kiln.bool else rand(6, 40, low=0.5, high=1.5)
    for fn in (lambda x: x.cumsum(1), lambda x: x.cumprod(0),
               lambda x: x.cumsum(1, dtype=dtype)):
        want, got = on_both(fn, a, dtype)
        assert got.dtype == want.dtype
        assert_close(got.cpu().double(), want.double().numpy(), atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.int64,
                                   kiln.int8, kiln.uint8, kiln.bool])
def test_cummax_cummin_match_cpu(shape, name, dtype):
    a = tied(*shape) if dtype != kiln.bool else rand(*shape, dtype=np.bool_)
    if dtype.is_floating_point and a.size > 3:
        a.flat[a.size // 3] = NAN  # NaN propagation, and the index of the latest NaN
        a.flat[2 * a.size // 3] = NAN
    want, got = on_both(lambda x: getattr(x, name)(-1), a, dtype)
    np.testing.assert_array_equal(got.indices.cpu().numpy(), want.indices.numpy())
    np.testing.assert_array_equal(got.values.cpu().double().numpy(),
                                  want.values.double().numpy())


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
def test_logcumsumexp_matches_cpu(shape, dtype):
    a = rand(*shape) * 20
    want, got = on_both(lambda x: x.logcumsumexp(-1), a, dtype)
    assert got.dtype == dtype
    tol = {kiln.float64: 1e-10, kiln.float32: 1e-4}.get(dtype, 3e-2)
    assert_close(got.cpu().double(), want.double().numpy(), atol=tol, rtol=tol)


SIGNATURE = kiln._C._op_table()["scan"]


def values_of(result, name):
    return result.values if SIGNATURE[name] == "Indexed" else result


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(SCAN))
def test_every_scan_matches_cpu_on_its_domain(name, shape):
    _, low, high = SCAN[name]
    want, got = on_both(lambda x: getattr(x, name)(-1), rand(*shape, low=low, high=high),
                        kiln.float64)
    if SIGNATURE[name] == "Indexed":
        np.testing.assert_array_equal(got.indices.cpu().numpy(), want.indices.numpy())
    want, got = values_of(want, name), values_of(got, name)
    assert got.device.type == "cuda" and got.dtype == want.dtype
    # A parallel scan combines in a different order than the CPU's chunks.
    assert_close(got.cpu(), want.numpy(), atol=1e-10 * max(1, shape[-1]) ** 0.5, rtol=1e-9)


@pytest.mark.parametrize("name", sorted(SCAN))
def test_scan_gradients_match_cpu(name):
    _, low, high = SCAN[name]
    a, w = rand(5, 6, low=low, high=high), rand(5, 6, low=-1, high=1)  # mixed-sign upstream
    grads = []
    for device in ("cpu", "cuda"):
        x = kiln.tensor(a, device=device, requires_grad=True)
        (values_of(getattr(x, name)(1), name) * kiln.tensor(w, device=device)).sum().backward()
        grads.append(x.grad.cpu().numpy())
    assert_close(kiln.tensor(grads[1]), grads[0], atol=1e-10, rtol=1e-10)


def test_noncontiguous_empty_and_0d():
    a = rand(6, 8)
    x = kiln.tensor(a).to("cuda")
    assert_close(x.t().cumsum(1).cpu(), np.cumsum(a.T, 1), atol=1e-12, rtol=1e-12)
    assert kiln.zeros(3, 0, device="cuda").cummax(1).indices.shape == (3, 0)
    r = kiln.tensor(2.0, device="cuda").cummin(0)
    assert r.values.item() == 2.0 and r.indices.item() == 0
    assert kiln.tensor(1.5, device="cuda").logcumsumexp(0).item() == 1.5


def test_long_row_scan_needs_no_host_sync():
    x = kiln.ones(1, 2 ** 22, device="cuda")
    kiln.cuda.set_sync_debug_mode("error")
    try:
        y = x.cumsum(1)
        m = x.cummax(1)
        z = x.logcumsumexp(1)
    finally:
        kiln.cuda.set_sync_debug_mode("default")
    assert y[0, -1].item() == 2 ** 22
    assert m.indices[0, -1].item() == 2 ** 22 - 1
    assert z[0, -1].item() == pytest.approx(1 + np.log(2 ** 22), rel=1e-5)  # log(n e^1)


def test_matches_pytorch_when_installed():
    torch = pytest.importorskip("torch")
    a = np.round(rand(7, 300) * 2)
    x, t = kiln.tensor(a, device="cuda"), torch.tensor(a, device="cuda")
    for name in ("cummax", "cummin"):
        got, want = getattr(x, name)(1), getattr(t, name)(1)
        np.testing.assert_array_equal(got.indices.cpu().numpy(), want.indices.cpu().numpy())
        np.testing.assert_array_equal(got.values.cpu().numpy(), want.values.cpu().numpy())
    assert_close(x.logcumsumexp(1).cpu(), t.logcumsumexp(1).cpu().numpy(), atol=1e-10,
                 rtol=1e-10)
