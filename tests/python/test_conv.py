"""conv1d/2d, conv_transpose1d/2d, unfold/fold, pad and pixel_shuffle against NumPy loops."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import assert_close, gradcheck, noncontig, rand, to_kiln


def _pair(v, n=2):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def conv2d_ref(x, w, b=None, stride=1, pad_lo=0, pad_hi=None, dilation=1, groups=1):
    s, d, lo = _pair(stride), _pair(dilation), _pair(pad_lo)
    hi = lo if pad_hi is None else _pair(pad_hi)
    xp = np.pad(x, ((0, 0), (0, 0), (lo[0], hi[0]), (lo[1], hi[1])))
    o, cg, kh, kw = w.shape
    oh = (xp.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (xp.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((x.shape[0], o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs, ws = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                           j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out if b is None else out + b[None, :, None, None]


def conv_transpose2d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                         dilation=1):
    s, p, op, d = _pair(stride), _pair(padding), _pair(output_padding), _pair(dilation)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    full = np.zeros((n, og * groups, (h - 1) * s[0] + d[0] * (kh - 1) + 1 + op[0],
                     (wd - 1) * s[1] + d[1] * (kw - 1) + 1 + op[1]))
    cg = c // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                full[:, g * og:(g + 1) * og, i * d[0]:i * d[0] + s[0] * (h - 1) + 1:s[0],
                     j * d[1]:j * d[1] + s[1] * (wd - 1) + 1:s[1]] += np.einsum(
                         "nchw,co->nohw", x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg, :, i, j])
    oh = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1
    ow = (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1
    out = full[:, :, p[0]:p[0] + oh, p[1]:p[1] + ow]
    return out if b is None else out + b[None, :, None, None]


CONV2D_CASES = [
    # (N, C, H, W), (O, kh, kw), stride, padding, dilation, groups
    ((2, 4, 7, 6), (6, 3, 3), 1, 0, 1, 1),
    ((1, 3, 8, 9), (4, 3, 2), (2, 1), (1, 2), 1, 1),
    ((2, 4, 9, 7), (6, 3, 3), 2, 1, (2, 1), 2),
    ((2, 6, 5, 5), (6, 3, 3), 1, 1, 1, 6),  # depthwise
    ((3, 2, 5, 4), (5, 1, 1), 1, 0, 1, 1),
    ((1, 2, 6, 7), (3, 2, 3), (3, 2), 2, 2, 1),
]


@pytest.mark.parametrize("shape,wshape,stride,padding,dilation,groups", CONV2D_CASES)
def test_conv2d_matches_numpy(shape, wshape, stride, padding, dilation, groups):
    x = rand(*shape)
    w = rand(wshape[0], shape[1] // groups, wshape[1], wshape[2])
    b = rand(wshape[0])
    got = F.conv2d(to_kiln(x), to_kiln(w), to_kiln(b), stride, padding, dilation, groups)
    assert_close(got, conv2d_ref(x, w, b, stride, padding, None, dilation, groups))
    got = F.conv2d(noncontig(x), noncontig(w), None, stride=stride, padding=padding,
                   dilation=dilation, groups=groups)
    assert_close(got, conv2d_ref(x, w, None, stride, padding, None, dilation, groups))


def test_conv2d_unbatched_same_valid_and_float32():
    x, w = rand(3, 6, 5), rand(2, 3, 2, 4)
    assert_close(F.conv2d(to_kiln(x), to_kiln(w)), conv2d_ref(x[None], w)[0])
    # 'same' with an even kernel pads the extra element at the end, as PyTorch does.
    got = F.conv2d(to_kiln(x), to_kiln(w), padding="same", dilation=(1, 2))
    assert_close(got, conv2d_ref(x[None], w, None, 1, (0, 3), (1, 3), (1, 2))[0])
    assert got.shape == (2, 6, 5)
    assert F.conv2d(to_kiln(x), to_kiln(w), padding="valid").shape == (2, 5, 2)
    x32 = rand(2, 3, 6, 6, dtype=np.float32)
    w32 = rand(4, 3, 3, 3, dtype=np.float32)
    got = F.conv2d(to_kiln(x32), to_kiln(w32), padding=1)
    assert got.dtype == kiln.float32
    assert_close(got, conv2d_ref(x32.astype(np.float64), w32.astype(np.float64), None, 1, 1),
                 atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 2, 2), (3, 2, 1, 1)])
def test_conv1d_matches_numpy(stride, padding, dilation, groups):
    x, w, b = rand(2, 4, 11), rand(6, 4 // groups, 3), rand(6)
    got = F.conv1d(to_kiln(x), to_kiln(w), to_kiln(b), stride, padding, dilation, groups)
    want = conv2d_ref(x[:, :, None], w[:, :, None], b, (1, stride), (0, padding), None,
                      (1, dilation), groups)[:, :, 0]
    assert_close(got, want)
    assert_close(F.conv1d(to_kiln(x[0]), to_kiln(w), None, stride, padding, dilation, groups),
                 want[0] - b[:, None])


CONVT_CASES = [
    # (N, C, H, W), (O/g, kh, kw), stride, padding, output_padding, groups, dilation
    ((2, 4, 3, 4), (3, 3, 3), 1, 0, 0, 1, 1),
    ((1, 4, 4, 3), (2, 3, 2), 2, 1, 1, 2, 1),
    ((2, 2, 3, 3), (3, 2, 3), (2, 3), (0, 1), (1, 2), 1, (2, 1)),
    ((1, 3, 2, 5), (1, 1, 3), 1, 0, 0, 3, 2),
]


@pytest.mark.parametrize("shape,wshape,stride,padding,output_padding,groups,dilation", CONVT_CASES)
def test_conv_transpose2d_matches_numpy(shape, wshape, stride, padding, output_padding, groups,
                                        dilation):
    x, w, b = rand(*shape), rand(shape[1], *wshape), rand(wshape[0] * groups)
    got = F.conv_transpose2d(to_kiln(x), to_kiln(w), to_kiln(b), stride, padding, output_padding,
                             groups, dilation)
    assert_close(got, conv_transpose2d_ref(x, w, b, stride, padding, output_padding, groups,
                                           dilation))


def test_conv_transpose1d_matches_numpy():
    x, w = rand(2, 4, 5), rand(4, 3, 3)
    got = F.conv_transpose1d(to_kiln(x), to_kiln(w), stride=2, padding=1, output_padding=1,
                             groups=2, dilation=1)
    want = conv_transpose2d_ref(x[:, :, None], w[:, :, None], None, (1, 2), (0, 1), (0, 1), 2)
    assert_close(got, want[:, :, 0])
    assert_close(F.conv_transpose1d(to_kiln(x[1]), to_kiln(w), stride=2, padding=1,
                                    output_padding=1, groups=2), want[1, :, 0])


def test_conv_gradcheck():
    x, w, b = rand(2, 4, 5, 4), rand(4, 2, 2, 3), rand(4)
    gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2),
                                       groups=2), x, w, b)
    gradcheck(lambda x, w: F.conv2d(x, w, padding="same"), rand(1, 2, 4, 3), rand(2, 2, 2, 2))
    gradcheck(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), rand(2, 2, 6),
              rand(3, 2, 3), rand(3))
    gradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1,
                                                 groups=2), rand(1, 4, 3, 2), rand(4, 1, 3, 2),
              rand(2))
    gradcheck(lambda x, w: F.conv_transpose1d(x, w, stride=2, dilation=2), rand(2, 2, 3),
              rand(2, 3, 2))
    # output_padding >= stride (allowed below the dilation).
    gradcheck(lambda x, w: F.conv_transpose1d(x, w, stride=1, output_padding=2, dilation=3),
              rand(1, 2, 3), rand(2, 2, 2))


def _second_order(op):
    """x, w -> d/dx sum(op(x, w)^2), whose gradient is the op's double backward."""
    def fn(x, w):
        gx, gw = kiln.autograd.grad(op(x, w).pow(2).sum(), [x, w], create_graph=True)
        return gx.sum() + gw.pow(2).sum()
    return fn


