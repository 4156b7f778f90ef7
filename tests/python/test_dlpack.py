"""DLPack interop (core/dlpack.cpp, python/bind_dlpack.cpp): zero-copy exchange with NumPy
(and PyTorch/CUDA where available), both directions, with the protocol's ownership rules."""

import gc
import warnings
import weakref

import numpy as np
import pytest

import kiln
import kiln.utils.dlpack
from helpers import RNG, rand, requires_gpu

NP_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
             np.float16, np.float32, np.float64]
KILN_DTYPE = {np.bool_: kiln.bool, np.uint8: kiln.uint8, np.int8: kiln.int8,
              np.int16: kiln.int16, np.int32: kiln.int32, np.int64: kiln.int64,
              np.float16: kiln.float16, np.float32: kiln.float32, np.float64: kiln.float64}


def np_address(a):
    return a.__array_interface__["data"][0]


def different_values(a):
    """Values of a's dtype that differ from a everywhere."""
    return ~a if a.dtype == np.bool_ else (a + 1).astype(a.dtype)


# --- NumPy -> kiln ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_to_kiln_shares_memory(dtype):
    arr = rand(3, 4, dtype=dtype)
    t = kiln.from_dlpack(arr)
    assert t.dtype == KILN_DTYPE[dtype]
    assert tuple(t.shape) == (3, 4)
    assert t.data_ptr() == np_address(arr)
    np.testing.assert_array_equal(t.numpy(), arr)
    new = different_values(arr)
    arr[...] = new
    np.testing.assert_array_equal(t.numpy(), new)


