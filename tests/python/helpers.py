"""Shared test helpers: run the same function in kiln and a reference
(NumPy here, PyTorch on the GPU machine), forward and backward."""

import random
import socket

import numpy as np

import kiln

RNG = np.random.default_rng(0)

# Tolerances per dtype for comparisons against float64 NumPy references.
TOL = {
    kiln.float64: (1e-10, 1e-10),
    kiln.float32: (1e-5, 1e-5),
    kiln.float16: (1e-2, 1e-2),
    kiln.bfloat16: (5e-2, 5e-2),
}

NP_DTYPE = {
    kiln.float64: np.float64,
    kiln.float32: np.float32,
    kiln.float16: np.float16,
    kiln.int64: np.int64,
    kiln.int32: np.int32,
    kiln.int16: np.int16,
    kiln.int8: np.int8,
    kiln.uint8: np.uint8,
    kiln.bool: np.bool_,
}


def rand(*shape, dtype=np.float64, low=-2.0, high=2.0):
    """Random NumPy data of a given shape (never all zeros)."""
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-5 if np.issubdtype(dtype, np.signedinteger) else 0, 6, size=shape).astype(dtype)
    return RNG.uniform(low, high, size=shape).astype(dtype)


def to_kiln(a, dtype=None, requires_grad=False):
    t = kiln.tensor(a) if dtype is None else kiln.tensor(a, dtype=dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def noncontig(a):
    """The same values as `a`, as a non-contiguous kiln tensor (transposed storage)."""
    t = kiln.tensor(np.ascontiguousarray(np.swapaxes(a, 0, -1))).transpose(0, -1)
    assert not t.is_contiguous() or t.dim() < 2 or min(t.shape) <= 1
    return t


def assert_close(actual, expected, dtype=kiln.float64, atol=None, rtol=None):
    """Compares a kiln tensor (or number) with a NumPy array, values and shape."""
    a_tol, r_tol = TOL.get(dtype, (0, 0))
    atol = a_tol if atol is None else atol
    rtol = r_tol if rtol is None else rtol
    if isinstance(actual, kiln.Tensor):
        assert tuple(actual.shape) == tuple(np.shape(expected)), (actual.shape, np.shape(expected))
        got = actual.detach().float().numpy() if actual.dtype in (kiln.bfloat16,) else actual.detach().numpy()
    else:
        got = np.asarray(actual)
    np.testing.assert_allclose(got.astype(np.float64) if got.dtype != np.bool_ else got,
                               np.asarray(expected).astype(got.dtype if got.dtype == np.bool_ else np.float64),
                               atol=atol, rtol=rtol, equal_nan=True)


def gradcheck(fn, *arrays):
    """Float64 finite-difference check of fn's gradients at the given NumPy inputs."""
    inputs = [kiln.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    assert kiln.autograd.gradcheck(fn, inputs)


def gpu_count():
    return kiln.cuda.device_count()


# CUDA tests run on the GPU machine and skip where there is no GPU (CI).
requires_gpu = __import__("pytest").mark.skipif(gpu_count() == 0, reason="no CUDA device")


def rerun_without_cuda(test_file, test_name):
    """Runs one test in a child pytest with no visible GPU, for the behaviour of
    machines without CUDA on the GPU machine too (instead of skipping it there)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"{test_file}::{test_name}"], capture_output=True, text=True, env=env,
                         cwd=os.path.dirname(os.path.abspath(test_file)), timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "skipped" not in out.stdout, out.stdout[-2000:]


def free_port():
    """A TCP port that is free now, below Linux's ephemeral range (32768+): a port picked by
    binding to 0 comes from that range and an outgoing connection (a store client, NCCL's
    bootstrap) can take it before the test's master listens on it."""
    rng = random.Random()
    for _ in range(100):
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("free_port: no free port in [20000, 32000)")


def np_attention(q, k, v, mask=None, causal=False, scale=None, groups=1):
    """softmax(q k^T * scale + mask) v in float64; a fully masked row gives zeros."""
    k = np.repeat(k, groups, axis=-3) if groups > 1 else k
    v = np.repeat(v, groups, axis=-3) if groups > 1 else v
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones((q.shape[-2], k.shape[-2]), dtype=bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    top = s.max(-1, keepdims=True)
    dead = np.isneginf(top)
    e = np.exp(s - np.where(dead, 0, top))
    w = np.where(dead, 0, e / np.where(dead, 1, e.sum(-1, keepdims=True)))
    return w @ v


def with_threads(n, fn):
    """fn() with kiln running n CPU threads, the previous count restored after."""
    saved = kiln.get_num_threads()
    kiln.set_num_threads(n)
    try:
        return fn()
    finally:
        kiln.set_num_threads(saved)
