"""Memory formats: kiln.channels_last and friends, Tensor.contiguous / is_contiguous /
to / clone with memory_format, Module.to(memory_format=), and elementwise ops that keep
a channels-last input's layout (Note [Layout-preserving elementwise])."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, rand, requires_gpu

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


def nhwc_strides(shape):
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def channels_last(a, device="cpu", dtype=kiln.float64):
    return kiln.tensor(a, dtype=dtype, device=device).contiguous(memory_format=kiln.channels_last)


def test_formats_are_exported_like_pytorch():
    for name in ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format"):
        f = getattr(kiln, name)
        assert isinstance(f, kiln.memory_format)
        assert repr(f) == f"kiln.{name}"
    assert kiln.channels_last != kiln.contiguous_format


@pytest.mark.parametrize("device", DEVICES)
def test_contiguous_in_channels_last(device):
    a = rand(2, 3, 4, 5)
    x = kiln.tensor(a, device=device)
    assert x.is_contiguous() and not x.is_contiguous(memory_format=kiln.channels_last)
    y = x.contiguous(memory_format=kiln.channels_last)
    assert y.stride() == nhwc_strides(a.shape)
    assert y.is_contiguous(memory_format=kiln.channels_last) and not y.is_contiguous()
    assert_close(y.cpu(), a, atol=0, rtol=0)
    assert y.contiguous(memory_format=kiln.channels_last) is y
    z = y.contiguous()
    assert z.is_contiguous() and z.stride() == (60, 20, 5, 1)
    assert_close(z.cpu(), a, atol=0, rtol=0)
    v = kiln.tensor(rand(2, 3, 2, 4, 5), device=device).contiguous(
        memory_format=kiln.channels_last_3d)
    assert v.is_contiguous(memory_format=kiln.channels_last_3d)
    assert v.stride() == (120, 1, 60, 15, 3)


def test_size_one_dims_do_not_decide():
    x = kiln.zeros(2, 1, 4, 5)  # one channel: both layouts at once, as in PyTorch
    assert x.is_contiguous() and x.is_contiguous(memory_format=kiln.channels_last)


def test_wrong_rank_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"\[contiguous\] required rank 4 .*channels_last"):
        kiln.zeros(2, 3, 4).contiguous(memory_format=kiln.channels_last)
    with pytest.raises(RuntimeError, match=r"\[to\] required rank 5"):
        kiln.zeros(2, 3, 4, 5).to(memory_format=kiln.channels_last_3d)
    assert not kiln.zeros(2, 3, 4).is_contiguous(memory_format=kiln.channels_last)
    with pytest.raises(TypeError):
        kiln.zeros(2, 3, 4, 5).contiguous(memory_format="channels_last")


@pytest.mark.parametrize("device", DEVICES)
def test_to_and_clone(device):
    a = rand(2, 3, 4, 5)
    x = kiln.tensor(a, device=device)
    y = x.to(memory_format=kiln.channels_last)
    assert y.is_contiguous(memory_format=kiln.channels_last)
    h = y.to(kiln.float32)  # a converted copy keeps the layout
    assert h.dtype == kiln.float32 and h.is_contiguous(memory_format=kiln.channels_last)
    assert_close(h.cpu(), a, dtype=kiln.float32)
    c = y.clone()  # preserve_format by default
    assert c.is_contiguous(memory_format=kiln.channels_last)
    c.add_(1)
    assert_close(y.cpu(), a, atol=0, rtol=0)  # a copy, not an alias
    assert y.clone(memory_format=kiln.contiguous_format).is_contiguous()
    assert kiln.clone(x, memory_format=kiln.channels_last).stride() == nhwc_strides(a.shape)


@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_ops_keep_channels_last(device):
    a, b = rand(2, 3, 4, 5), rand(2, 3, 4, 5)
    x, y = channels_last(a, device), channels_last(b, device)
    bias = kiln.tensor(rand(3, 1, 1), device=device)
    cases = {
        "relu": (kiln.relu(x), np.maximum(a, 0)),
        "exp": (x.exp(), np.exp(a)),
        "x * 2": (x * 2, a * 2),
        "x + y": (x + y, a + b),
        "x + bias": (x + bias, a + bias.cpu().numpy()),
        "bias * x": (bias * x, bias.cpu().numpy() * a),
        "x > 0": (x > 0, a > 0),
    }
    for name, (got, want) in cases.items():
        assert got.is_contiguous(memory_format=kiln.channels_last), (name, got.stride())
        assert_close(got.cpu(), want)
    # The first full-shape operand decides: a contiguous one keeps the result contiguous.
    z = kiln.tensor(a, device=device) + y
    assert z.is_contiguous()
    assert_close(z.cpu(), a + b)


def test_channels_last_gradients():
    a, b = rand(2, 3, 2, 3), rand(3, 1, 1)

    def f(x, bias):
        x = x.contiguous(memory_format=kiln.channels_last)
        return (kiln.tanh(x) * x + bias).exp()

    gradcheck(f, a, b)


def test_module_to_channels_last():
    m = kiln.nn.Sequential(kiln.nn.Conv2d(3, 4, 3), kiln.nn.BatchNorm2d(4), kiln.nn.Linear(4, 2))
    weight = m[0].weight
    m.to(memory_format=kiln.channels_last)
    assert m[0].weight is weight  # the Parameter object survives
    assert m[0].weight.is_contiguous(memory_format=kiln.channels_last)
    assert m[2].weight.is_contiguous()  # 2-d parameters are left alone
    x = kiln.randn(2, 3, 8, 8).to(memory_format=kiln.channels_last)
    y = m[1](m[0](x))
    assert y.is_contiguous(memory_format=kiln.channels_last)


@pytest.mark.parametrize("device", DEVICES)
def test_factories_take_a_memory_format(device):
    e = kiln.empty(2, 3, 4, 5, device=device, memory_format=kiln.channels_last)
    assert e.stride() == nhwc_strides((2, 3, 4, 5))
    z = kiln.zeros((2, 3, 4, 5), device=device, memory_format=kiln.channels_last)
    assert z.is_contiguous(memory_format=kiln.channels_last) and (z == 0).all().item()
    with pytest.raises(RuntimeError, match=r"\[ones\] required rank 4"):
        kiln.ones(2, 3, memory_format=kiln.channels_last)
    x = channels_last(rand(2, 3, 4, 5), device)
    for like in (kiln.empty_like(x), kiln.zeros_like(x), kiln.ones_like(x),
                 kiln.full_like(x, 7.0)):
        assert like.is_contiguous(memory_format=kiln.channels_last)  # preserve_format
    assert kiln.zeros_like(x, memory_format=kiln.contiguous_format).is_contiguous()
    assert (kiln.full_like(x, 7.0) == 7.0).all().item()
    assert kiln.ones_like(kiln.zeros(2, 3, device=device)).is_contiguous()