@pytest.mark.parametrize("view", ["transposed", "stepped", "reversed", "reversed_2d", "broadcast"])
def test_numpy_views_to_kiln(view):
    base = rand(6, 8)
    arr = {"transposed": base.T, "stepped": base[1::2, ::3], "reversed": base[::-1],
           "reversed_2d": base[::-2, 5:0:-2], "broadcast": np.broadcast_to(base[0], (3, 8))}[view]
    if view == "broadcast":  # NumPy marks it read-only (versioned flags); kiln cannot enforce it
        with pytest.warns(UserWarning, match=r"\[from_dlpack\].*read-only"):
            t = kiln.from_dlpack(arr)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            t = kiln.from_dlpack(arr)
    assert tuple(t.stride()) == tuple(s // 8 for s in arr.strides)
    np.testing.assert_array_equal(t.numpy(), arr)
    # kiln kernels read the foreign layout correctly, negative strides included.
    np.testing.assert_allclose(t.clone().numpy(), arr)
    np.testing.assert_allclose((t * 2 + 1).numpy(), arr * 2 + 1)
    np.testing.assert_allclose(t.sum().item(), arr.sum())
    if view != "broadcast":
        before = arr.copy()
        t.mul_(3)
        np.testing.assert_allclose(arr, before * 3)


def test_numpy_zero_dim_and_empty():
    t = kiln.from_dlpack(np.array(3.5, dtype=np.float32))
    assert t.dim() == 0 and t.dtype == kiln.float32 and t.item() == 3.5
    e = kiln.from_dlpack(np.zeros((0, 3), dtype=np.int32))
    assert tuple(e.shape) == (0, 3) and e.dtype == kiln.int32 and e.numel() == 0


def test_numpy_producer_lifetime():
    arr = np.arange(12.0).reshape(3, 4).copy()  # owns its memory: the view's base is arr
    alive = weakref.ref(arr)
    t = kiln.from_dlpack(arr[:, 1:])
    del arr
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(t.numpy(), np.arange(12.0).reshape(3, 4)[:, 1:])
    view = t[1]
    del t
    gc.collect()
    assert alive() is not None  # a view of the import keeps the producer's memory
    np.testing.assert_array_equal(view.numpy(), [5.0, 6.0, 7.0])
    del view
    gc.collect()
    assert alive() is None  # the producer's deleter ran with the last kiln reference


def test_numpy_capsule_consumed_once():
    arr = np.arange(4)
    capsule = arr.__dlpack__()
    t = kiln.from_dlpack(capsule)
    assert "used_dltensor" in repr(capsule)
    np.testing.assert_array_equal(t.numpy(), arr)
    with pytest.raises(RuntimeError, match=r"\[from_dlpack\] .*already consumed"):
        kiln.from_dlpack(capsule)


@pytest.mark.parametrize("dtype", [np.complex64, np.uint16])
def test_numpy_unsupported_dtype_releases_producer(dtype):
    arr = np.ones(3, dtype=dtype)
    alive = weakref.ref(arr)
    with pytest.raises(RuntimeError, match=r"\[from_dlpack\] unsupported DLPack dtype"):
        kiln.from_dlpack(arr)
    del arr
    gc.collect()
    assert alive() is None  # the unconsumed capsule freed its struct


# --- kiln -> NumPy ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_kiln_to_numpy_shares_memory(dtype):
    t = kiln.tensor(rand(2, 5, dtype=dtype))
    a = np.from_dlpack(t)
    assert a.dtype == dtype and a.shape == (2, 5)
    assert np_address(a) == t.data_ptr()
    np.testing.assert_array_equal(a, t.numpy())
    if dtype == np.bool_:
        t.logical_not_()
    else:
        t.add_(1)
    np.testing.assert_array_equal(a, t.numpy())


@pytest.mark.parametrize("view", ["transposed", "stepped", "offset", "expanded"])
def test_kiln_views_to_numpy(view):
    src = rand(4, 6)
    base = kiln.tensor(src)
    t = {"transposed": base.t(), "stepped": base[1:, ::2], "offset": base[2],
         "expanded": base[0].expand(3, 6)}[view]
    expect = {"transposed": src.T, "stepped": src[1:, ::2], "offset": src[2],
              "expanded": np.broadcast_to(src[0], (3, 6))}[view]
    a = np.from_dlpack(t)
    assert a.strides == tuple(8 * s for s in t.stride())
    assert np_address(a) == t.data_ptr()
    np.testing.assert_array_equal(a, expect)
    base.mul_(-1)
    np.testing.assert_array_equal(a, -expect)


def test_kiln_zero_dim_and_empty_to_numpy():
    a = np.from_dlpack(kiln.tensor(2.5))
    assert a.shape == () and a.dtype == np.float32 and a == 2.5
    e = np.from_dlpack(kiln.empty(0, 3, dtype=kiln.int64))
    assert e.shape == (0, 3) and e.dtype == np.int64


def test_kiln_export_lifetime():
    # A kiln tensor over NumPy memory: its storage holds the array, so the array lives
    # exactly as long as kiln's storage, which the exported struct keeps alive.
    arr = np.arange(6.0)
    alive = weakref.ref(arr)
    t = kiln.from_numpy(arr)
    del arr
    out = np.from_dlpack(t[1:])
    del t
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(out, np.arange(1.0, 6.0))
    del out
    gc.collect()
    assert alive() is None  # NumPy called kiln's deleter


def test_unconsumed_kiln_capsule_releases_storage():
    arr = np.arange(3.0)
    alive = weakref.ref(arr)
    t = kiln.from_numpy(arr)
    del arr
    capsule = t.__dlpack__(max_version=(1, 0))
    del t
    gc.collect()
    assert alive() is not None
    del capsule
    gc.collect()
    assert alive() is None


def test_bfloat16_to_numpy_fails_in_numpy():
    t = kiln.ones(3, dtype=kiln.bfloat16)
    # kiln exports kDLBfloat; NumPy has no bfloat16 and refuses the capsule.
    with pytest.raises((BufferError, RuntimeError), match="(?i)dtype"):
        np.from_dlpack(t)


def test_requires_grad_export_refused():
    t = kiln.ones(3, requires_grad=True)
    msg = r"\[__dlpack__\] Can't export tensors that require gradient, use tensor.detach\(\)"
    with pytest.raises(BufferError, match=msg):
        t.__dlpack__()
    with pytest.raises(BufferError, match=msg):
        np.from_dlpack(t * 2)
    np.testing.assert_array_equal(np.from_dlpack(t.detach()), np.ones(3, dtype=np.float32))


def test_capsule_names_and_device():
    t = kiln.arange(4)
    assert '"dltensor"' in repr(t.__dlpack__())
    assert '"dltensor"' in repr(t.__dlpack__(max_version=(0, 8)))
    assert '"dltensor_versioned"' in repr(t.__dlpack__(max_version=(1, 0)))
    assert '"dltensor"' in repr(kiln.utils.dlpack.to_dlpack(t))
    device = t.__dlpack_device__()
    assert device == (kiln.utils.dlpack.DLDeviceType.kDLCPU, 0) == (1, 0)
    assert isinstance(device[0], kiln.utils.dlpack.DLDeviceType)


def test_copy_and_dl_device_arguments():
    t = kiln.arange(5.0)
    copied = np.from_dlpack(t, copy=True)
    copied[0] = 100.0
    assert t[0].item() == 0.0
    shared = np.from_dlpack(t, copy=False)
    shared[0] = 7.0
    assert t[0].item() == 7.0
    same = kiln.from_dlpack(t.__dlpack__(dl_device=(1, 0), copy=False))
    assert same.data_ptr() == t.data_ptr()
    with pytest.raises(RuntimeError, match=r"\[__dlpack__\] unsupported DLPack device type kDLROCM"):
        t.__dlpack__(dl_device=(10, 0))
    with pytest.raises(TypeError, match=r"\[__dlpack__\] copy must be a bool"):
        t.__dlpack__(copy="yes")
    with pytest.raises(TypeError, match=r"\[__dlpack__\] a DLPack device is a \(device_type, "):
        t.__dlpack__(dl_device=(1,))
    with pytest.raises(TypeError, match=r"\[__dlpack__\] the device type must be a 64-bit int"):
        t.__dlpack__(dl_device=("cpu", 0))
    with pytest.raises(TypeError, match=r"\[__dlpack__\] max_version must be a \(major, minor\)"):
        t.__dlpack__(max_version="1.0")


def test_cpu_stream_argument():
    t = kiln.arange(3)
    kiln.from_dlpack(t.__dlpack__(stream=-1))
    with pytest.raises(BufferError, match=r"\[__dlpack__\] stream must be None for a CPU tensor"):
        t.__dlpack__(stream=5)
    with pytest.raises(TypeError, match=r"\[__dlpack__\] stream must be ``int``"):
        t.__dlpack__(stream=1.5)


# --- kiln -> kiln and protocol edge cases --------------------------------------------------

@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float32, kiln.bool, kiln.int16])
def test_kiln_round_trip(dtype):
    base = kiln.tensor(rand(3, 4)).to(dtype)
    view = base[1:, ::2]
    for out in (kiln.from_dlpack(view), kiln.utils.dlpack.from_dlpack(kiln.to_dlpack(view)),
                kiln.from_dlpack(view.__dlpack__(max_version=(1, 0)))):
        assert out.dtype == dtype
        assert out.data_ptr() == view.data_ptr()
        # kiln's own struct is unwrapped back to its storage: same offset, same buffer.
        assert out.storage_offset() == view.storage_offset() == 4
        assert tuple(out.stride()) == tuple(view.stride())
        np.testing.assert_array_equal(out.float().numpy(), view.float().numpy())
    out.fill_(0)
    assert not base[1:, ::2].any().item()


