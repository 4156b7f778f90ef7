"""Reductions over every layout the reduce kernels see (Note [Reduction layouts] in
ops/reduce.cpp, Note [CUDA reductions] in cuda/reduce.cuh) against NumPy: full reductions of
long tensors, leading / middle / trailing dims of contiguous, transposed and sliced inputs,
every ReduceOp with NaN, and integer, bool and half inputs; on the CPU and on CUDA."""

import numpy as np
import pytest

import kiln
from helpers import requires_gpu

RNG = np.random.default_rng(7)
DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]
OPS = {
    "sum": (lambda x, d, k: x.sum(d, k), lambda a, d, k: a.sum(d, keepdims=k)),
    "prod": (lambda x, d, k: x.prod(d, k) if isinstance(d, int) else x.prod(),
             lambda a, d, k: a.prod(d, keepdims=isinstance(d, int) and k)),
    "amax": (lambda x, d, k: x.amax(() if d is None else d, k),
             lambda a, d, k: a.max(d, keepdims=k)),
    "amin": (lambda x, d, k: x.amin(() if d is None else d, k),
             lambda a, d, k: a.min(d, keepdims=k)),
}


def on(a, device, dtype=None, layout="contiguous"):
    """`a` as a kiln tensor on `device` whose memory is laid out as `layout` says."""
    if layout == "transposed":  # storage holds a with dims 0 and -1 swapped
        return on(np.ascontiguousarray(np.swapaxes(a, 0, -1)), device, dtype).transpose(0, -1)
    if layout == "sliced":  # every other element of the last dim of a larger tensor
        return on(np.repeat(a, 2, axis=-1), device, dtype)[..., ::2]
    if layout == "offset":  # starts one element into its storage (misaligned for vector loads)
        flat = np.concatenate([a.reshape(-1)[:1], a.reshape(-1)])
        return on(flat, device, dtype)[1:].reshape(a.shape)
    return kiln.tensor(a, device=device) if dtype is None else kiln.tensor(a, dtype=dtype,
                                                                           device=device)


def host(t):
    t = t.detach().cpu()
    return (t.float() if t.dtype in (kiln.float16, kiln.bfloat16) else t).numpy()


def check(got, ref, a, axis, rtol):
    """Float comparison with an absolute slack proportional to the summed magnitudes."""
    scale = np.abs(a).sum(axis) if axis is not None or a.ndim else np.abs(a)
    ref = host(ref) if isinstance(ref, kiln.Tensor) else ref
    np.testing.assert_allclose(host(got).astype(np.float64), np.asarray(ref, dtype=np.float64),
                               rtol=rtol, atol=rtol * (np.max(scale, initial=0.0) + 1.0),
                               equal_nan=True)


def floats(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


# ---------------------------------------------------------------- full reductions


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 1023, 4097, 2**20 + 3])
@pytest.mark.parametrize("layout", ["contiguous", "offset"])
def test_full_reduction_of_long_tensors(n, layout, device):
    a = floats(n).astype(np.float32)
    x = on(a, device, layout=layout)
    a64 = a.astype(np.float64)
    check(x.sum(), a64.sum(), a64, None, 1e-5)
    check(x.mean(), a64.mean(), a64 / n, None, 1e-5)
    check(x.amax(), a.max(), a64, None, 0)
    check(x.amin(), a.min(), a64, None, 0)
    check(x.max(), a.max(), a64, None, 0)
    p = RNG.uniform(0.999, 1.001, size=n).astype(np.float32)
    check(on(p, device, layout=layout).prod(), p.astype(np.float64).prod(), p, None, 1e-4)
    b = RNG.random(n) > 1.0 / n  # mostly true, a few false
    assert kiln.all(on(b, device, layout=layout)).item() == b.all()
    assert kiln.any(on(~b, device, layout=layout)).item() == (~b).any()
    assert kiln.all(on(np.ones(n, bool), device)).item()
    assert not kiln.any(on(np.zeros(n, bool), device)).item()
    assert kiln.isfinite(x).all().item()
    assert x.argmax().item() == np.argmax(a) and x.argmin().item() == np.argmin(a)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1023, 2**20 + 3])
