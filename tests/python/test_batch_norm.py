"""batch_norm, group_norm, instance_norm and the conv-family modules against NumPy."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from helpers import assert_close, gradcheck, noncontig, rand, to_kiln


def bn_ref(x, mean, var, w, b, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape) + b.reshape(shape)
    return y


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5), (1, 3, 2, 2)])
def test_batch_norm_training_updates_running_stats(shape):
    x, w, b = rand(*shape), rand(shape[1]), rand(shape[1])
    rm0, rv0 = rand(shape[1]), rand(shape[1], low=0.5, high=2.0)
    rm, rv = to_kiln(rm0.copy()), to_kiln(rv0.copy())
    got = F.batch_norm(to_kiln(x), rm, rv, to_kiln(w), to_kiln(b), True, 0.3, 1e-3)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    assert_close(got, bn_ref(x, mean, var, w, b, 1e-3))
    n = x.size // shape[1]
    assert_close(rm, 0.7 * rm0 + 0.3 * mean)
    assert_close(rv, 0.7 * rv0 + 0.3 * var * n / (n - 1))


def test_batch_norm_eval_and_no_affine():
    x = rand(2, 3, 4)
    rm, rv = rand(3), rand(3, low=0.5, high=2.0)
    got = F.batch_norm(noncontig(x), to_kiln(rm), to_kiln(rv), training=False, eps=1e-5)
    assert_close(got, bn_ref(x, rm, rv, None, None, 1e-5))
    # Training without running stats only normalizes.
    got = F.batch_norm(to_kiln(x), None, None, training=True)
    assert_close(got, bn_ref(x, x.mean(axis=(0, 2)), x.var(axis=(0, 2)), None, None, 1e-5))


def test_group_and_instance_norm():
    x, w, b = rand(2, 6, 3, 4), rand(6), rand(6)
    got = F.group_norm(to_kiln(x), 3, to_kiln(w), to_kiln(b), 1e-4)
    g = x.reshape(2, 3, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-4))
    assert_close(got, y.reshape(x.shape) * w[None, :, None, None] + b[None, :, None, None])
    rm, rv = to_kiln(np.zeros(6)), to_kiln(np.ones(6))
    got = F.instance_norm(to_kiln(x), rm, rv, to_kiln(w), to_kiln(b), momentum=0.5)
    m, v = x.mean(axis=(2, 3)), x.var(axis=(2, 3))
    assert_close(got, (x - m[..., None, None]) / np.sqrt(v[..., None, None] + 1e-5)
                 * w[None, :, None, None] + b[None, :, None, None])
    assert_close(rm, 0.5 * m.mean(0))
    assert_close(rv, 0.5 + 0.5 * (v * 12 / 11).mean(0))


def test_norm_gradcheck():
    x, w, b = rand(3, 2, 3), rand(2), rand(2)
    gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, True), x, w, b)
    gradcheck(lambda x, w, b: F.batch_norm(x, kiln.zeros(2, dtype=kiln.float64),
                                           kiln.ones(2, dtype=kiln.float64), w, b, False), x, w, b)
    gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), rand(2, 4, 3), rand(4), rand(4))
    gradcheck(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), x, w, b)


def test_norm_errors():
    with pytest.raises(ValueError, match=r"\[batch_norm\] Expected more than 1 value per channel"):
        F.batch_norm(to_kiln(rand(1, 3)), None, None, training=True)
    with pytest.raises(RuntimeError, match=r"\[batch_norm\] running_mean should contain 3 elements not 4"):
        F.batch_norm(to_kiln(rand(2, 3)), to_kiln(rand(4)), to_kiln(rand(3)))
    with pytest.raises(RuntimeError, match=r"\[group_norm\] Expected number of channels in input to be divisible by num_groups, but got input of shape \[2, 5, 3\]"):
        F.group_norm(to_kiln(rand(2, 5, 3)), 2)
    with pytest.raises(ValueError, match=r"\[BatchNorm2d\] expected 4D input \(got 3D"):
        nn.BatchNorm2d(3)(kiln.randn(2, 3, 4))
    with pytest.raises(ValueError, match=r"\[GroupNorm\] num_channels must be divisible"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match=r"\[Conv2d\] in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match=r"\[Conv2d\] padding='same' is not supported"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match=r"\[ConvTranspose2d\] requested an output size"):
        nn.ConvTranspose2d(2, 2, 3, stride=2)(kiln.randn(1, 2, 3, 3), output_size=(9, 9))


def test_batchnorm_module_state_and_momentum_none():
    m = nn.BatchNorm1d(3, momentum=None)
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                    "num_batches_tracked"]
    assert m.num_batches_tracked.dtype == kiln.int64
    xs = [rand(4, 3) for _ in range(3)]
    for x in xs:
        m(to_kiln(x, dtype=kiln.float32))
    # momentum=None: the running mean is the plain average of the batch means.
    assert_close(m.running_mean, np.mean([x.mean(0) for x in xs], 0), atol=1e-5, rtol=1e-5)
    assert int(m.num_batches_tracked) == 3
    m.eval()
    x = rand(2, 3, 5).astype(np.float32)
    got = m(to_kiln(x))
    want = bn_ref(x, m.running_mean.numpy(), m.running_var.numpy(), None, None, 1e-5)
    assert_close(got, want, atol=1e-5, rtol=1e-5)
    m2 = nn.BatchNorm2d(4, affine=False, track_running_stats=False)
    assert list(m2.state_dict()) == []
    m2.eval()
    x = rand(2, 4, 3, 3).astype(np.float32)
    assert_close(m2(to_kiln(x)), bn_ref(x, x.mean((0, 2, 3)), x.var((0, 2, 3)), None, None, 1e-5),
                 atol=1e-5, rtol=1e-5)


def test_conv_module_init_and_keys():
    kiln.manual_seed(0)
    m = nn.Conv2d(16, 32, 3, groups=2)
    assert m.weight.shape == (32, 8, 3, 3) and m.bias.shape == (32,)
    assert list(m.state_dict()) == ["weight", "bias"]
    bound = 1 / math.sqrt(8 * 9)
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound
    assert np.abs(m.bias.detach().numpy()).max() <= bound
    t = nn.ConvTranspose2d(4, 6, (2, 3), groups=2, bias=False)
    assert t.weight.shape == (4, 3, 2, 3) and t.bias is None
    assert list(t.state_dict()) == ["weight"]
    g = nn.GroupNorm(2, 4)
    assert (g.weight.detach().numpy() == 1).all() and (g.bias.detach().numpy() == 0).all()
    inorm = nn.InstanceNorm2d(3)
    assert list(inorm.state_dict()) == []
    assert list(nn.InstanceNorm2d(3, affine=True, track_running_stats=True).state_dict()) == [
        "weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


def test_modules_forward_match_functional():
    x = kiln.randn(2, 4, 6, 6)
    conv = nn.Conv2d(4, 6, 3, padding=1, padding_mode="circular")
    want = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), conv.weight, conv.bias)
    assert_close(conv(x), want.detach().numpy(), dtype=kiln.float32)
    c1 = nn.Conv1d(4, 2, 3, padding="same")
    assert c1(kiln.randn(1, 4, 7)).shape == (1, 2, 7)
    assert nn.ConvTranspose1d(4, 2, 3, stride=2)(kiln.randn(1, 4, 5)).shape == (1, 2, 11)
    assert nn.MaxPool2d(2)(x).shape == (2, 4, 3, 3)
    out, idx = nn.MaxPool1d(2, return_indices=True)(kiln.randn(1, 2, 6))
    assert out.shape == idx.shape == (1, 2, 3)
    assert nn.AvgPool2d(3, 2, 1)(x).shape == (2, 4, 3, 3)
    assert nn.AvgPool1d(2)(kiln.randn(1, 2, 6)).shape == (1, 2, 3)
    assert nn.AdaptiveAvgPool2d((1, 1))(x).shape == (2, 4, 1, 1)
    assert nn.AdaptiveAvgPool1d(2)(kiln.randn(1, 2, 6)).shape == (1, 2, 2)
    assert nn.AdaptiveMaxPool2d(2)(x).shape == (2, 4, 2, 2)
    assert nn.PixelShuffle(2)(x).shape == (2, 1, 12, 12)
    assert nn.Upsample(scale_factor=2, mode="bilinear")(x).shape == (2, 4, 12, 12)
    assert nn.ReflectionPad2d(1)(x).shape == (2, 4, 8, 8)
    assert nn.InstanceNorm2d(4)(x).shape == x.shape
    assert nn.InstanceNorm2d(4)(x[0]).shape == x[0].shape


def test_dropout2d_zeroes_whole_channels():
    kiln.manual_seed(1)
    m = nn.Dropout2d(0.5)
    x = kiln.ones(8, 16, 3, 3)
    y = m(x).numpy()
    per_channel = y.reshape(8, 16, -1)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()
    assert 0.2 < (per_channel[..., 0] == 0).mean() < 0.8
    m.eval()
    assert (m(x).numpy() == 1).all()
    with pytest.raises(ValueError, match=r"\[Dropout2d\] dropout probability"):
        nn.Dropout2d(1.5)


def test_half_input_with_float32_stats_keeps_dtype():
    x = rand(4, 3, 2)
    rm, rv = kiln.zeros(3), kiln.ones(3)
    w, b = kiln.ones(3), kiln.zeros(3)
    for training in (True, False):
        y = F.batch_norm(to_kiln(x, dtype=kiln.float16), rm, rv, w, b, training)
        assert y.dtype == kiln.float16
    assert F.group_norm(to_kiln(x, dtype=kiln.float16), 3, w, b).dtype == kiln.float16
    y = F.batch_norm(to_kiln(x, dtype=kiln.float16), kiln.zeros(3), kiln.ones(3), w, b, False)
    assert_close(y.float(), x / np.sqrt(1 + 1e-5), atol=2e-3, rtol=2e-3)
