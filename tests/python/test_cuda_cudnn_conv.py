"""cuDNN convolutions (cuda/cudnn_conv.cpp, Note [Accelerated convolution] in ops/conv.cpp)
against the GEMM composition on the same GPU (kiln.backends.cudnn.enabled = False), the CPU,
and PyTorch where it is installed: outputs and every gradient, channels_last layouts,
half precision, the benchmark / deterministic / allow_tf32 switches and double backward."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF

cudnn = kiln.backends.cudnn


@pytest.fixture(autouse=True)
def _exact_fp32():
    """Tight float32 comparisons need cuDNN's TF32 off (kiln's default, as PyTorch's, is on)."""
    with cudnn.flags(enabled=True, benchmark=False, deterministic=False, allow_tf32=False):
        yield


# name -> (fn(F, x, w, b), shapes of x, w and b (None: no bias)).
CASES = {
    "conv2d": (lambda F, x, w, b: F.conv2d(x, w, b, 1, 1), [(2, 3, 8, 7), (4, 3, 3, 3), (4,)]),
    "conv2d_stride_pad_dilation": (lambda F, x, w, b: F.conv2d(x, w, b, (2, 1), (1, 2), (2, 1)),
                                   [(2, 4, 9, 8), (6, 4, 3, 2), (6,)]),
    "conv2d_groups": (lambda F, x, w, b: F.conv2d(x, w, b, 1, 1, 1, 2),
                      [(2, 4, 7, 6), (6, 2, 3, 3), (6,)]),
    "conv2d_depthwise": (lambda F, x, w, b: F.conv2d(x, w, b, 1, 1, 1, 4),
                         [(1, 4, 7, 6), (4, 1, 3, 3), None]),
    "conv2d_depthwise_multiplier": (lambda F, x, w, b: F.conv2d(x, w, b, 2, 1, 1, 4),
                                    [(2, 4, 9, 9), (8, 1, 3, 3), (8,)]),
    # An even kernel with 'same' pads one more element after than before.
    "conv2d_same_even_kernel": (lambda F, x, w, b: F.conv2d(x, w, b, 1, "same", (1, 2)),
                                [(2, 3, 6, 7), (4, 3, 4, 2), (4,)]),
    "conv2d_valid": (lambda F, x, w, b: F.conv2d(x, w, b, 1, "valid"),
                     [(2, 3, 6, 5), (2, 3, 2, 3), None]),
    "conv2d_batch1_odd": (lambda F, x, w, b: F.conv2d(x, w, b, 3, (2, 1)),
                          [(1, 3, 13, 11), (5, 3, 5, 3), (5,)]),
    "conv2d_1x1": (lambda F, x, w, b: F.conv2d(x, w, b), [(3, 5, 4, 4), (7, 5, 1, 1), None]),
    "conv2d_unbatched": (lambda F, x, w, b: F.conv2d(x, w, b, 1, 1),
                         [(3, 6, 5), (2, 3, 3, 3), (2,)]),
    "conv1d": (lambda F, x, w, b: F.conv1d(x, w, b, 2, 1, 2), [(2, 3, 11), (4, 3, 3), (4,)]),
    "conv1d_same_groups": (lambda F, x, w, b: F.conv1d(x, w, b, 1, "same", 1, 2),
                           [(2, 4, 10), (6, 2, 4), (6,)]),
    "conv3d": (lambda F, x, w, b: F.conv3d(x, w, b, (1, 2, 1), 1, (2, 1, 1), 2),
               [(2, 4, 5, 4, 6), (6, 2, 2, 3, 2), (6,)]),
    "conv_transpose2d": (lambda F, x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1, 2, 1),
                         [(2, 4, 3, 4), (4, 3, 3, 3), (6,)]),
    "conv_transpose2d_dilation": (lambda F, x, w, b: F.conv_transpose2d(x, w, b, (1, 2), 1, 0,
                                                                         1, (2, 1)),
                                  [(2, 3, 5, 4), (3, 4, 3, 2), (4,)]),
    # output_padding >= stride (allowed below the dilation): cuDNN cannot size it, kiln composes.
    "conv_transpose2d_wide_output_padding": (
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, 1, 0, 1, 1, 2),
        [(1, 2, 4, 3), (2, 3, 2, 2), None]),
    "conv_transpose1d": (lambda F, x, w, b: F.conv_transpose1d(x, w, b, 3, 0, 2, 1, 2),
                         [(1, 2, 5), (2, 3, 2), None]),
    "conv_transpose3d": (lambda F, x, w, b: F.conv_transpose3d(x, w, b, 2, 1, 1),
                         [(1, 2, 3, 2, 3), (2, 3, 3, 2, 3), (3,)]),
    # Big enough that cuDNN has non-deterministic algorithms to avoid.
    "conv2d_large": (lambda F, x, w, b: F.conv2d(x, w, b, 1, 1),
                     [(8, 32, 24, 24), (32, 32, 3, 3), (32,)]),
}


