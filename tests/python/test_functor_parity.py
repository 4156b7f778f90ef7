"""Every shared functor of ops/math/ gives the same results on the CPU and CUDA, for every
dtype, including the edge values (NaN, inf, -0, zero divisors, INT_MIN / -1): the unary,
predicate, binary and comparison functors (Note [Shared elementwise functors],
ops/math/functors.h), the fused activation gradients behind them, and the scan functors (Note
[Scan functors]). The sweeps iterate kiln._C._op_table(), so a new table entry is swept without
being named here. Integer division by zero raises the same RuntimeError on both devices
(deferred to the next sync on CUDA)."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import requires_gpu

FLOATS = [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16]
INTS = [kiln.int64, kiln.int32, kiln.int16, kiln.int8, kiln.uint8]
ALL = FLOATS + INTS + [kiln.bool]

# Ops with parameters, called the way users call them; the rest are kiln.<name>(x).
UNARY_CALLS = {
    "gelu": lambda x: F.gelu(x),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "elu": lambda x: F.elu(x, 0.7),
    "softplus": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    "nan_to_num": lambda x: kiln.nan_to_num(x, nan=1.5, posinf=9.0, neginf=-9.0),
    "clamp": lambda x: kiln.clamp(x, -1, 2),
    "polygamma": lambda x: kiln.polygamma(2, x),
    "i1": lambda x: kiln.special.i1(x),
}


def sample(dtype):
    """Values that exercise each functor's branches in `dtype`."""
    if dtype == kiln.bool:
        return kiln.tensor([True, False, True, False, False, True])
    if dtype.is_floating_point:
        vals = [-3.5, -2.0, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.5, 7.0,
                float("nan"), float("inf"), -float("inf")]
        return kiln.tensor(vals, dtype=dtype)
    info = kiln.iinfo(dtype)
    vals = [0, 1, 2, 3, 7, 100, info.max, info.min]
    if info.min < 0:
        vals += [-1, -2, -3, -7, -100]
    return kiln.tensor(vals, dtype=dtype)


def unary_fn(name):
    return UNARY_CALLS.get(name) or getattr(kiln, name)


# The fused activation gradients (ops/op_table.h: KILN_BINARY_GRAD_OPS) are internal: each is
# reached through the backward of its activation when no graph of the backward is built.
GRAD_CALLS = {
    "gelu_backward": F.gelu,
    "gelu_tanh_backward": lambda x: F.gelu(x, approximate="tanh"),
    "silu_backward": F.silu,
    "sigmoid_backward": kiln.sigmoid,
    "tanh_backward": kiln.tanh,
    "relu_backward": kiln.relu,
}

SCAN_SIGNATURE = kiln._C._op_table()["scan"]


def run(fn, *args):
    """(result, None) or (None, exception type) of fn(*args), results read back to the host."""
    try:
        out = fn(*args)
        return out.cpu(), None
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:
        return None, type(e)


def same(cpu, gpu, dtype):
    assert gpu.dtype == cpu.dtype and tuple(gpu.shape) == tuple(cpu.shape)
    if cpu.dtype in (kiln.bool, kiln.uint8, kiln.int8, kiln.int16, kiln.int32, kiln.int64):
        np.testing.assert_array_equal(gpu.numpy(), cpu.numpy())
        return
    # CUDA's libm and glibc may differ in the last bits of transcendental functions.
    tol = {kiln.float64: 1e-12, kiln.float32: 2e-6}.get(cpu.dtype, 1e-2)
    np.testing.assert_allclose(gpu.double().numpy(), cpu.double().numpy(), rtol=tol, atol=tol,
                               equal_nan=True)


def test_every_table_op_has_a_sweep_case():
    table = kiln._C._op_table()
    for name in table["unary"]:
        assert callable(unary_fn(name)), name
    for name in table["binary"]:
        assert callable(getattr(kiln, name)), name
    assert set(table["binary_grad"]) == set(GRAD_CALLS)
    for name in table["scan"]:
        assert callable(getattr(kiln, name)), name