def test_kiln_capsule_consumed_twice():
    capsule = kiln.to_dlpack(kiln.arange(3))
    kiln.from_dlpack(capsule)
    with pytest.raises(RuntimeError, match=r"\[from_dlpack\] .*already consumed"):
        kiln.utils.dlpack.from_dlpack(capsule)


def test_from_dlpack_bad_inputs():
    with pytest.raises(RuntimeError, match=r"\[from_dlpack\] expected an object with __dlpack__"):
        kiln.from_dlpack([1, 2, 3])

    class OnRocm:
        exported = False

        def __dlpack_device__(self):
            return (10, 0)

        def __dlpack__(self, **kwargs):
            OnRocm.exported = True
            return np.arange(3).__dlpack__()

    with pytest.raises(RuntimeError, match=r"\[from_dlpack\] unsupported DLPack device type kDLROCM"):
        kiln.from_dlpack(OnRocm())
    assert not OnRocm.exported  # refused before asking for a capsule

    class NotACapsule:
        def __dlpack__(self, **kwargs):
            return 3

    with pytest.raises(RuntimeError, match=r"\[from_dlpack\] NotACapsule.__dlpack__\(\) returned int"):
        kiln.from_dlpack(NotACapsule())


def test_legacy_producer_without_max_version():
    arr = RNG.standard_normal(5)

    class Legacy:  # a DLPack < 1.0 producer: no max_version keyword
        def __dlpack_device__(self):
            return arr.__dlpack_device__()

        def __dlpack__(self, stream=None):
            return arr.__dlpack__()

    t = kiln.from_dlpack(Legacy())
    assert t.data_ptr() == np_address(arr)
    np.testing.assert_array_equal(t.numpy(), arr)


# --- PyTorch and CUDA (the GPU machine) ----------------------------------------------------

def test_torch_cpu_interop():
    torch = pytest.importorskip("torch")
    k = kiln.tensor(rand(3, 4, dtype=np.float32)).t()
    tt = torch.from_dlpack(k)
    assert tt.data_ptr() == k.data_ptr() and tt.stride() == tuple(k.stride())
    tt.add_(1)
    np.testing.assert_array_equal(tt.numpy(), k.numpy())
    src = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    back = kiln.from_dlpack(src)
    assert back.dtype == kiln.bfloat16 and back.data_ptr() == src.data_ptr()
    back.mul_(2)
    np.testing.assert_array_equal(src.float().numpy(), back.float().numpy())