def test_conv_gradgradcheck():
    gradcheck(_second_order(lambda x, w: F.conv2d(x, w, stride=2, padding=(1, 0), groups=2)),
              rand(1, 2, 4, 3), rand(2, 1, 2, 2))
    gradcheck(_second_order(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1,
                                                            output_padding=1)),
              rand(1, 2, 2, 2), rand(2, 1, 3, 2))


def test_conv_double_backward():
    x = to_kiln(rand(1, 2, 4, 4), requires_grad=True)
    w = to_kiln(rand(3, 2, 3, 3), requires_grad=True)
    (gx,) = kiln.autograd.grad(F.conv2d(x, w, padding=1).pow(2).sum(), [x], create_graph=True)
    gx.sum().backward()
    # d/dw of sum(dL/dx) with L = sum(conv^2) is nonzero and finite.
    assert w.grad is not None and np.isfinite(w.grad.numpy()).all()
    assert np.abs(w.grad.numpy()).sum() > 0


def unfold_ref(x, k, d, p, s):
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (xp.shape[2] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (xp.shape[3] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = []
    for c in range(x.shape[1]):
        for i in range(k[0]):
            for j in range(k[1]):
                cols.append(xp[:, c, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                               j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]].reshape(x.shape[0], -1))
    return np.stack(cols, 1)


def test_unfold_fold():
    x = rand(2, 3, 6, 5)
    args = ((2, 3), (2, 1), (1, 0), (2, 1))
    cols = F.unfold(to_kiln(x), *args)
    assert_close(cols, unfold_ref(x, *args))
    # fold is the adjoint of unfold: <unfold(x), c> == <x, fold(c)>.
    c = rand(*cols.shape)
    back = F.fold(to_kiln(c), (6, 5), *args).numpy()
    assert np.isclose((unfold_ref(x, *args) * c).sum(), (x * back).sum())
    assert_close(F.unfold(to_kiln(x[0]), 2), unfold_ref(x[:1], (2, 2), (1, 1), (0, 0), (1, 1))[0])
    gradcheck(lambda x: F.unfold(x, (2, 2), stride=2, padding=1), rand(1, 2, 3, 4))
    gradcheck(lambda c: F.fold(c, (4, 3), 2, padding=1), rand(1, 8, 20))


@pytest.mark.parametrize("mode,np_mode", [("constant", "constant"), ("reflect", "reflect"),
                                          ("replicate", "edge"), ("circular", "wrap")])
def test_pad(mode, np_mode):
    x = rand(2, 3, 4, 5)
    got = F.pad(to_kiln(x), (1, 2, 3, 0), mode=mode)
    assert_close(got, np.pad(x, ((0, 0), (0, 0), (3, 0), (1, 2)), mode=np_mode))
    assert_close(F.pad(noncontig(x), (2, 1), mode=mode),
                 np.pad(x, ((0, 0), (0, 0), (0, 0), (2, 1)), mode=np_mode))
    gradcheck(lambda t: F.pad(t, (1, 2, 2, 1), mode=mode), rand(1, 2, 3, 3))


def test_pad_constant_value_and_crop():
    x = rand(3, 4)
    assert_close(F.pad(to_kiln(x), (1, 1), value=2.5),
                 np.pad(x, ((0, 0), (1, 1)), constant_values=2.5))
    assert_close(F.pad(to_kiln(x), (-1, 2, 0, -2)), np.pad(x[:1, 1:], ((0, 0), (0, 2))))


def test_pixel_shuffle_roundtrip():
    x = rand(2, 8, 3, 2)
    y = F.pixel_shuffle(to_kiln(x), 2)
    want = x.reshape(2, 2, 2, 2, 3, 2).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 4)
    assert_close(y, want)
    assert_close(F.pixel_unshuffle(y, 2), x)
    gradcheck(lambda t: F.pixel_shuffle(t, 2), rand(1, 4, 2, 3))


