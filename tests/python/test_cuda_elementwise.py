"""CUDA elementwise kernels match the CPU kernels (and PyTorch where installed)."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, rand, requires_gpu

pytestmark = requires_gpu

UNARY_FLOAT = ["neg", "abs", "sign", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1",
               "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh", "sigmoid", "erf",
               "relu", "silu", "floor", "ceil", "round", "trunc", "square", "asin", "acos",
               "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]
BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "maximum",
          "minimum",
          "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]


def on_both(fn, *arrays, dtype=kiln.float32):
    cpu = [kiln.tensor(a, dtype=dtype) for a in arrays]
    gpu = [t.to("cuda") for t in cpu]
    return fn(*cpu), fn(*gpu)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("name", UNARY_FLOAT)
def test_unary_matches_cpu(name, dtype):
    a = rand(5, 7, low=0.1, high=2.0)
    want, got = on_both(getattr(kiln, name), a, dtype=dtype)
    assert got.device.type == "cuda" and got.dtype == want.dtype
    tol = 1e-5 if dtype in (kiln.float32, kiln.float64) else 2e-2
    assert_close(got.cpu().double(), want.double().numpy(), atol=tol, rtol=tol)


# Integer inputs of div/atan2 are promoted to float by the front end, so
# those pairs would only repeat the float cases.
BINARY_CASES = [(name, dtype) for name in BINARY
                for dtype in (kiln.float32, kiln.float64, kiln.int64, kiln.int32)
                if dtype.is_floating_point or name not in ("div", "atan2")]


@pytest.mark.parametrize("name,dtype", BINARY_CASES)
def test_binary_broadcast_matches_cpu(name, dtype):
    a, b = rand(4, 1, 6, low=1, high=5), rand(3, 1, low=1, high=5)
    if not dtype.is_floating_point:
        a, b = np.round(a), np.round(b)
    want, got = on_both(getattr(kiln, name), a, b, dtype=dtype)
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    assert_close(got.cpu(), want.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int64, kiln.int32])
def test_fmod_takes_the_dividend_sign(dtype):
    a = np.array([[-7.0, 7.0, -7.0, 7.0, 5.0, -4.0]])
    b = np.array([[3.0, -3.0, -3.0, 3.0, -1.0, 2.0]])
    want, got = on_both(kiln.fmod, a, b, dtype=dtype)
    assert_close(got.cpu(), np.fmod(a, b))
    assert_close(want, np.fmod(a, b))


def test_noncontiguous_and_scalar_operands():
    a = rand(6, 8)
    x = kiln.tensor(a).to("cuda")
    y = x.t() * 2 + 1
    assert_close(y.cpu(), a.T * 2 + 1, atol=1e-6, rtol=1e-6)
    z = x[:, ::2].exp()
    assert_close(z.cpu(), np.exp(a[:, ::2]), atol=1e-5, rtol=1e-5)


def test_where_and_inplace():
    a, b = rand(3, 4), rand(4)
    x, y = kiln.tensor(a).to("cuda"), kiln.tensor(b).to("cuda")
    w = kiln.where(x > 0, x, y)
    assert_close(w.cpu(), np.where(a > 0, a, b), atol=1e-6, rtol=1e-6)
    x.mul_(3)
    assert_close(x.cpu(), a * 3, atol=1e-6, rtol=1e-6)


def test_device_mismatch_names_both_devices():
    with pytest.raises(RuntimeError, match=r"\[add\].*cpu.*cuda|\[add\].*cuda.*cpu"):
        kiln.ones(3) + kiln.ones(3).to("cuda")


def test_matches_pytorch_when_installed():
    torch = pytest.importorskip("torch")
    a = rand(64, 33)
    got = kiln.tensor(a, dtype=kiln.float32).to("cuda")
    ref = torch.tensor(a, dtype=torch.float32, device="cuda")
    for name in ["exp", "tanh", "sigmoid", "erf"]:
        assert_close(getattr(kiln, name)(got).cpu(), getattr(torch, name)(ref).cpu().numpy(),
                     atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(3, 1000), (8, 131), (4099,)])
def test_gelu_backward_matches_cpu(approximate, dtype, shape):
    # The activation gradient with the op a template argument (FixedBinaryFn, cuda/binary.cu):
    # 16-byte packs, the tail, and a transposed (strided) gradient.
    import kiln.nn.functional as F
    a, g = rand(*shape, low=-4, high=4), rand(*shape, low=-1, high=1)
    grads = []
    for device in ("cpu", "cuda"):
        x = kiln.tensor(a, dtype=dtype).to(device).requires_grad_(True)
        y = F.gelu(x, approximate=approximate)
        gy = kiln.tensor(g, dtype=dtype).to(device)
        if len(shape) == 2:
            gy = gy.t().contiguous().t()
        y.backward(gy)
        grads.append(x.grad.cpu().double().numpy())
    tol = 1e-5 if dtype in (kiln.float32, kiln.float64) else 2e-2
    assert_close(kiln.tensor(grads[1]), grads[0], atol=tol, rtol=tol)
