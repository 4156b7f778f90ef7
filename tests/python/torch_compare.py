"""Runs one call in kiln and in the installed PyTorch on the same device and compares
outputs (values, shape, dtype name, device) and every input's gradient.

A case is `fn(lib, *args)` written once against the shared API (lib is `kiln` or
`torch`), so the same line exercises both libraries. Inputs are NumPy arrays: plain
floating arrays become tensors of the tested dtype (and require grad when the dtype is
float32/float64); `Const` arrays take the tested dtype without requiring grad (weights,
targets); `Fixed` arrays keep their own dtype and never require grad (indices, masks,
integer operands); `Strided` arrays arrive as non-contiguous views."""

import zlib

import numpy as np
import pytest

import kiln
from helpers import requires_gpu

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]
GRAD_DTYPES = ["float32", "float64"]
HALF_DTYPES = ["float16", "bfloat16"]

# (rtol, atol) by result dtype name; other dtypes must match exactly.
TOL = {
    "float64": (1e-10, 1e-10),
    "float32": (1e-5, 1e-5),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}

RNG = np.random.default_rng(20261129)


def reseed(key):
    """Restarts the shared data stream from a seed derived from `key`, so a case's data does
    not depend on which other tests were collected or ran before it."""
    RNG.bit_generator.state = np.random.default_rng(zlib.crc32(key.encode())).bit_generator.state


@pytest.fixture(autouse=True)
def seeded_data(request):
    """Per-test data seed (autouse in every module that imports it)."""
    reseed(f"{request.module.__name__}::{request.node.name}")


def U(*shape, low=-2.0, high=2.0):
    """Uniform float64 data, never all zeros."""
    return RNG.uniform(low, high, size=shape)


def distinct(*shape):
    """Values in +-[0.5, 1.5) with magnitudes 1/max(n, 64) apart, which stay distinct after
    rounding to bfloat16 for n < 128: no zeros for prod/cumprod, no ties for max/sort/median
    indices."""
    n = int(np.prod(shape))
    magnitude = 0.5 + RNG.permutation(n) / max(n, 64)
    return (magnitude * np.where(RNG.random(n) > 0.5, 1.0, -1.0)).reshape(shape)


def ints(*shape, low=-5, high=6, dtype=np.int64):
    return RNG.integers(low, high, size=shape).astype(dtype)


def bools(*shape):
    return RNG.random(shape) > 0.5


class Fixed:
    """An input that keeps its NumPy dtype and never requires grad."""

    def __init__(self, array):
        self.array = np.asarray(array)


class Const:
    """A floating input of the tested dtype that never requires grad (weights, targets)."""

    def __init__(self, array):
        self.array = np.asarray(array)


class Strided:
    """A floating input passed as a non-contiguous view: "T" builds it from reversed-axes
    storage and permutes back, "step" slices every other element of a wider last axis."""

    def __init__(self, array, kind="T"):
        self.array = np.asarray(array)
        self.kind = kind


def dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def lib_dtype(lib, name):
    return getattr(lib, name)


def is_float_name(name):
    return name in TOL


def _make(lib, spec, device, dtype):
    """Returns (leaf or None, argument) for one input spec."""
    if isinstance(spec, Fixed):
        return None, lib.tensor(spec.array, device=device)
    dt = lib_dtype(lib, dtype)
    if isinstance(spec, Const):
        return None, lib.tensor(spec.array, dtype=dt, device=device)
    grad = dtype in GRAD_DTYPES
    if isinstance(spec, Strided):
        a = spec.array
        if spec.kind == "T":
            order = tuple(reversed(range(a.ndim)))
            leaf = lib.tensor(np.ascontiguousarray(a.transpose(order)), dtype=dt, device=device,
                              requires_grad=grad)
            view = leaf.permute(*order)
        else:
            # The skipped elements differ, so reading them by mistake shows.
            wide = np.stack([a, a + 0.5], axis=-1).reshape(a.shape[:-1] + (2 * a.shape[-1],))
            leaf = lib.tensor(wide, dtype=dt, device=device, requires_grad=grad)
            view = leaf[..., ::2]
        assert not view.is_contiguous() or a.ndim < 2
        return leaf, view
    leaf = lib.tensor(np.asarray(spec), dtype=dt, device=device, requires_grad=grad)
    return leaf, leaf


def to_lib(lib, spec, device, dtype="float64"):
    """One input spec as a tensor of `lib` (no grad)."""
    if isinstance(spec, Fixed):
        return lib.tensor(spec.array, device=device)
    array = spec.array if isinstance(spec, (Const, Strided)) else np.asarray(spec)
    return lib.tensor(array, dtype=lib_dtype(lib, dtype), device=device)


def to_kiln(spec, device, dtype="float64"):
    return to_lib(kiln, spec, device, dtype)


def to_torch(spec, device, dtype="float64"):
    return to_lib(torch, spec, device, dtype)