def test_conv_errors():
    x, w = to_kiln(rand(2, 3, 5, 5)), to_kiln(rand(4, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"\[conv2d\] Given groups=1, weight of size \[4, 3, 3, 3\], expected input\[2, 4, 5, 5\] to have 3 channels"):
        F.conv2d(to_kiln(rand(2, 4, 5, 5)), w)
    with pytest.raises(RuntimeError, match=r"\[conv2d\] Expected 3D \(unbatched\) or 4D \(batched\) input"):
        F.conv2d(to_kiln(rand(5, 5)), w)
    with pytest.raises(RuntimeError, match=r"\[conv2d\] Kernel size can't|\[conv2d\] Calculated padded input size"):
        F.conv2d(to_kiln(rand(1, 3, 2, 2)), w)
    with pytest.raises(RuntimeError, match=r"\[conv2d\] Given groups=2, expected weight to be divisible by 2"):
        F.conv2d(x, to_kiln(rand(3, 3, 3, 3)), groups=2)
    with pytest.raises(RuntimeError, match=r"\[conv2d\] .*expected bias to be 1-dimensional with 4"):
        F.conv2d(x, w, to_kiln(rand(3)))
    with pytest.raises(ValueError, match=r"\[conv2d\] padding='same' is not supported for strided"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match=r"\[conv2d\] Invalid padding string 'full'"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(RuntimeError, match=r"\[conv2d\] Input type \(float32\) and weight type \(float64\)"):
        F.conv2d(x.float(), w)
    with pytest.raises(RuntimeError, match=r"\[conv_transpose2d\] output padding must be smaller"):
        F.conv_transpose2d(x, to_kiln(rand(3, 2, 3, 3)), output_padding=1)
    with pytest.raises(RuntimeError, match=r"\[conv1d\] stride must be >= 1"):
        F.conv1d(to_kiln(rand(1, 3, 5)), to_kiln(rand(2, 3, 2)), stride=0)
    with pytest.raises(TypeError, match=r"\[conv2d\] stride must be an int or a tuple"):
        F.conv2d(x, w, stride="2")
    with pytest.raises(RuntimeError, match=r"\[fold\] .*number of sliding blocks"):
        F.fold(to_kiln(rand(1, 4, 5)), (3, 3), 2)
    with pytest.raises(RuntimeError, match=r"\[pad\] Padding size should be less than"):
        F.pad(to_kiln(rand(1, 2, 3)), (3, 0), mode="reflect")
    with pytest.raises(RuntimeError, match=r"\[pixel_shuffle\] .*divisible by 4"):
        F.pixel_shuffle(to_kiln(rand(1, 5, 2, 2)), 2)


def test_conv_weight_dims_errors():
    x = to_kiln(rand(1, 3, 5, 5))
    with pytest.raises(RuntimeError, match=r"\[conv2d\] Expected 4D weight, got weight of size \[2, 3, 3\]"):
        F.conv2d(x, to_kiln(rand(2, 3, 3)))
    with pytest.raises(RuntimeError, match=r"\[conv2d\] Expected 4D weight"):
        F.conv2d(x, to_kiln(rand(2, 3, 3)), padding="same")
    with pytest.raises(RuntimeError, match=r"\[conv1d\] Expected 2D \(unbatched\) or 3D \(batched\) input to conv1d, but got input of size: \[1, 3, 5, 5\]"):
        F.conv1d(x, to_kiln(rand(2, 3, 3)))
    with pytest.raises(RuntimeError, match=r"\[conv_transpose2d\] Expected 4D weight"):
        F.conv_transpose2d(x, to_kiln(rand(3, 2, 3)))


def conv_nd_ref(x, w, b, stride, padding, dilation, groups):
    """Any-rank convolution by a sum over kernel offsets."""
    import itertools
    n = x.ndim - 2
    s, p, d = _pair(stride, n), _pair(padding, n), _pair(dilation, n)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(q, q) for q in p])
    o, cg = w.shape[:2]
    k = w.shape[2:]
    outs = [(xp.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n)]
    out = np.zeros((x.shape[0], o) + tuple(outs))
    og = o // groups
    for g in range(groups):
        for off in itertools.product(*[range(e) for e in k]):
            idx = tuple(slice(off[i] * d[i], off[i] * d[i] + s[i] * (outs[i] - 1) + 1, s[i])
                        for i in range(n))
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + idx]
            wk = w[(slice(g * og, (g + 1) * og), slice(None)) + off]
            out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch, wk)
    return out if b is None else out + b.reshape((1, -1) + (1,) * n)


