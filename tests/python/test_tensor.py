"""Tensor metadata, conversions to Python/NumPy, dtype and device objects."""

import numpy as np
import pytest

import kiln
from helpers import rand


# --- properties --------------------------------------------------------------------


def test_shape_is_size():
    t = kiln.zeros(2, 3)
    assert isinstance(t.shape, kiln.Size) and isinstance(t.shape, tuple)
    assert t.shape == (2, 3) and t.size() == (2, 3)
    assert repr(t.shape) == "kiln.Size([2, 3])" and str(t.size()) == "kiln.Size([2, 3])"
    assert isinstance(t.shape[1:], kiln.Size) and t.shape[1:] == (3,)
    assert t.shape.numel() == 6
    assert repr(kiln.zeros(()).shape) == "kiln.Size([])"


def test_size_stride_dim_numel():
    t = kiln.zeros(2, 3, 4)
    assert t.size(0) == 2 and t.size(-1) == 4
    assert t.stride() == (12, 4, 1) and t.stride(1) == 4 and t.stride(-1) == 1
    assert t.dim() == 3 and t.ndim == 3 and t.numel() == 24 and t.nelement() == 24
    assert len(t) == 2
    s = kiln.zeros(())
    assert s.dim() == 0 and s.numel() == 1 and s.stride() == ()
    with pytest.raises(IndexError):
        t.size(3)
    with pytest.raises(TypeError):
        len(s)


def test_dtype_device_itemsize():
    t = kiln.zeros(3, dtype=kiln.float64)
    assert t.dtype == kiln.float64 and t.dtype is kiln.float64
    assert t.device == kiln.device("cpu") and str(t.device) == "cpu"
    assert t.is_cpu and not t.is_cuda and t.get_device() == -1
    assert t.element_size() == 8 and t.itemsize == 8 and t.nbytes == 24
    assert t.is_floating_point() and not kiln.zeros(1, dtype=kiln.int8).is_floating_point()


def test_is_leaf_and_requires_grad():
    a = kiln.ones(2, requires_grad=True)
    assert a.is_leaf and a.requires_grad
    b = a * 2
    assert not b.is_leaf and b.requires_grad
    c = kiln.ones(2)
    assert c.is_leaf and not c.requires_grad


def test_transpose_properties():
    a = rand(2, 3)
    t = kiln.tensor(a)
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    assert t.T.stride() == (1, 3) and not t.T.is_contiguous()
    b = rand(4, 2, 3)
    np.testing.assert_array_equal(kiln.tensor(b).mT.numpy(), np.swapaxes(b, -1, -2))
    assert kiln.tensor(rand(5)).T.shape == (5,)


# --- conversions to Python and NumPy ------------------------------------------------------


def test_numpy_is_zero_copy():
    t = kiln.zeros(2, 3)
    a = t.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 3)
    a[0, 1] = 5.0
    assert t.tolist()[0][1] == 5.0
    t.add_(1)
    assert a[0, 1] == 6.0 and a[1, 2] == 1.0


def test_numpy_of_views_and_dtypes():
    t = kiln.tensor(rand(3, 4)).t()
    a = t.numpy()
    assert a.strides == (8, 32)
    np.testing.assert_array_equal(a, t.contiguous().numpy())
    for dt, npdt in ((kiln.int32, np.int32), (kiln.uint8, np.uint8), (kiln.bool, np.bool_),
                     (kiln.float16, np.float16)):
        assert kiln.zeros(2, dtype=dt).numpy().dtype == npdt


def test_numpy_errors():
    with pytest.raises(RuntimeError, match=r"\[numpy\].*requires grad"):
        kiln.ones(2, requires_grad=True).numpy()
    assert kiln.ones(2, requires_grad=True).numpy(force=True).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match=r"\[numpy\].*BFloat16"):
        kiln.ones(2, dtype=kiln.bfloat16).numpy()


def test_array_protocol():
    t = kiln.tensor([[1.0, 2.0]])
    np.testing.assert_array_equal(np.asarray(t), [[1.0, 2.0]])
    assert np.asarray(t, dtype=np.int64).dtype == np.int64


def test_tolist():
    assert kiln.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert kiln.tensor([[1, 2], [3, 4]]).t().tolist() == [[1, 3], [2, 4]]
    assert kiln.tensor(2.5).tolist() == 2.5
    assert kiln.zeros(0, 2).tolist() == []
    assert kiln.tensor([True, False]).tolist() == [True, False]
    vals = kiln.tensor([1.5], dtype=kiln.bfloat16).tolist()
    assert vals == [1.5] and isinstance(vals[0], float)
    assert isinstance(kiln.tensor([3]).tolist()[0], int)


def test_item():
    assert kiln.tensor(3).item() == 3 and isinstance(kiln.tensor(3).item(), int)
    assert kiln.tensor([2.5]).item() == 2.5
    assert kiln.tensor([[True]]).item() is True
    assert kiln.tensor([0.1], dtype=kiln.float64).item() == 0.1
    with pytest.raises(RuntimeError, match=r"\[item\].*2 elements"):
        kiln.tensor([1, 2]).item()
    with pytest.raises(RuntimeError, match=r"\[item\]"):
        kiln.zeros(0).item()


def test_python_number_conversions():
    assert float(kiln.tensor(2.5)) == 2.5
    assert int(kiln.tensor(7)) == 7
    assert bool(kiln.tensor([1]))
    assert [10, 20, 30][kiln.tensor(1)] == 20
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(kiln.ones(2))
    with pytest.raises(TypeError):
        [1, 2][kiln.tensor(1.0)]


