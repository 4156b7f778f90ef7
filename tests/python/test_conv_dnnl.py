"""oneDNN convolutions on the CPU (ops/cpu/conv_dnnl.cpp, Note [oneDNN convolutions]) against the
float64 GEMM composition (Note [Convolution as GEMM], which oneDNN never runs: it has no float64
convolution), NumPy and PyTorch where installed: outputs and every gradient, channels_last and
strided layouts, groups / stride / padding / dilation sweeps, bfloat16, empty batches, thread
counts and the kiln.backends.mkldnn switch. The cases are those of the cuDNN tests."""

import itertools

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF
from test_conv import conv2d_ref
from test_cuda_cudnn_conv import (CASES, _arrays, _assert_all_close, _channels_last,
                                  _is_channels_last, _run)

mkldnn = kiln.backends.mkldnn

needs_dnnl = pytest.mark.skipif(not mkldnn.is_available(), reason="kiln built without oneDNN")


def _reference(name, **kw):
    """The float64 composition: oneDNN declines float64, and the switch is off besides."""
    with mkldnn.flags(enabled=False):
        return _run(kiln, KF, name, "cpu", kiln.float64, **kw)[0]


def test_mkldnn_module_api():
    assert isinstance(mkldnn.is_available(), bool)
    assert mkldnn.enabled is True
    with mkldnn.flags(enabled=False):
        assert mkldnn.enabled is False
        assert kiln._C._get_backend_flag("mkldnn_enabled") is False
    assert mkldnn.enabled is True
    with pytest.raises(ValueError):
        with mkldnn.flags(enabled=False):
            raise ValueError("inside")
    assert mkldnn.enabled is True


@needs_dnnl
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("channels_last", [False, True])
def test_float32_matches_float64_composition(name, channels_last):
    got, out = _run(kiln, KF, name, "cpu", kiln.float32, channels_last=channels_last)
    _assert_all_close(got, _reference(name), 1e-4)
    with mkldnn.flags(enabled=False):
        composed = _run(kiln, KF, name, "cpu", kiln.float32, channels_last=channels_last)[0]
    _assert_all_close(got, composed, 1e-4)
    if channels_last and out.dim() >= 4 and "wide_output_padding" not in name:
        assert _is_channels_last(out), out.stride()


# ResNet-18 and MNIST-CNN layer shapes (smaller batch), where oneDNN runs its JIT kernels
# rather than the reference ones small problems get.
LAYERS = [
    # (N, C, H, W), (O, kh, kw), stride, padding, groups
    ((2, 32, 26, 26), (64, 3, 3), 1, 0, 1),
    ((2, 64, 14, 14), (64, 3, 3), 1, 1, 1),
    ((2, 64, 14, 14), (128, 3, 3), 2, 1, 1),
    ((2, 64, 14, 14), (128, 1, 1), 2, 0, 1),
    ((2, 3, 32, 32), (64, 7, 7), 2, 3, 1),
    ((2, 32, 12, 12), (32, 3, 3), 1, 1, 32),  # depthwise
    ((2, 32, 12, 12), (64, 3, 3), 1, 2, 4),   # grouped, dilated below
]


@needs_dnnl
@pytest.mark.parametrize("shape,wshape,stride,padding,groups", LAYERS)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
def test_layer_shapes_against_numpy(shape, wshape, stride, padding, groups, layout):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, size=shape)
    w = rng.uniform(-1, 1, size=(wshape[0], shape[1] // groups) + wshape[1:])
    b = rng.uniform(-1, 1, size=wshape[0])
    dilation = 2 if groups == 4 else 1
    xt, wt = kiln.tensor(x, dtype=kiln.float32), kiln.tensor(w, dtype=kiln.float32)
    if layout == "channels_last":
        xt = _channels_last(xt)
    elif layout == "strided":  # every other column of a wider tensor, weight transposed storage
        wide = np.zeros(shape[:3] + (2 * shape[3],))
        wide[..., ::2] = x
        xt = kiln.tensor(wide, dtype=kiln.float32)[..., ::2]
        wt = kiln.tensor(np.ascontiguousarray(np.swapaxes(w, 0, 1)),
                         dtype=kiln.float32).transpose(0, 1)
        assert not xt.is_contiguous()
    xt.requires_grad_(True)
    wt.requires_grad_(True)
    bt = kiln.tensor(b, dtype=kiln.float32, requires_grad=True)
    y = KF.conv2d(xt, wt, bt, stride, padding, dilation, groups)
    want = conv2d_ref(x, w, b, stride, padding, None, dilation, groups)
    scale = np.abs(want).max()
    np.testing.assert_allclose(y.detach().double().numpy(), want, atol=1e-5 * scale, rtol=1e-4)
    assert _is_channels_last(y) == (layout == "channels_last")
    g = rng.uniform(-1, 1, size=want.shape)
    y.backward(kiln.tensor(g, dtype=kiln.float32))
    # Gradients against the float64 composition of the same problem.
    x64, w64, b64 = (kiln.tensor(a, requires_grad=True) for a in (x, w, b))
    KF.conv2d(x64, w64, b64, stride, padding, dilation, groups).backward(kiln.tensor(g))
    for got, ref in ((xt, x64), (wt, w64), (bt, b64)):
        r = ref.grad.numpy()
        np.testing.assert_allclose(got.grad.double().numpy(), r,
                                   atol=1e-5 * np.abs(r).max(), rtol=1e-4)


@needs_dnnl
@pytest.mark.parametrize("name", ["conv2d", "conv2d_groups", "conv2d_depthwise", "conv1d", "conv3d",
                                  "conv_transpose2d", "conv2d_large"])
def test_bfloat16_against_float32(name):
    # Inputs rounded to bfloat16 first, so only the arithmetic (and the result's rounding) differs.
    arrays = [None if a is None else kiln.tensor(a).to(kiln.bfloat16).double().numpy()
              for a in _arrays(name)]
    for channels_last in (False, True):
        got, out = _run(kiln, KF, name, "cpu", kiln.bfloat16, arrays, channels_last)
        assert out.dtype == kiln.bfloat16
        want = _run(kiln, KF, name, "cpu", kiln.float32, arrays, channels_last)[0]
        _assert_all_close(got, want, 3e-2)


@needs_dnnl
def test_empty_batch_and_channels_compose():
    w = kiln.ones(4, 3, 3, 3, requires_grad=True)
    x = kiln.zeros(0, 3, 5, 5, requires_grad=True)
    y = KF.conv2d(x, w, padding=1)
    assert tuple(y.shape) == (0, 4, 5, 5)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 5, 5)
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros((4, 3, 3, 3)))
    assert tuple(KF.conv2d(kiln.zeros(2, 0, 5, 5), kiln.ones(4, 0, 3, 3)).shape) == (2, 4, 3, 3)