def _arrays(name, low=-1.0, high=1.0):
    rng = np.random.default_rng(sum(map(ord, name)))
    return [None if s is None else rng.uniform(low, high, size=s) for s in CASES[name][1]]


def _channels_last(t):
    """The same values laid out as [N, *S, C] (channels_last / channels_last_3d strides)."""
    n = t.dim()
    to = (0,) + tuple(range(2, n)) + (1,)
    back = (0, n - 1) + tuple(range(1, n - 1))
    return t.permute(*to).contiguous().permute(*back)


def _is_channels_last(t):
    n = t.dim()
    return t.permute(0, *range(2, n), 1).is_contiguous()


def _run(lib, F, name, device, dtype, arrays=None, channels_last=False, grad_seed=1):
    """Output and gradients (input, weight, bias) of case `name` as float64 NumPy arrays."""
    fn = CASES[name][0]
    arrays = _arrays(name) if arrays is None else arrays
    xs = []
    for i, a in enumerate(arrays):
        if a is None:
            xs.append(None)
            continue
        t = lib.tensor(a, dtype=dtype, device=device)
        if channels_last and i == 0 and t.dim() >= 4:
            t = _channels_last(t)
        xs.append(t.detach().requires_grad_(True))
    out = fn(F, *xs)
    g = np.random.default_rng(grad_seed).uniform(-1, 1, size=tuple(out.shape))
    out.backward(lib.tensor(g, dtype=dtype, device=device))
    results = [out.detach().cpu().double().numpy()]
    results += [x.grad.detach().cpu().double().numpy() for x in xs if x is not None]
    return results, out


def _assert_all_close(got, want, tol):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        # Long float32 sums of large terms round at the terms' scale, not the result's.
        scale = max(1.0, float(np.abs(w).max(initial=0.0)))
        np.testing.assert_allclose(g, w, atol=tol * scale, rtol=tol)


def _composed(name, dtype, **kw):
    with cudnn.flags(enabled=False):
        return _run(kiln, KF, name, "cuda", dtype, **kw)[0]


# --- the Python switches (run everywhere) -------------------------------------------------------

def test_cudnn_module_api():
    assert isinstance(cudnn.is_available(), bool)
    v = cudnn.version()
    assert (v is None) == (not cudnn.is_available())
    if v is not None:
        assert v >= 90000
    assert cudnn.enabled is True
    with cudnn.flags(enabled=False, benchmark=True):
        assert cudnn.enabled is False and cudnn.benchmark is True
        assert kiln._C._get_backend_flag("cudnn_enabled") is False
    assert cudnn.enabled is True and cudnn.benchmark is False


def test_flags_restored_after_an_error():
    with pytest.raises(ValueError):
        with cudnn.flags(enabled=False):
            raise ValueError("inside")
    assert cudnn.enabled is True


@pytest.mark.parametrize("name", ["conv2d_same_even_kernel", "conv_transpose2d"])
def test_cpu_ignores_the_switch(name):
    on = _run(kiln, KF, name, "cpu", kiln.float64)[0]
    with cudnn.flags(enabled=False):
        off = _run(kiln, KF, name, "cpu", kiln.float64)[0]
    _assert_all_close(on, off, 0)


