"""Pooling and interpolate against NumPy loops."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import assert_close, gradcheck, noncontig, rand, to_kiln


def _t(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def out_len(size, k, s, p, d, ceil):
    span = size + 2 * p - d * (k - 1) - 1
    n = (math.ceil(span / s) if ceil else span // s) + 1
    if ceil and (n - 1) * s >= size + p:
        n -= 1
    return n


def windows_2d(shape, k, s, p, d, ceil):
    """For each output (i, j): the in-bounds input positions and the padded extent."""
    outs = [out_len(shape[a], k[a], s[a], p[a], d[a], ceil) for a in range(2)]
    for i in range(outs[0]):
        for j in range(outs[1]):
            rows = [i * s[0] - p[0] + a * d[0] for a in range(k[0])]
            cols = [j * s[1] - p[1] + b * d[1] for b in range(k[1])]
            yield i, j, rows, cols, outs


def max_pool2d_ref(x, k, s=None, p=0, d=1, ceil=False):
    k = _t(k, 2)
    s, p, d = _t(s if s is not None else k, 2), _t(p, 2), _t(d, 2)
    h, w = x.shape[-2:]
    outs = None
    vals, idxs = {}, {}
    for i, j, rows, cols, outs in windows_2d((h, w), k, s, p, d, ceil):
        best = np.full(x.shape[:2], -np.inf)
        arg = np.zeros(x.shape[:2], dtype=np.int64)
        for r in rows:
            for c in cols:
                if 0 <= r < h and 0 <= c < w:
                    v = x[:, :, r, c]
                    better = v > best
                    best = np.where(better, v, best)
                    arg = np.where(better, r * w + c, arg)
        vals[i, j], idxs[i, j] = best, arg
    out = np.zeros(x.shape[:2] + tuple(outs))
    ind = np.zeros(x.shape[:2] + tuple(outs), dtype=np.int64)
    for (i, j), v in vals.items():
        out[:, :, i, j], ind[:, :, i, j] = v, idxs[i, j]
    return out, ind


def avg_pool2d_ref(x, k, s=None, p=0, ceil=False, count_include_pad=True, divisor=None):
    k = _t(k, 2)
    s, p = _t(s if s is not None else k, 2), _t(p, 2)
    h, w = x.shape[-2:]
    res = {}
    outs = None
    for i, j, rows, cols, outs in windows_2d((h, w), k, s, p, (1, 1), ceil):
        total = np.zeros(x.shape[:2])
        count = 0
        for r in rows:
            for c in cols:
                if 0 <= r < h and 0 <= c < w:
                    total += x[:, :, r, c]
                    count += 1
        # With count_include_pad the divisor counts the explicit padding, not ceil_mode's overhang.
        he = min(rows[0] + k[0], h + p[0]) - rows[0]
        we = min(cols[0] + k[1], w + p[1]) - cols[0]
        div = divisor or (he * we if count_include_pad else count)
        res[i, j] = total / div
    out = np.zeros(x.shape[:2] + tuple(outs))
    for (i, j), v in res.items():
        out[:, :, i, j] = v
    return out


MAX_CASES = [(3, None, 0, 1, False), ((2, 3), (1, 2), (1, 1), 1, False), (3, 2, 1, 2, True),
             (2, 2, 0, 1, True), ((3, 2), 2, (1, 0), (1, 2), True)]


@pytest.mark.parametrize("k,s,p,d,ceil", MAX_CASES)
def test_max_pool2d_matches_numpy(k, s, p, d, ceil):
    x = rand(2, 3, 7, 8)
    out, idx = F.max_pool2d(to_kiln(x), k, s, p, d, ceil, return_indices=True)
    want, want_idx = max_pool2d_ref(x, k, s, p, d, ceil)
    assert_close(out, want)
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    assert idx.dtype == kiln.int64
    assert_close(F.max_pool2d(noncontig(x), k, s, p, d, ceil), want)


def test_max_pool1d_and_unbatched():
    x = rand(2, 3, 9)
    out, idx = F.max_pool1d(to_kiln(x), 3, 2, 1, 2, True, True)
    want, want_idx = max_pool2d_ref(x[:, :, None], (1, 3), (1, 2), (0, 1), (1, 2), True)
    assert_close(out, want[:, :, 0])
    np.testing.assert_array_equal(idx.numpy(), want_idx[:, :, 0])
    assert_close(F.max_pool2d(to_kiln(x[0].reshape(3, 3, 3)), 2),
                 max_pool2d_ref(x[:1].reshape(1, 3, 3, 3), 2)[0][0])


@pytest.mark.parametrize("k,s,p,ceil,cip,div", [
    (3, None, 0, False, True, None), (3, 2, 1, False, True, None), (3, 2, 1, True, False, None),
    ((2, 3), (2, 1), (1, 1), True, True, None), (2, 1, 1, False, True, 3)])
def test_avg_pool2d_matches_numpy(k, s, p, ceil, cip, div):
    x = rand(2, 3, 7, 6)
    got = F.avg_pool2d(to_kiln(x), k, s, p, ceil, cip, div)
    assert_close(got, avg_pool2d_ref(x, k, s, p, ceil, cip, div))


def test_avg_pool1d():
    x = rand(2, 3, 8)
    got = F.avg_pool1d(to_kiln(x), 3, 2, 1, True, False)
    assert_close(got, avg_pool2d_ref(x[:, :, None], (1, 3), (1, 2), (0, 1), True, False)[:, :, 0])


def adaptive_ref(x, out, op):
    h, w = x.shape[-2:]
    oh, ow = out
    res = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        r0, r1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            c0, c1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            res[:, :, i, j] = op(x[:, :, r0:r1, c0:c1], axis=(2, 3))
    return res


@pytest.mark.parametrize("out", [(1, 1), (3, 2), (5, 7), (4, 4)])
def test_adaptive_pools(out):
    x = rand(2, 3, 5, 7)
    assert_close(F.adaptive_avg_pool2d(to_kiln(x), out), adaptive_ref(x, out, np.mean))
    got, idx = F.adaptive_max_pool2d(to_kiln(x), out, return_indices=True)
    assert_close(got, adaptive_ref(x, out, np.max))
    flat = x.reshape(2, 3, -1)
    assert_close(np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1), 2).reshape(got.shape), got.numpy())
    assert_close(F.adaptive_avg_pool1d(to_kiln(x[:, :, 0]), out[1]),
                 adaptive_ref(x[:, :, :1], (1, out[1]), np.mean)[:, :, 0])


def test_adaptive_none_and_unbatched():
    x = rand(3, 5, 6)
    assert_close(F.adaptive_avg_pool2d(to_kiln(x), (2, None)),
                 adaptive_ref(x[None], (2, 6), np.mean)[0])


def test_pooling_gradcheck():
    x = rand(1, 2, 5, 4)
    gradcheck(lambda t: F.max_pool2d(t, 2, 1, 1, ceil_mode=True), x)
    gradcheck(lambda t: F.max_pool1d(t, 3, 2, 1), rand(2, 2, 5))
    gradcheck(lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False), x)
    gradcheck(lambda t: F.avg_pool1d(t, 2), rand(2, 2, 5))
    gradcheck(lambda t: F.adaptive_avg_pool2d(t, (2, 3)), x)
    gradcheck(lambda t: F.adaptive_avg_pool1d(t, 3), rand(1, 2, 5))
    gradcheck(lambda t: F.adaptive_max_pool2d(t, (3, 2)), x)


def test_max_pool_gradient_goes_to_one_element():
    x = to_kiln(np.ones((1, 1, 2, 2)), requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    assert x.grad.numpy().sum() == 1.0


def interp_1d_weights(n_in, n_out, align, scale=None):
    """Linear interpolation matrix [n_out, n_in]."""
    m = np.zeros((n_out, n_in))
    for o in range(n_out):
        if align:
            src = o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            sc = scale if scale is not None else n_in / n_out
            src = max((o + 0.5) * sc - 0.5, 0.0)
        i0 = min(int(np.floor(src)), n_in - 1)
        i1 = min(i0 + 1, n_in - 1)
        lam = src - i0
        m[o, i0] += 1 - lam
        m[o, i1] += lam
    return m


@pytest.mark.parametrize("size,align", [((7, 5), False), ((7, 5), True), ((2, 3), False), ((1, 4), True)])
def test_interpolate_bilinear(size, align):
    x = rand(2, 3, 4, 5)
    got = F.interpolate(to_kiln(x), size=size, mode="bilinear", align_corners=align)
    a, b = interp_1d_weights(4, size[0], align), interp_1d_weights(5, size[1], align)
    assert_close(got, np.einsum("oh,nchw,pw->ncop", a, x, b))


def test_interpolate_nearest_and_linear():
    x = rand(2, 3, 4, 5)
    got = F.interpolate(to_kiln(x), scale_factor=2)
    assert_close(got, x.repeat(2, axis=2).repeat(2, axis=3))
    got = F.interpolate(to_kiln(x), size=(3, 7))
    rows = np.floor(np.arange(3) * 4 / 3).astype(int)
    cols = np.floor(np.arange(7) * 5 / 7).astype(int)
    assert_close(got, x[:, :, rows][:, :, :, cols])
    y = x[:, :, 0]
    got = F.interpolate(to_kiln(y), scale_factor=1.5, mode="linear")
    assert_close(got, np.einsum("nci,oi->nco", y, interp_1d_weights(5, 7, False, 1 / 1.5)))
    gradcheck(lambda t: F.interpolate(t, size=(3, 5), mode="bilinear", align_corners=True),
              rand(1, 2, 2, 3))
    gradcheck(lambda t: F.interpolate(t, scale_factor=2, mode="nearest"), rand(1, 1, 2, 3))


def test_pooling_errors():
    x = to_kiln(rand(1, 2, 4, 4))
    with pytest.raises(RuntimeError, match=r"\[max_pool2d\] pad should be at most half of effective kernel size"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match=r"\[avg_pool2d\] pad should be at most half of kernel size"):
        F.avg_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match=r"\[max_pool2d\] Given input size: \[1, 2, 4, 4\]. Calculated output size: \[0, 0\]"):
        F.max_pool2d(x, 5, dilation=1, padding=0) if False else F.max_pool2d(x, 3, dilation=2)
    with pytest.raises(RuntimeError, match=r"\[max_pool2d\] Expected 3D or 4D"):
        F.max_pool2d(to_kiln(rand(4, 4)), 2)
    with pytest.raises(RuntimeError, match=r"\[avg_pool2d\] divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(RuntimeError, match=r"\[max_pool1d\] stride must be greater than zero"):
        F.max_pool1d(to_kiln(rand(1, 2, 4)), 2, 0)
    with pytest.raises(ValueError, match=r"\[interpolate\] only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match=r"\[interpolate\] align_corners option"):
        F.interpolate(x, size=2, align_corners=True)
    with pytest.raises(NotImplementedError, match=r"\[interpolate\] Got 4D input, but linear mode needs 3D"):
        F.interpolate(x, size=2, mode="linear")


def test_empty_batch():
    x = kiln.zeros(0, 4, 5, 5)
    assert F.max_pool2d(x, 2, return_indices=True)[1].shape == (0, 4, 2, 2)
    assert F.avg_pool2d(x, 2).shape == (0, 4, 2, 2)
    assert F.adaptive_max_pool2d(x, 3).shape == (0, 4, 3, 3)
    assert F.interpolate(x, scale_factor=2, mode="bilinear").shape == (0, 4, 10, 10)
    assert F.conv2d(x, kiln.randn(6, 4, 3, 3), padding=1).shape == (0, 6, 5, 5)
    assert F.group_norm(x, 2).shape == x.shape


def test_3d_pooling_and_trilinear():
    x = rand(2, 3, 4, 5, 6)
    got, idx = F.max_pool3d(to_kiln(x), (2, 3, 2), (2, 1, 2), (1, 1, 0), 1, True, True)
    # Pooling is separable: max over depth windows of the 2-D pooled slices.
    planes = [max_pool2d_ref(x[:, :, d], (3, 2), (1, 2), (1, 0), 1, True)[0] for d in range(4)]
    depth = [(-1, 0), (1, 2), (3,)]  # windows of 2, stride 2, pad 1, ceil_mode over 4
    want = np.stack([np.max([planes[d] for d in w if d >= 0], 0) for w in depth], 2)
    assert_close(got, want)
    flat = x.reshape(2, 3, -1)
    assert_close(np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1), 2).reshape(got.shape), want)
    avg = F.avg_pool3d(to_kiln(x), 2)
    assert_close(avg, x[:, :, :4, :4, :6].reshape(2, 3, 2, 2, 2, 2, 3, 2).mean((3, 5, 7)))
    assert_close(F.adaptive_avg_pool3d(to_kiln(x), 1), x.mean((2, 3, 4), keepdims=True))
    assert_close(F.adaptive_max_pool3d(to_kiln(x), 1), x.max((2, 3, 4), keepdims=True))
    got = F.interpolate(to_kiln(x), size=(3, 7, 2), mode="trilinear", align_corners=True)
    a, b, c = (interp_1d_weights(4, 3, True), interp_1d_weights(5, 7, True),
               interp_1d_weights(6, 2, True))
    assert_close(got, np.einsum("ad,be,cf,nkdef->nkabc", a, b, c, x))
    gradcheck(lambda t: F.max_pool3d(t, 2, 1, 1), rand(1, 1, 2, 3, 2))
    gradcheck(lambda t: F.interpolate(t, scale_factor=2, mode="trilinear"), rand(1, 1, 2, 2, 2))
    assert kiln.nn.MaxPool3d(2)(kiln.randn(1, 2, 4, 4, 4)).shape == (1, 2, 2, 2, 2)
    assert kiln.nn.AvgPool3d(2)(kiln.randn(1, 2, 4, 4, 4)).shape == (1, 2, 2, 2, 2)
    assert kiln.nn.AdaptiveAvgPool3d(1)(kiln.randn(1, 2, 4, 4, 4)).shape == (1, 2, 1, 1, 1)
    assert kiln.nn.BatchNorm3d(2)(kiln.randn(2, 2, 2, 2, 2)).shape == (2, 2, 2, 2, 2)
    assert kiln.nn.InstanceNorm3d(2)(kiln.randn(2, 2, 2, 2)).shape == (2, 2, 2, 2)
