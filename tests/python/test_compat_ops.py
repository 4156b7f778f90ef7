"""PyTorch-compatibility details from the op-conformance suite (issue 17, items 14-19),
checked against NumPy: NumPy keyword aliases, Tensor.view(dtype), nearest-exact and uint8
interpolation, integer max pooling, pow edge cases, argument errors with PyTorch's
exception types, circular padding and cumprod."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F

RNG = np.random.default_rng(17)


# --- item 14: axis= / keepdims= ------------------------------------------------------------


@pytest.mark.parametrize("name, np_fn", [
    ("sum", np.sum), ("mean", np.mean), ("prod", np.prod), ("amax", np.amax), ("amin", np.amin),
    ("all", np.all), ("any", np.any), ("logsumexp", lambda a, axis, keepdims: np.log(
        np.exp(a).sum(axis=axis, keepdims=keepdims))),
    ("std", lambda a, axis, keepdims: np.std(a, axis=axis, keepdims=keepdims, ddof=1)),
    ("var", lambda a, axis, keepdims: np.var(a, axis=axis, keepdims=keepdims, ddof=1)),
])
def test_reductions_take_numpy_axis_and_keepdims(name, np_fn):
    a = RNG.uniform(-1, 1, (3, 4, 5))
    x = kiln.tensor(a)
    for axis in (1, -1):
        for keepdims in (False, True):
            expected = np_fn(a, axis=axis, keepdims=keepdims)
            by_function = getattr(kiln, name)(x, axis=axis, keepdims=keepdims)
            by_method = getattr(x, name)(axis=axis, keepdims=keepdims)
            np.testing.assert_allclose(by_function.numpy(), expected, rtol=1e-12)
            np.testing.assert_allclose(by_method.numpy(), expected, rtol=1e-12)
    mixed = getattr(x, name)(axis=0, keepdim=True)
    assert mixed.shape == (1, 4, 5)


def test_max_min_std_mean_argmax_cat_and_cumsum_take_axis():
    a = RNG.uniform(-1, 1, (3, 4))
    x = kiln.tensor(a)
    values, indices = kiln.max(x, axis=1, keepdims=True)
    np.testing.assert_array_equal(values.numpy(), a.max(1, keepdims=True))
    np.testing.assert_array_equal(indices.numpy(), a.argmax(1)[:, None])
    np.testing.assert_array_equal(x.min(axis=0).values.numpy(), a.min(0))
    std, mean = kiln.std_mean(x, axis=0)
    np.testing.assert_allclose(std.numpy(), a.std(0, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(mean.numpy(), a.mean(0), rtol=1e-12)
    np.testing.assert_array_equal(x.argmax(axis=1).numpy(), a.argmax(1))
    np.testing.assert_allclose(kiln.cumsum(x, axis=1).numpy(), np.cumsum(a, 1), rtol=1e-12)
    np.testing.assert_array_equal(kiln.cat([x, x], axis=1).numpy(), np.concatenate([a, a], 1))


def test_dim_given_twice_is_a_type_error():
    x = kiln.ones(2, 3)
    with pytest.raises(TypeError, match="got multiple values for argument 'dim'"):
        x.sum(dim=0, axis=1)
    with pytest.raises(TypeError, match="got multiple values for argument 'keepdim'"):
        kiln.sum(x, 0, keepdim=True, keepdims=True)
    with pytest.raises(TypeError):
        x.sum(axes=0)  # not an alias: still an error


def test_aliased_functions_keep_their_name_and_docstring():
    assert kiln.sum.__name__ == "sum" and "dim" in kiln.sum.__doc__
    assert kiln.Tensor.mean.__name__ == "mean"


# --- item 15: Tensor.view(dtype) -------------------------------------------------------------


@pytest.mark.parametrize("src, dst", [
    (np.float32, np.int32), (np.int64, np.float64), (np.float32, np.uint8),
    (np.float64, np.int16), (np.uint8, np.float32), (np.int16, np.int64), (np.int32, np.float16),
])
def test_view_dtype_reinterprets_bytes_like_numpy(src, dst):
    a = (RNG.uniform(-100, 100, (3, 8)) if np.dtype(src).kind == "f"
         else RNG.integers(-100, 100, (3, 8))).astype(src)
    x = kiln.tensor(a)
    kdst = getattr(kiln, np.dtype(dst).name)
    y = x.view(kdst)
    expected = a.view(dst)
    assert y.dtype == kdst and tuple(y.shape) == expected.shape
    np.testing.assert_array_equal(y.numpy().view(np.uint8), expected.view(np.uint8))
    assert x.view(dtype=kdst).shape == y.shape


def test_view_dtype_shares_storage_and_has_no_gradient():
    x = kiln.zeros(4, dtype=kiln.float32, requires_grad=True)
    bits = x.detach().view(kiln.int32)
    bits[1] = 0x3F800000  # the bits of 1.0f
    assert x.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert not x.view(kiln.int32).requires_grad


def test_view_dtype_of_strided_and_offset_views_follows_pytorch():
    base = kiln.arange(16, dtype=kiln.int16).reshape(2, 8)
    sliced = base[:, 2:6]  # offset 2, row stride 8: divisible by 2
    np.testing.assert_array_equal(sliced.view(kiln.int32).numpy(),
                                  np.arange(16, dtype=np.int16).reshape(2, 8)[:, 2:6].copy()
                                  .view(np.int32))
    down = kiln.arange(6, dtype=kiln.int32).reshape(2, 3)[:, 1:]
    np.testing.assert_array_equal(down.view(kiln.uint8).numpy(),
                                  np.arange(6, dtype=np.int32).reshape(2, 3)[:, 1:].copy()
                                  .view(np.uint8))


def test_view_dtype_errors_name_the_rule():
    with pytest.raises(RuntimeError, match=r"self.dim\(\) cannot be 0"):
        kiln.tensor(1.0).view(kiln.int16)
    with pytest.raises(RuntimeError, match=r"self.size\(-1\) must be divisible by 2"):
        kiln.zeros(3, dtype=kiln.int16).view(kiln.int32)
    with pytest.raises(RuntimeError, match=r"self.stride\(-1\) must be 1"):
        kiln.zeros(4, 4).t().view(kiln.int16)
    with pytest.raises(RuntimeError, match=r"self.storage_offset\(\) must be divisible by 2"):
        kiln.zeros(6, dtype=kiln.int16)[1:5].view(kiln.int32)
    with pytest.raises(RuntimeError, match=r"self.stride\(0\) must be divisible by 4"):
        kiln.zeros(3, 6, dtype=kiln.uint8)[:, :4].view(kiln.int32)
    assert kiln.tensor(1.0).view(kiln.int32).item() == 0x3F800000


# --- item 16: interpolate nearest-exact / uint8, integer max pooling -------------------------


def nearest_reference(a, out, exact):
    n = a.shape[-1]
    o = np.arange(out)
    src = np.floor(((o + 0.5) if exact else o) * (n / out)).astype(int)
    return a[..., np.minimum(src, n - 1)]


@pytest.mark.parametrize("n, out", [(5, 3), (4, 7), (10, 4), (3, 3)])
def test_interpolate_nearest_exact_picks_the_nearest_centre(n, out):
    a = RNG.uniform(-1, 1, (2, 3, n))
    y = F.interpolate(kiln.tensor(a), size=out, mode="nearest-exact")
    np.testing.assert_array_equal(y.numpy(), nearest_reference(a, out, exact=True))
    legacy = F.interpolate(kiln.tensor(a), size=out, mode="nearest")
    np.testing.assert_array_equal(legacy.numpy(), nearest_reference(a, out, exact=False))


def test_interpolate_nearest_exact_two_dims_and_upsample_module():
    a = RNG.uniform(-1, 1, (1, 2, 5, 4))
    y = F.interpolate(kiln.tensor(a), size=(3, 6), mode="nearest-exact")
    expected = nearest_reference(nearest_reference(a, 6, True).swapaxes(-1, -2), 3, True)
    np.testing.assert_array_equal(y.numpy(), expected.swapaxes(-1, -2))
    up = kiln.nn.Upsample(scale_factor=2, mode="nearest-exact")(kiln.tensor(a))
    assert up.shape == (1, 2, 10, 8)


def test_interpolate_uint8_images():
    a = RNG.integers(0, 256, (1, 3, 4, 5)).astype(np.uint8)
    x = kiln.tensor(a)
    for mode in ("nearest", "nearest-exact"):
        y = F.interpolate(x, size=(7, 3), mode=mode)
        assert y.dtype == kiln.uint8
        ref = F.interpolate(x.float(), size=(7, 3), mode=mode)
        np.testing.assert_array_equal(y.numpy(), ref.numpy().astype(np.uint8))
    y = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False)
    assert y.dtype == kiln.uint8 and y.shape == (1, 3, 6, 7)
    ref = F.interpolate(x.float(), scale_factor=1.5, mode="bilinear", align_corners=False)
    np.testing.assert_array_equal(y.numpy(), np.clip(np.round(ref.numpy()), 0, 255))
    with pytest.raises(NotImplementedError, match=r"\[interpolate\] not implemented for dtype"):
        F.interpolate(kiln.zeros(1, 1, 4, dtype=kiln.int64), size=2)


def max_pool_reference(a, k, s, p):
    """Max and flat argmax (first in window order) over 2-d windows, padding excluded."""
    n, c, h, w = a.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    values = np.zeros((n, c, oh, ow), a.dtype)
    indices = np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            best, where = None, None
            for di in range(k):
                for dj in range(k):
                    y, x = i * s - p + di, j * s - p + dj
                    if 0 <= y < h and 0 <= x < w:
                        v = a[:, :, y, x]
                        if best is None:
                            best, where = v.copy(), np.full(v.shape, y * w + x)
                        else:
                            better = v > best
                            best = np.where(better, v, best)
                            where = np.where(better, y * w + x, where)
            values[:, :, i, j], indices[:, :, i, j] = best, where
    return values, indices


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
@pytest.mark.parametrize("k, s, p", [(2, 2, 0), (3, 1, 1), (3, 2, 1)])
def test_max_pool2d_on_integers_matches_a_brute_force_reference(dtype, k, s, p):
    low = 0 if dtype == "uint8" else -5
    a = RNG.integers(low, low + 4, (2, 3, 6, 7)).astype(dtype)  # many ties, zeros at borders
    y, idx = F.max_pool2d(kiln.tensor(a), k, s, p, return_indices=True)
    values, indices = max_pool_reference(a, k, s, p)
    assert y.dtype == getattr(kiln, dtype) and idx.dtype == kiln.int64
    np.testing.assert_array_equal(y.numpy(), values)
    np.testing.assert_array_equal(idx.numpy(), indices)


def test_max_pool_on_bool_is_not_implemented():
    with pytest.raises(NotImplementedError, match=r"not implemented for 'Bool'"):
        F.max_pool2d(kiln.zeros(1, 1, 4, 4, dtype=kiln.bool), 2)


# --- item 17: pow edge cases ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
def test_pow_of_signed_zeros_to_negative_powers_follows_ieee(dtype):
    base = kiln.tensor([0.0, -0.0, 0.0, -0.0, -0.0], dtype=dtype)
    exp = kiln.tensor([-1.0, -1.0, -2.0, -2.0, -3.0], dtype=dtype)
    assert kiln.pow(base, exp).float().tolist() == [math.inf, -math.inf, math.inf, math.inf,
                                                    -math.inf]
    assert (base ** -1).float().tolist() == [math.inf, -math.inf, math.inf, -math.inf, -math.inf]
    assert (base ** -2).float().tolist() == [math.inf] * 5
    assert (base ** -1.5).float().tolist() == [math.inf] * 5
    assert kiln.pow(0, kiln.tensor([-1.0], dtype=dtype)).float().tolist() == [math.inf]


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int32, kiln.int16, kiln.int8, kiln.uint8,
                                   kiln.bool])
def test_integer_to_a_negative_python_integer_raises(dtype):
    x = kiln.tensor([2, 1, 0], dtype=dtype)
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        x ** -1
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        kiln.pow(x, -2)
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        x.pow_(-1)
    assert (x ** -1.0).dtype == kiln.get_default_dtype()


def test_integer_to_negative_tensor_powers_truncate_like_pytorch():
    base = kiln.tensor([2, 1, -1, 0, 3, -1])
    exp = kiln.tensor([-1, -1, -1, -1, -2, -2])
    assert kiln.pow(base, exp).tolist() == [0, 1, -1, 0, 0, 1]
    assert kiln.pow(base, kiln.tensor(-3)).tolist() == [0, 1, -1, 0, 0, -1]
    assert kiln.pow(-1, kiln.tensor([-1, -2])).tolist() == [-1, 1]
    assert kiln.pow(2, kiln.tensor([-1, 3])).tolist() == [0, 8]


# --- item 18: normalize(p=0), factory and div errors ------------------------------------------


@pytest.mark.parametrize("p", [0, math.inf, -math.inf, -1.0, 1.0, 3.0])
def test_normalize_divides_by_any_order_of_norm(p):
    a = np.array([[1.0, 0.0, -2.0], [0.0, 0.0, 0.0], [0.5, 3.0, 0.0]])
    y = F.normalize(kiln.tensor(a), p=p, dim=1)
    if p == 0:
        norm = (a != 0).sum(1, keepdims=True).astype(float)
    elif math.isinf(p):
        norm = (np.abs(a).max if p > 0 else np.abs(a).min)(1, keepdims=True)
    else:
        with np.errstate(divide="ignore"):
            norm = (np.abs(a) ** p).sum(1, keepdims=True) ** (1 / p)
    np.testing.assert_allclose(y.numpy(), a / np.maximum(norm, 1e-12), rtol=1e-12)


def test_linspace_and_arange_errors_use_pytorchs_types():
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        kiln.linspace(0, 1, -1)
    with pytest.raises(TypeError):
        kiln.linspace(0, 1, 2.5)
    with pytest.raises(TypeError):
        kiln.linspace(0, 1)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        kiln.arange(0, 10, 0)
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step sign"):
        kiln.arange(0, 10, -1)
    with pytest.raises(RuntimeError, match="unsupported range"):
        kiln.arange(0, math.inf)
    with pytest.raises(RuntimeError, match="unsupported range"):
        kiln.arange(0, math.nan)
    with pytest.raises(TypeError):
        kiln.arange("a")
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        kiln.logspace(0, 1, -2)
    np.testing.assert_allclose(kiln.linspace(kiln.tensor(0.0), kiln.tensor(1.0), 3).numpy(),
                               [0.0, 0.5, 1.0])
    assert kiln.arange(kiln.tensor(3)).tolist() == [0, 1, 2]


def test_div_rounding_mode_errors_use_pytorchs_types():
    x = kiln.ones(2)
    for call in (lambda: kiln.div(x, 2, rounding_mode="typo"),
                 lambda: x.div(2, rounding_mode="typo"),
                 lambda: x.clone().div_(2, rounding_mode="typo")):
        with pytest.raises(RuntimeError, match="expected rounding_mode to be one of None, "
                                               "'trunc', or 'floor' but found 'typo'"):
            call()
    with pytest.raises(TypeError, match="rounding_mode"):
        x.div(2, rounding_mode=1)


# --- item 19: circular padding and cumprod ----------------------------------------------------


def circular_reference(a, pads):
    """PyTorch's rule: crop by the negative pads, then wrap the positive ones around what is
    left (np.pad's 'wrap' of the cropped array)."""
    n = len(pads) // 2
    out = a
    for i in range(n):
        axis = a.ndim - 1 - i
        lo, hi = pads[2 * i], pads[2 * i + 1]
        size = out.shape[axis]
        out = np.take(out, np.arange(max(-lo, 0), size - max(-hi, 0)), axis=axis)
        widths = [(0, 0)] * a.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        out = np.pad(out, widths, mode="wrap")
    return out


def test_circular_pad_matches_wrap_of_the_cropped_input_on_random_shapes():
    rng = np.random.default_rng(19)
    for trial in range(60):
        n = int(rng.integers(1, 4))
        shape = [int(rng.integers(1, 3))] + [int(rng.integers(2, 6)) for _ in range(n + 1)]
        a = rng.uniform(-1, 1, shape)
        pads = []
        for i in range(n):
            size = shape[-1 - i]
            lo = int(rng.integers(-(size // 2), size // 2 + 1))
            hi = int(rng.integers(-(size // 2), size // 2 + 1))
            pads += [lo, hi]
        y = F.pad(kiln.tensor(a), pads, mode="circular")
        np.testing.assert_array_equal(y.numpy(), circular_reference(a, pads),
                                      err_msg=f"shape {shape} pads {pads}")


def test_circular_pad_gradient_sums_the_wrapped_copies():
    x = kiln.arange(4.0, dtype=kiln.float64).reshape(1, 1, 4).requires_grad_(True)
    F.pad(x, (2, -1), mode="circular").sum().backward()
    # output = [1, 2, 0, 1, 2]: element 0 once, 1 and 2 twice, 3 cropped.
    assert x.grad.flatten().tolist() == [1.0, 2.0, 2.0, 0.0]


def test_cumprod_matches_numpy_with_zeros_on_every_dim():
    rng = np.random.default_rng(23)
    for trial in range(40):
        shape = tuple(int(s) for s in rng.integers(1, 6, size=int(rng.integers(1, 4))))
        a = rng.uniform(-2, 2, shape)
        a[rng.random(shape) < 0.2] = 0.0
        for dim in range(-len(shape), len(shape)):
            np.testing.assert_allclose(kiln.cumprod(kiln.tensor(a), dim).numpy(),
                                       np.cumprod(a, axis=dim), rtol=1e-12, atol=1e-300)
    ints = rng.integers(-3, 4, (4, 5))
    np.testing.assert_array_equal(kiln.cumprod(kiln.tensor(ints), 1).numpy(), np.cumprod(ints, 1))


def test_cumprod_gradient_with_zeros_passes_gradcheck():
    rng = np.random.default_rng(29)
    for zeros in ([], [2], [1, 3], [0, 4]):
        a = rng.uniform(0.5, 1.5, (2, 5)) * np.where(rng.random((2, 5)) < 0.5, 1, -1)
        a[:, zeros] = 0.0
        x = kiln.tensor(a).requires_grad_(True)
        assert kiln.autograd.gradcheck(lambda t: kiln.cumprod(t, 1), (x,))


@pytest.mark.parametrize("op, np_op", [(kiln.cumprod, np.cumprod), (kiln.cumsum, np.cumsum)])
def test_long_float32_scans_round_once_per_element_like_pytorch(op, np_op):
    # PyTorch's CPU scans carry float32 in double; a float accumulator drifts by ~n ulps.
    a = np.random.default_rng(31).uniform(0.999, 1.001, (3, 4000)).astype(np.float32)
    expected = np_op(a.astype(np.float64), axis=1).astype(np.float32)
    np.testing.assert_allclose(op(kiln.tensor(a), 1).numpy(), expected, rtol=2e-7, atol=0)