# --- values and gradients ------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32])
@pytest.mark.parametrize("channels_last", [False, True])
def test_matches_composition_and_cpu(name, dtype, channels_last):
    _skip_without_cudnn()
    tol = 1e-10 if dtype == kiln.float64 else 1e-4
    with cudnn.flags(allow_tf32=False):  # tight float32 comparisons
        got, out = _run(kiln, KF, name, "cuda", dtype, channels_last=channels_last)
        _assert_all_close(got, _composed(name, dtype, channels_last=channels_last), tol)
    _assert_all_close(got, _run(kiln, KF, name, "cpu", dtype)[0], tol)
    # As in PyTorch, float64 convolutions answer in NCHW whatever the input's layout.
    if (channels_last and dtype != kiln.float64 and out.dim() >= 4
            and "wide_output_padding" not in name):
        assert _is_channels_last(out), out.stride()


@pytest.mark.parametrize("name", ["conv2d", "conv2d_groups", "conv3d", "conv_transpose2d"])
@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_half_precision_against_float32(name, dtype):
    _skip_without_cudnn()
    # Inputs rounded to the low precision first, so only the arithmetic differs.
    arrays = [None if a is None else kiln.tensor(a).to(dtype).double().numpy()
              for a in _arrays(name)]
    tol = 2e-2 if dtype == kiln.float16 else 8e-2
    for channels_last in (False, True):
        got, out = _run(kiln, KF, name, "cuda", dtype, arrays, channels_last)
        assert out.dtype == dtype
        want = _run(kiln, KF, name, "cuda", kiln.float32, arrays, channels_last)[0]
        _assert_all_close(got, want, tol)


def test_autocast_runs_conv_in_half():
    _skip_without_cudnn()
    arrays = _arrays("conv2d")
    x, w, b = (kiln.tensor(a, dtype=kiln.float32, device="cuda") for a in arrays)
    with kiln.autocast("cuda", dtype=kiln.float16):
        y = KF.conv2d(x, w, b, 1, 1)
    assert y.dtype == kiln.float16
    np.testing.assert_allclose(y.double().cpu().numpy(),
                               KF.conv2d(x, w, b, 1, 1).double().cpu().numpy(), atol=2e-2,
                               rtol=2e-2)


def test_empty_batch_composes():
    _skip_without_cudnn()
    x = kiln.zeros(0, 3, 5, 5, device="cuda")
    w = kiln.ones(4, 3, 3, 3, device="cuda")
    assert tuple(KF.conv2d(x, w, padding=1).shape) == (0, 4, 5, 5)


# --- the cudnn switches --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["conv2d", "conv2d_depthwise", "conv3d", "conv_transpose2d",
                                  "conv1d"])
def test_benchmark_mode(name):
    _skip_without_cudnn()
    want = _composed(name, kiln.float64)
    with cudnn.flags(benchmark=True):
        for _ in range(2):  # the second call takes the cached algorithms
            _assert_all_close(_run(kiln, KF, name, "cuda", kiln.float64)[0], want, 1e-10)
        _assert_all_close(_run(kiln, KF, name, "cuda", kiln.float64, channels_last=True)[0],
                          want, 1e-10)


def test_deterministic_mode_repeats_bitwise():
    _skip_without_cudnn()
    with cudnn.flags(deterministic=True):
        first = _run(kiln, KF, "conv2d_large", "cuda", kiln.float32)[0]
        second = _run(kiln, KF, "conv2d_large", "cuda", kiln.float32)[0]
        with cudnn.flags(benchmark=True):
            third = _run(kiln, KF, "conv2d_large", "cuda", kiln.float32)[0]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    _assert_all_close(third, first, 1e-4)
    _assert_all_close(first, _composed("conv2d_large", kiln.float32), 1e-3)