# ---------------------------------------------------------------- CPU semantics of the functors


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int32, kiln.int8, kiln.uint8])
@pytest.mark.parametrize("name,word", [("floor_divide", "division"), ("remainder", "modulo"),
                                       ("fmod", "modulo")])
def test_cpu_integer_division_by_zero_raises(name, word, dtype):
    x, y = kiln.tensor([4, 5], dtype=dtype), kiln.tensor([2, 0], dtype=dtype)
    with pytest.raises(RuntimeError, match=rf"\[{name}\] ZeroDivisionError: integer {word} by zero"):
        getattr(kiln, name)(x, y)


def test_floor_rules_follow_python_signs():
    a = np.array([-7, 7, -7, 7, -8, 0], dtype=np.int64)
    b = np.array([2, -2, -2, 2, -1, 3], dtype=np.int64)
    x, y = kiln.tensor(a), kiln.tensor(b)
    assert kiln.floor_divide(x, y).tolist() == (a // b).tolist()
    assert kiln.remainder(x, y).tolist() == (a % b).tolist()
    assert kiln.fmod(x, y).tolist() == np.fmod(a, b).tolist()
    big = kiln.tensor([-(2 ** 63)], dtype=kiln.int64)
    assert kiln.floor_divide(big, kiln.tensor([-1])).tolist() == [-(2 ** 63)]  # wraps, no trap
    assert kiln.remainder(big, kiln.tensor([-1])).tolist() == [0]


def test_integer_pow_of_tensor_exponents_rounds_towards_zero():
    base = kiln.tensor([2, 1, -1, -1, 0, 3, -2], dtype=kiln.int64)
    exp = kiln.tensor([-1, -3, -3, -2, 2, 3, 3], dtype=kiln.int64)
    assert kiln.pow(base, exp).tolist() == [0, 1, -1, 1, 0, 27, -8]


def test_integer_pow_of_a_negative_number_raises():
    with pytest.raises(RuntimeError, match=r"\[pow\] Integers to negative integer powers"):
        kiln.tensor([2, 3]) ** -1
    with pytest.raises(RuntimeError, match=r"\[pow\] Integers to negative integer powers"):
        kiln.tensor([2, 3]).pow_(-2)
    assert (kiln.tensor([2.0]) ** -1).tolist() == [0.5]  # floats are fine


def test_nan_aware_maximum_minimum():
    nan = float("nan")
    x, y = kiln.tensor([1.0, nan, nan, -0.5]), kiln.tensor([nan, 2.0, nan, 3.0])
    for fn in (kiln.maximum, kiln.minimum):
        got = fn(x, y).tolist()
        assert all(math.isnan(v) for v in got[:3])
    assert kiln.maximum(x, y).tolist()[3] == 3.0 and kiln.minimum(x, y).tolist()[3] == -0.5


# ---------------------------------------------------------------- CPU vs CUDA sweep


@requires_gpu
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", sorted(kiln._C._op_table()["unary"]))
def test_unary_functor_same_on_cpu_and_cuda(name, dtype):
    fn, x = unary_fn(name), sample(dtype)
    cpu, cpu_err = run(fn, x)
    gpu, gpu_err = run(fn, x.to("cuda"))
    assert cpu_err == gpu_err
    if cpu_err is None:
        same(cpu, gpu, dtype)


@requires_gpu
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", sorted(kiln._C._op_table()["binary"]))
def test_binary_functor_same_on_cpu_and_cuda(name, dtype):
    fn, x = getattr(kiln, name), sample(dtype)
    y = x.flip(0)  # every pair of edge values meets somewhere, zero divisors included
    if not dtype.is_floating_point and dtype != kiln.bool and name in ("floor_divide",
                                                                       "remainder", "fmod"):
        y = kiln.where(y == 0, kiln.ones_like(y), y)  # division by zero: its own test below
    if name == "pow" and not dtype.is_floating_point and dtype != kiln.bool:
        y = kiln.remainder(y, 5)  # keeps integer powers from overflowing differently
    cpu, cpu_err = run(fn, x, y)
    gpu, gpu_err = run(fn, x.to("cuda"), y.to("cuda"))
    assert cpu_err == gpu_err
    if cpu_err is None:
        same(cpu, gpu, dtype)
    # A Python number on one side (it rides in the CUDA kernel's arguments).
    cpu, cpu_err = run(lambda t: fn(t, 3), x)
    gpu, gpu_err = run(lambda t: fn(t, 3), x.to("cuda"))
    assert cpu_err == gpu_err
    if cpu_err is None:
        same(cpu, gpu, dtype)


@requires_gpu
@pytest.mark.parametrize("name,word", [("floor_divide", "division"), ("remainder", "modulo"),
                                       ("fmod", "modulo")])
def test_cuda_integer_division_by_zero_raises_at_the_next_sync(name, word):
    x = kiln.tensor([4, 5, 6], device="cuda")
    y = kiln.tensor([2, 0, 3], device="cuda")
    out = getattr(kiln, name)(x, y)  # no host sync here: the kernel records the error
    with pytest.raises(RuntimeError, match=rf"\[{name}\] ZeroDivisionError: integer {word} by zero"):
        out.cpu()
    # The record was cleared and the device stays usable.
    assert (x + 1).cpu().tolist() == [5, 6, 7]
    assert getattr(kiln, name)(x, kiln.tensor(3, device="cuda")).cpu().tolist() == \
        getattr(kiln, name)(x.cpu(), kiln.tensor(3)).tolist()


@requires_gpu
def test_cuda_division_by_zero_needs_no_host_sync():
    x = kiln.tensor([4, 5], device="cuda")
    kiln.cuda.set_sync_debug_mode("error")
    try:
        out = x // kiln.tensor([0, 1], device="cuda")
    finally:
        kiln.cuda.set_sync_debug_mode("default")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        kiln.cuda.synchronize()
    assert out.cpu().tolist()[1] == 5


def activation_grad(name, x):
    """x's gradient through the activation whose backward is the fused `name`, upstream
    gradients of mixed sign, no graph of the backward (so the fused functor runs)."""
    x = x.detach().requires_grad_(True)
    y = GRAD_CALLS[name](x)
    g = kiln.linspace(-1.5, 2.0, y.numel(), dtype=y.dtype).reshape(y.shape).to(y.device)
    y.backward(g)
    return x.grad


@requires_gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", sorted(kiln._C._op_table()["binary_grad"]))
def test_activation_grad_functor_same_on_cpu_and_cuda(name, dtype):
    x = sample(dtype)
    cpu, cpu_err = run(lambda t: activation_grad(name, t), x)
    gpu, gpu_err = run(lambda t: activation_grad(name, t), x.to("cuda"))
    assert cpu_err == gpu_err
    if cpu_err is None:
        same(cpu, gpu, dtype)


def scan_values(name, t):
    r = getattr(kiln, name)(t, 0)
    return r.values if SCAN_SIGNATURE[name] == "Indexed" else r


def scan_indices(name, t):
    return getattr(kiln, name)(t, 0).indices


@requires_gpu
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", sorted(kiln._C._op_table()["scan"]))
def test_scan_functor_same_on_cpu_and_cuda(name, dtype):
    x = sample(dtype)
    if SCAN_SIGNATURE[name] == "Accumulate" and dtype in INTS:
        x = kiln.remainder(x, 5)  # keeps integer sums and products from overflowing
    parts = [scan_values] + ([scan_indices] if SCAN_SIGNATURE[name] == "Indexed" else [])
    for part in parts:
        cpu, cpu_err = run(lambda t: part(name, t), x)
        gpu, gpu_err = run(lambda t: part(name, t), x.to("cuda"))
        assert cpu_err == gpu_err
        if cpu_err is None:
            same(cpu, gpu, dtype)