def to_numpy(t):
    t = t.detach().cpu()
    if dtype_name(t.dtype) == "bfloat16":
        t = t.float()
    return t.numpy()


def _flatten(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flatten(o)]
    return [out]


def compare(k, t, tol=None, what="output"):
    """Asserts a kiln result equals a torch result (tensors, nested tuples or numbers)."""
    ks, ts = _flatten(k), _flatten(t)
    assert len(ks) == len(ts), (what, len(ks), len(ts))
    for i, (kv, tv) in enumerate(zip(ks, ts)):
        label = f"{what}[{i}]"
        if isinstance(tv, torch.Tensor):
            assert isinstance(kv, kiln.Tensor), (label, type(kv))
            assert tuple(kv.shape) == tuple(tv.shape), (label, kv.shape, tv.shape)
            assert dtype_name(kv.dtype) == dtype_name(tv.dtype), (label, kv.dtype, tv.dtype)
            assert kv.device.type == tv.device.type, (label, kv.device, tv.device)
            name = dtype_name(tv.dtype)
            kn, tn = to_numpy(kv), to_numpy(tv)
        else:
            assert type(kv) is type(tv), (label, type(kv), type(tv))
            name = "float64" if isinstance(tv, float) else ""
            kn, tn = np.asarray(kv), np.asarray(tv)
        if is_float_name(name):
            rtol, atol = tol or TOL[name]
            np.testing.assert_allclose(kn, tn, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=label)
        else:
            np.testing.assert_array_equal(kn, tn, err_msg=label)


def _torch_lacks(err):
    """Skips a case that PyTorch itself has no kernel or derivative for (kiln may)."""
    if "not implemented for" in str(err) or "is not implemented" in str(err):
        pytest.skip(f"PyTorch: {err}")
    raise err


def _run(lib, fn, inputs, device, dtype):
    made = [_make(lib, spec, device, dtype) for spec in inputs]
    return [leaf for leaf, _ in made], fn(lib, *[arg for _, arg in made])


def _cast_floats(out, dtype):
    """out (a tensor or nested tuples/lists of them) with float tensors cast to dtype."""
    if isinstance(out, torch.Tensor):
        return out.detach().to(getattr(torch, dtype)) if out.is_floating_point() else out
    if isinstance(out, (tuple, list)):
        return type(out)(_cast_floats(o, dtype) for o in out)
    return out


def check(fn, inputs, device, dtype="float64", grad=True, tol=None):
    """Runs fn in both libraries; compares outputs and, for float32/float64 with
    `grad`, the gradients of every input under one random upstream gradient."""
    k_leaves, k_out = _run(kiln, fn, inputs, device, dtype)
    try:
        t_leaves, t_out = _run(torch, fn, inputs, device, dtype)
    except (RuntimeError, NotImplementedError) as err:
        if dtype not in ("float16", "bfloat16") or "not implemented for" not in str(err):
            _torch_lacks(err)
        # PyTorch has no half kernel here (trace): its float32 result, rounded, is the reference.
        compare(k_out, _cast_floats(_run(torch, fn, inputs, device, "float32")[1], dtype), tol)
        return
    compare(k_out, t_out, tol)
    if not grad or all(leaf is None for leaf in t_leaves) or dtype not in GRAD_DTYPES:
        return
    outs = [(k, t) for k, t in zip(_flatten(k_out), _flatten(t_out))
            if isinstance(t, torch.Tensor)]
    assert [k.requires_grad for k, _ in outs] == [t.requires_grad for _, t in outs]
    pairs = [(k, t) for k, t in outs if t.requires_grad]
    if not pairs:
        return
    ups = [U(*t.shape) for _, t in pairs]
    k_g = [kiln.tensor(g, dtype=k.dtype, device=device) for g, (k, _) in zip(ups, pairs)]
    t_g = [torch.tensor(g, dtype=t.dtype, device=device) for g, (_, t) in zip(ups, pairs)]
    if len(pairs) == 1:
        pairs[0][0].backward(k_g[0])
    else:
        kiln.autograd.backward([k for k, _ in pairs], k_g)
    try:
        if len(pairs) == 1:
            pairs[0][1].backward(t_g[0])
        else:
            torch.autograd.backward([t for _, t in pairs], t_g)
    except (RuntimeError, NotImplementedError) as err:
        _torch_lacks(err)
    for i, (kl, tl) in enumerate(zip(k_leaves, t_leaves)):
        if tl is None:
            continue
        assert (kl.grad is None) == (tl.grad is None), f"grad presence of input {i}"
        if tl.grad is not None:
            compare(kl.grad, tl.grad, tol, f"grad of input {i}")


def check_raises(fn, inputs, device, dtype="float64"):
    """Both libraries reject the call with the same exception type."""
    with pytest.raises(Exception) as t_err:
        _run(torch, fn, inputs, device, dtype)
    with pytest.raises(type(t_err.value)):
        _run(kiln, fn, inputs, device, dtype)