def test_allow_tf32_changes_precision_on_large_k():
    _skip_without_cudnn()
    rng = np.random.default_rng(4)
    x = kiln.tensor(rng.uniform(-1, 1, size=(8, 512, 16, 16)), dtype=kiln.float32, device="cuda")
    w = kiln.tensor(rng.uniform(-1, 1, size=(64, 512, 3, 3)), dtype=kiln.float32, device="cuda")
    exact = KF.conv2d(x.double(), w.double(), padding=1).cpu().numpy()

    def error(allow_tf32):
        with cudnn.flags(allow_tf32=allow_tf32):
            y = KF.conv2d(x, w, padding=1).double().cpu().numpy()
        return np.abs(y - exact).max() / np.abs(exact).max()

    fma, tf32 = error(False), error(True)
    assert fma < 2e-5, fma
    # TF32 keeps 10 mantissa bits: with K = 4608 the error is orders above fp32 FMA's.
    assert tf32 > 10 * fma, (tf32, fma)
    assert tf32 < 1e-2, tf32


# --- double backward -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["conv2d_groups", "conv2d_same_even_kernel", "conv1d",
                                  "conv_transpose2d", "conv_transpose3d"])
def test_double_backward(name):
    _skip_without_cudnn()

    def second_order(device, enabled=True):
        with cudnn.flags(enabled=enabled):
            xs = [None if a is None else
                  kiln.tensor(a, dtype=kiln.float64, device=device).requires_grad_(True)
                  for a in _arrays(name)]
            y = CASES[name][0](KF, *xs)
            leaves = [t for t in xs if t is not None]
            grads = kiln.autograd.grad((y * y).sum(), leaves, create_graph=True)
            total = (grads[0] * grads[0]).sum()
            for g in grads[1:]:
                total = total + (g * g).sum()
            total.backward()
            return [t.grad.cpu().numpy() for t in leaves]

    gpu = second_order("cuda")
    _assert_all_close(gpu, second_order("cpu"), 1e-9)
    _assert_all_close(gpu, second_order("cuda", enabled=False), 1e-9)


def test_gradcheck_through_cudnn():
    _skip_without_cudnn()
    rng = np.random.default_rng(5)
    x = kiln.tensor(rng.uniform(-1, 1, size=(1, 2, 4, 3)), requires_grad=True)
    w = kiln.tensor(rng.uniform(-1, 1, size=(2, 1, 2, 2)), requires_grad=True)

    def f(x, w):
        return KF.conv2d(x.cuda(), w.cuda(), None, 1, 1, 1, 2).cpu()

    def g(x, w):
        return KF.conv_transpose2d(x.cuda(), w.cuda(), None, 2, 1, 1, 2).cpu()

    assert kiln.autograd.gradcheck(f, [x, w])
    assert kiln.autograd.gradcheck(g, [x, w])


# --- PyTorch -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["conv2d", "conv2d_groups", "conv2d_same_even_kernel", "conv1d",
                                  "conv3d", "conv_transpose2d", "conv_transpose1d"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_matches_torch(name, channels_last):
    torch = pytest.importorskip("torch")
    _skip_without_cudnn()
    saved = torch.backends.cudnn.allow_tf32, cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = cudnn.allow_tf32 = False
    try:
        for dtype, tol in ((kiln.float64, 1e-10), (kiln.float32, 1e-4)):
            ours, y = _run(kiln, KF, name, "cuda", dtype, channels_last=channels_last)
            tdtype = torch.float64 if dtype == kiln.float64 else torch.float32
            theirs, ty = _run(torch, torch.nn.functional, name, "cuda", tdtype,
                              channels_last=channels_last)
            _assert_all_close(ours, theirs, tol)
            # (torch may pad an odd 'same' input in another layout first.)
            if y.dim() == 4 and "same" not in name:
                assert _is_channels_last(y) == ty.is_contiguous(
                    memory_format=torch.channels_last), (y.stride(), ty.stride())
    finally:
        torch.backends.cudnn.allow_tf32, cudnn.allow_tf32 = saved


def _skip_without_cudnn():
    if kiln.cuda.device_count() == 0:
        pytest.skip("no CUDA device")
    if not cudnn.is_available():
        pytest.skip("kiln built without cuDNN")