def test_full_argmax_ties_and_nan(n, device):
    a = np.zeros(n, np.float32)
    a[[n // 2, n // 5, n - 1]] = 3.0  # ties go to the first occurrence
    a[[n // 3, n - 2]] = -3.0
    x = on(a, device)
    assert x.argmax().item() == n // 5 and x.argmin().item() == n // 3
    values, indices = x.reshape(1, n).max(1)
    assert values.item() == 3.0 and indices.item() == n // 5
    a[[n - 3, n // 4]] = np.nan  # NaN is the extreme of both, first NaN wins
    assert on(a, device).argmax().item() == n // 4 == on(a, device).argmin().item()
    h = on(a, device, kiln.float16)
    assert h.argmax().item() == n // 4
    rows = RNG.standard_normal((3, n)).astype(np.float32)
    rows[1, [n // 7, n - 5]] = 9.0
    np.testing.assert_array_equal(host(on(rows, device).argmax(1)), np.argmax(rows, 1))
    np.testing.assert_array_equal(host(on(rows, device).argmin(-1)), np.argmin(rows, 1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [5, 4097, 2**20 + 3])
def test_nan_propagates_through_full_max_min(n, device):
    a = floats(n).astype(np.float32)
    a[n // 3] = np.nan
    x = on(a, device)
    assert np.isnan(x.amax().item()) and np.isnan(x.amin().item())
    assert np.isnan(x.max().item()) and np.isnan(x.sum().item())
    assert not kiln.isfinite(x).all().item()
    a[n // 3] = np.inf
    assert on(a, device).amax().item() == np.inf


# ---------------------------------------------------------------- reductions over dims

SHAPES_DIMS = [
    ((64, 33), 0),        # bias-gradient shape: leading dim, inner > 1
    ((4096, 24), 0),      # long R, few outputs: R split across blocks
    ((5, 9, 7), 1),       # middle dim
    ((6, 5, 4, 3), (0, 2, 3)),  # batch-norm statistics: reduced runs around a kept one
    ((3, 4, 5, 6, 7), (0, 2, 4)),  # three reduced runs
    ((3, 4, 5, 6), (1, 3)),  # two runs, kept dims at both ends
    ((3, 8, 2100), -1),   # long trailing rows
    ((4, 70000), -1),     # a few long rows, each split across blocks
    ((3, 4096, 24), 1),   # a few outputs per outer index, R split across blocks
    ((1100, 3), 1),       # many tiny rows
    ((300, 100), 1),      # many short rows
    ((7, 1, 6), (0, 1)),  # a reduced size-1 dim
    ((2, 3, 4), (1, 2)),  # trailing run
    ((2, 3, 4), (0, 1)),  # leading run
    ((2, 3, 4), ()),      # nothing reduced: every element its own output
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_over_dims_matches_numpy(shape, dim, layout, keepdim, device):
    a = floats(*shape)
    x = on(a, device, kiln.float64, layout)
    assert x.shape == shape
    axis = dim if dim != () else None
    if dim == ():
        got, ref = x.sum(dim=(), keepdim=keepdim), a.sum(keepdims=keepdim)
    else:
        got, ref = x.sum(dim, keepdim), a.sum(axis, keepdims=keepdim)
    assert got.shape == np.shape(ref)
    check(got, ref, a, axis, 1e-12)
    x32 = on(a.astype(np.float32), device, layout=layout)
    if dim != ():
        check(x32.sum(dim, keepdim), ref, a, axis, 1e-5)
        check(kiln.mean(x32, dim, keepdim), a.mean(axis, keepdims=keepdim), a, axis, 1e-5)


# prod takes one dim (or none), as in PyTorch.
OP_DIMS = [(op, dim) for op in sorted(OPS) for dim in [None, 0, 1, 2, (0, 2)]
           if op != "prod" or not isinstance(dim, tuple)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("op,dim", OP_DIMS)
def test_every_op_over_dims_with_nan(op, dim, layout, device):
    a = floats(6, 70, 5, low=0.8, high=1.2)
    a[1, 3, 2] = np.nan
    a[4, 60, 0] = -np.inf
    kfn, nfn = OPS[op]
    for keepdim in (False, True):
        got = kfn(on(a, device, kiln.float64, layout), dim, keepdim)
        ref = nfn(a, dim if dim is None or isinstance(dim, int) else tuple(dim), keepdim)
        assert got.shape == np.shape(ref)
        np.testing.assert_allclose(host(got), ref, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_all_any_over_dims(dim, layout, device):
    for p_true in (0.03, 0.5, 0.97):
        b = RNG.random((9, 40, 6)) < p_true
        x = on(b, device, layout=layout)
        axis = dim if dim is None or isinstance(dim, int) else tuple(dim)
        for kop, nop in ((kiln.all, np.all), (kiln.any, np.any)):
            got = kop(x, dim, True) if dim is not None else kop(x)
            ref = nop(b, axis, keepdims=dim is not None)
            assert got.dtype == kiln.bool
            np.testing.assert_array_equal(host(got), ref)
    # Non-bool inputs test against zero; uint8 stays uint8.
    u = RNG.integers(0, 3, size=(9, 40, 6)).astype(np.uint8)
    got = kiln.all(on(u, device), 1)
    assert got.dtype == kiln.uint8
    np.testing.assert_array_equal(host(got), u.all(1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("np_dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("dim", [None, 0, 1])
def test_integer_inputs(np_dtype, dim, device):
    m = RNG.integers(0, 50, size=(5, 6, 7)).astype(np_dtype)
    got = on(m, device).sum((0, 2))
    np.testing.assert_array_equal(host(got), m.astype(np.int64).sum((0, 2)))
    a = RNG.integers(0 if np_dtype == np.uint8 else -50, 50, size=(2100, 3)).astype(np_dtype)
    x = on(a, device)
    s = x.sum(dim) if dim is not None else x.sum()
    assert s.dtype == kiln.int64
    np.testing.assert_array_equal(host(s), a.astype(np.int64).sum(dim))
    for kop, nop in ((kiln.amax, np.max), (kiln.amin, np.min)):
        got = kop(x, () if dim is None else dim)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(host(got), nop(a, dim))
    small = (a[:7] % 3).astype(np_dtype)
    np.testing.assert_array_equal(host(on(small, device).prod(0)),
                                  small.astype(np.int64).prod(0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("shape,dim", [((4097,), None), ((2**20 + 3,), None), ((512, 70), 0),
                                       ((70, 512), 1), ((8, 30, 9), (0, 2))])
def test_half_inputs_accumulate_in_float(dtype, shape, dim, device):
    axis = dim if dim is None or isinstance(dim, int) else tuple(dim)
    count = np.prod(shape) // np.zeros(shape).sum(axis, keepdims=True).size
    # Sums reach about 8192 at most (float16's range ends at 65504), well past 2048, where a
    # float16 accumulator stops growing by values below 1.
    high = min(2.0, 16384.0 / count)
    x = on(floats(*shape, low=0.0, high=high).astype(np.float32), device, dtype)
    a = host(x).astype(np.float64)  # the values x holds after rounding
    s = x.sum(dim) if dim is not None else x.sum()
    assert s.dtype == dtype
    check(s, a.sum(axis), a, axis, 1e-2)
    m = kiln.mean(x, dim) if dim is not None else x.mean()
    check(m, a.mean(axis), a / a.size, axis, 1e-2)
    check(kiln.amax(x, () if dim is None else dim), a.max(axis), a, axis, 0)
    check(s.float(), x.float().sum(dim) if dim is not None else x.float().sum(), a, axis, 1e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_reductions(device):
    z = on(np.zeros((0, 5)), device)
    np.testing.assert_array_equal(host(z.sum(0)), np.zeros(5))
    np.testing.assert_array_equal(host(z.prod(0)), np.ones(5))
    assert host(z.sum(1)).shape == (0,)
    assert kiln.all(on(np.zeros((4, 0), bool), device), 1).cpu().numpy().all()
    assert not kiln.any(on(np.zeros((4, 0), bool), device), 1).cpu().numpy().any()
    with pytest.raises(IndexError, match=r"\[amax\]"):
        z.amax(0)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_gradient_through_fast_layouts(device):
    a = floats(8, 5)
    x = on(a, device, kiln.float64).requires_grad_(True)
    (x.sum(0) * kiln.arange(5, dtype=kiln.float64, device=device)).sum().backward()
    np.testing.assert_array_equal(host(x.grad), np.tile(np.arange(5.0), (8, 1)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_benchmark_shapes_match_torch(dtype, device):
    torch = pytest.importorskip("torch")
    cases = [((2**20 + 3,), None), ((512, 256), 0), ((512, 256), -1), ((16, 8, 12, 12), (0, 2, 3))]
    for shape, dim in cases:
        a = RNG.standard_normal(shape).astype(np.float32)
        kx = kiln.tensor(a, device=device).to(getattr(kiln, dtype))
        tx = torch.tensor(a, device=device).to(getattr(torch, dtype))
        for name in ("sum", "amax", "amin"):
            args = () if dim is None else (dim,)
            got, ref = getattr(kx, name)(*args), getattr(tx, name)(*args)
            assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
            ref = ref.float().cpu().numpy()
            axis = None if dim is None else tuple(np.atleast_1d(dim))
            check(got, ref, host(kx).astype(np.float64), axis, 1e-2 if dtype != "float32" else 1e-5)
        assert kiln.isfinite(kx).all().item() == torch.isfinite(tx).all().item()