# --- dtype conversions --------------------------------------------------------------------


@pytest.mark.parametrize("method, dtype", [
    ("float", kiln.float32), ("double", kiln.float64), ("half", kiln.float16),
    ("bfloat16", kiln.bfloat16), ("long", kiln.int64), ("int", kiln.int32),
    ("short", kiln.int16), ("char", kiln.int8), ("byte", kiln.uint8), ("bool", kiln.bool)])
def test_conversion_methods(method, dtype):
    src = kiln.tensor([0.0, 1.5, -2.0, 3.0], dtype=kiln.float64)
    out = getattr(src, method)()
    assert out.dtype == dtype and out.shape == (4,)
    expected = np.array([0.0, 1.5, -2.0, 3.0])
    if dtype == kiln.bool:
        expected = expected != 0
    elif dtype == kiln.uint8:
        expected = np.array([0, 1, 254, 3])
    elif not dtype.is_floating_point:
        expected = np.trunc(expected)
    np.testing.assert_array_equal(np.array(out.tolist()), expected)
    same = out.to(dtype)
    assert same is out  # already that dtype: no copy
    assert getattr(out, method)() is out


def test_conversion_methods_are_differentiable():
    a = kiln.tensor([1.0, 2.0], requires_grad=True)
    b = a.double()
    assert b.dtype == kiln.float64 and b.requires_grad
    (b * b).sum().backward()
    assert a.grad.dtype == kiln.float32 and a.grad.tolist() == [2.0, 4.0]


def test_to():
    t = kiln.tensor([1.7, -2.2])
    assert t.to(kiln.int32).tolist() == [1, -2]
    assert t.to(dtype=kiln.float64).dtype == kiln.float64
    assert t.to("cpu") is t
    assert t.to("cpu", kiln.float64).dtype == kiln.float64
    assert t.to(kiln.zeros(1, dtype=kiln.int64)).dtype == kiln.int64
    c = t.to(kiln.float32, copy=True)
    assert c is not t and c.tolist() == t.tolist()
    with pytest.raises(TypeError, match=r"\[to\]"):
        t.to(1.5)
    with pytest.raises(TypeError, match=r"\[to\]"):
        t.to(kiln.float64, colour=1)


# --- dtype objects ------------------------------------------------------------------------


def test_dtype_objects():
    assert repr(kiln.float32) == "kiln.float32" and str(kiln.int64) == "kiln.int64"
    assert kiln.float is kiln.float32 and kiln.double is kiln.float64
    assert kiln.half is kiln.float16 and kiln.long is kiln.int64
    assert kiln.int is kiln.int32 and kiln.short is kiln.int16
    assert isinstance(kiln.float32, kiln.dtype)
    sizes = {kiln.bool: 1, kiln.uint8: 1, kiln.int8: 1, kiln.int16: 2, kiln.int32: 4,
             kiln.int64: 8, kiln.float16: 2, kiln.bfloat16: 2, kiln.float32: 4, kiln.float64: 8}
    for dt, size in sizes.items():
        assert dt.itemsize == size
        assert dt.is_floating_point == (dt in (kiln.float16, kiln.bfloat16, kiln.float32,
                                               kiln.float64))
    assert kiln.int8.is_signed and not kiln.uint8.is_signed and not kiln.bool.is_signed
    assert len({kiln.float32, kiln.float32, kiln.int64}) == 2


# --- device objects ---------------------------------------------------------------------


def test_device_parsing():
    d = kiln.device("cuda:1")
    assert d.type == "cuda" and d.index == 1 and str(d) == "cuda:1"
    assert repr(d) == "device(type='cuda', index=1)"
    assert kiln.device("cuda").index is None
    assert kiln.device("cuda", 2) == kiln.device("cuda:2")
    cpu = kiln.device("cpu")
    assert cpu.type == "cpu" and cpu.index is None and repr(cpu) == "device(type='cpu')"
    assert cpu == "cpu" and kiln.device(cpu) == cpu
    assert kiln.device(0) == kiln.device("cuda:0")
    assert hash(kiln.device("cuda:1")) == hash(kiln.device("cuda", 1))


def test_device_errors():
    with pytest.raises(RuntimeError, match=r"\[device\]"):
        kiln.device("tpu")
    with pytest.raises(RuntimeError, match=r"\[device\]"):
        kiln.device("cuda:1", 0)
    with pytest.raises(RuntimeError, match=r"\[device\]"):
        kiln.device(-1)
    with pytest.raises(TypeError, match=r"\[device\]"):
        kiln.device(1.5)
    with pytest.raises(RuntimeError, match=r"\[device\] Invalid device string"):
        kiln.device("cuda:x")
    with pytest.raises(RuntimeError, match=r"\[device\].*out of range"):
        kiln.device("cuda:999")


def test_cuda_queries_are_consistent():
    count = kiln.cuda.device_count()
    assert isinstance(count, int) and count >= 0
    assert kiln.cuda.is_available() in (True, False)
    assert not kiln.cuda.is_available() or count > 0


def test_cuda_without_visible_devices_reports_none():
    import subprocess
    import sys
    code = "import kiln; print(kiln.cuda.is_available(), kiln.cuda.device_count())"
    env = dict(__import__("os").environ, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.split() == ["False", "0"]