def _slow_cuda_result(n=2048, steps=30):
    """All ones, computed slowly on the GPU (still queued when this returns): full(1/n) is a
    fixed point of x @ x, exactly, as 1/n is a power of two."""
    x = kiln.full((n, n), 1.0 / n, device="cuda")
    for _ in range(steps):
        x = x @ x
    return x * n


@requires_gpu
def test_cuda_kiln_to_torch_shares_memory_and_orders_streams():
    torch = pytest.importorskip("torch")
    side = kiln.cuda.Stream()
    with kiln.cuda.stream(side):
        x = _slow_cuda_result()
        # torch consumes on its current stream (the legacy default, stream=1): it must wait
        # for the matmul chain still queued on kiln's side stream.
        y = torch.from_dlpack(x)
        first = y[0, :4].clone()
    assert y.device.type == "cuda" and y.data_ptr() == x.data_ptr()
    torch.cuda.synchronize()
    np.testing.assert_allclose(first.cpu().numpy(), x[0, :4].cpu().numpy())
    np.testing.assert_allclose(first.cpu().numpy(), np.ones(4), rtol=1e-3)
    y.add_(1)
    torch.cuda.synchronize()
    np.testing.assert_allclose(x[0, :4].cpu().numpy(), np.full(4, 2.0), rtol=1e-3)


@requires_gpu
def test_cuda_torch_to_kiln_shares_memory_and_orders_streams():
    torch = pytest.importorskip("torch")
    ts = torch.cuda.Stream()
    with torch.cuda.stream(ts):
        a = torch.full((2048, 2048), 1.0 / 2048, device="cuda")
        for _ in range(30):
            a = a @ a
        a = a * 2048
        # kiln passes its current stream; torch makes it wait for ts (its current stream).
        k = kiln.from_dlpack(a)
    assert k.device.type == "cuda" and k.data_ptr() == a.data_ptr()
    assert k.__dlpack_device__() == (kiln.utils.dlpack.DLDeviceType.kDLCUDA, k.device.index)
    np.testing.assert_allclose(k[0, :4].cpu().numpy(), np.ones(4), rtol=1e-3)
    k.mul_(3)
    kiln.cuda.synchronize()
    np.testing.assert_allclose(a[0, :4].cpu().numpy(), np.full(4, 3.0), rtol=1e-3)
    b = torch.arange(10, device="cuda")[::2]
    kb = kiln.from_dlpack(b)
    assert kb.dtype == kiln.int64 and tuple(kb.stride()) == (2,)
    np.testing.assert_array_equal(kb.cpu().numpy(), [0, 2, 4, 6, 8])


@requires_gpu
def test_cuda_consumer_stream_waits_for_kiln():
    side, consumer = kiln.cuda.Stream(), kiln.cuda.Stream()
    with kiln.cuda.stream(side):
        x = _slow_cuda_result()
        capsule = x.__dlpack__(stream=consumer.cuda_stream, max_version=(1, 0))
    with kiln.cuda.stream(consumer):
        first = kiln.from_dlpack(capsule)[0, :4].clone()
    kiln.cuda.synchronize()
    np.testing.assert_allclose(first.cpu().numpy(), np.ones(4), rtol=1e-3)
    for stream in (None, 1, 2, -1):
        kiln.from_dlpack(x.__dlpack__(stream=stream))
    with pytest.raises(ValueError, match=r"\[__dlpack__\] stream=0 is not valid for CUDA"):
        x.__dlpack__(stream=0)


@requires_gpu
def test_cuda_capsule_keeps_memory_until_deleter():
    x = kiln.empty(1 << 20, device="cuda")
    before = kiln.cuda.memory_allocated()
    capsule = x.__dlpack__()
    del x
    gc.collect()
    assert kiln.cuda.memory_allocated() == before
    del capsule
    gc.collect()
    assert kiln.cuda.memory_allocated() == before - 4 * (1 << 20)


@requires_gpu
def test_cuda_export_to_cpu_device():
    x = kiln.arange(6.0, device="cuda")
    host = kiln.from_dlpack(x.__dlpack__(dl_device=(1, 0), max_version=(1, 0)))
    assert host.device.type == "cpu"
    np.testing.assert_array_equal(host.numpy(), np.arange(6.0, dtype=np.float32))
    with pytest.raises(BufferError, match=r"\[__dlpack__\] .* needs a copy, but copy=False"):
        x.__dlpack__(dl_device=(1, 0), copy=False)