def test_conv3d_and_transpose3d():
    x, w, b = rand(2, 4, 5, 4, 6), rand(6, 2, 2, 3, 2), rand(6)
    got = F.conv3d(to_kiln(x), to_kiln(w), to_kiln(b), (1, 2, 1), (1, 0, 1), (2, 1, 1), 2)
    assert_close(got, conv_nd_ref(x, w, b, (1, 2, 1), (1, 0, 1), (2, 1, 1), 2))
    # conv_transpose3d is the adjoint of conv3d: <conv(x), y> == <x, conv_t(y)>.
    y = rand(*got.shape)
    back = F.conv_transpose3d(to_kiln(y), to_kiln(w), None, (1, 2, 1), (1, 0, 1), (0, 1, 0), 2,
                              (2, 1, 1))
    assert back.shape == x.shape
    lhs = (conv_nd_ref(x, w, None, (1, 2, 1), (1, 0, 1), (2, 1, 1), 2) * y).sum()
    assert np.isclose(lhs, (x * back.numpy()).sum())
    gradcheck(lambda x, w: F.conv3d(x, w, stride=2, padding=1), rand(1, 2, 3, 3, 2),
              rand(2, 2, 2, 2, 2))
    m = kiln.nn.Conv3d(4, 6, 3, padding=1)
    assert m.weight.shape == (6, 4, 3, 3, 3) and m(kiln.randn(1, 4, 3, 4, 5)).shape == (1, 6, 3, 4, 5)
    assert kiln.nn.ConvTranspose3d(4, 2, 2, stride=2)(kiln.randn(4, 2, 2, 2)).shape == (2, 4, 4, 4)


def test_pad_negative_size_error():
    with pytest.raises(RuntimeError, match=r"\[pad\] The input size 3, plus negative padding -2 and -2"):
        F.pad(to_kiln(rand(2, 3)), (-2, -2))