@needs_dnnl
def test_thread_counts_agree():
    saved = kiln.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            kiln.set_num_threads(n)  # oneDNN sizes its blocking per thread count: a cache key
            results.append(_run(kiln, KF, "conv2d_large", "cpu", kiln.float32)[0])
    finally:
        kiln.set_num_threads(saved)
    _assert_all_close(results[0], results[1], 1e-5)


@needs_dnnl
@pytest.mark.parametrize("name", ["conv2d_groups", "conv2d_same_even_kernel", "conv1d",
                                  "conv_transpose2d"])
def test_double_backward_composes(name):
    def second_order(dtype):
        xs = [None if a is None else kiln.tensor(a, dtype=dtype).requires_grad_(True)
              for a in _arrays(name)]
        y = CASES[name][0](KF, *xs)
        leaves = [t for t in xs if t is not None]
        grads = kiln.autograd.grad((y * y).sum(), leaves, create_graph=True)
        total = sum(((g * g).sum() for g in grads[1:]), (grads[0] * grads[0]).sum())
        total.backward()
        return [t.grad.double().numpy() for t in leaves]

    _assert_all_close(second_order(kiln.float32), second_order(kiln.float64), 1e-4)


@needs_dnnl
def test_repeated_calls_reuse_the_primitive():
    # The same problem twice, then one differing only in layout, stride and dtype: the cache
    # keys must tell them apart.
    x = np.random.default_rng(3).uniform(-1, 1, size=(2, 8, 9, 9))
    w = np.random.default_rng(4).uniform(-1, 1, size=(8, 8, 3, 3))
    xt, wt = kiln.tensor(x, dtype=kiln.float32), kiln.tensor(w, dtype=kiln.float32)
    for stride, cl in itertools.product((1, 2), (False, True)):
        want = conv2d_ref(x, w, None, stride, 1)
        for _ in range(2):
            y = KF.conv2d(_channels_last(xt) if cl else xt, wt, None, stride, 1)
            np.testing.assert_allclose(y.double().numpy(), want, atol=1e-4, rtol=1e-4)


def test_float64_keeps_working_with_the_switch_on():
    x, w = np.ones((1, 2, 4, 4)), np.ones((3, 2, 3, 3))
    y = KF.conv2d(kiln.tensor(x), kiln.tensor(w), padding=1)
    assert y.dtype == kiln.float64
    np.testing.assert_allclose(y.numpy(), conv2d_ref(x, w, None, 1, 1))


@needs_dnnl
@pytest.mark.parametrize("name", ["conv2d", "conv2d_groups", "conv2d_depthwise_multiplier",
                                  "conv2d_same_even_kernel", "conv1d", "conv3d",
                                  "conv_transpose2d", "conv2d_large"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_matches_torch(name, channels_last):
    torch = pytest.importorskip("torch")
    got, out = _run(kiln, KF, name, "cpu", kiln.float32, channels_last=channels_last)
    want, tout = _run(torch, torch.nn.functional, name, "cpu", torch.float32,
                      channels_last=channels_last)
    _assert_all_close(got, want, 1e-4)
    if out.dim() >= 4:
        assert _is_channels_last(out) == _is_channels_last(tout)


@needs_dnnl
def test_expanded_output_gradient():
    # y.sum().backward() hands the node an expanded gradient (every stride 0).
    x = np.random.default_rng(5).uniform(-1, 1, size=(2, 4, 6, 6))
    w = np.random.default_rng(6).uniform(-1, 1, size=(6, 2, 3, 3))
    grads = []
    for dtype in (kiln.float32, kiln.float64):
        xt = kiln.tensor(x, dtype=dtype, requires_grad=True)
        wt = kiln.tensor(w, dtype=dtype, requires_grad=True)
        KF.conv2d(xt, wt, None, 1, 1, 1, 2).sum().backward()
        grads.append([xt.grad.double().numpy(), wt.grad.double().numpy()])
    _assert_all_close(grads[0], grads[1], 1e-5)
