"""Tensor creation: kiln.tensor, as_tensor, from_numpy, the deterministic factories."""

import numpy as np
import pytest

import kiln
from helpers import rand


# --- kiln.tensor ------------------------------------------------------------------


def test_tensor_nested_lists_and_inference():
    t = kiln.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.shape == (2, 3) and t.dtype == kiln.int64
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert kiln.tensor([1.5, 2]).dtype == kiln.float32
    assert kiln.tensor([1, 2.5]).tolist() == [1.0, 2.5]
    assert kiln.tensor([True, False]).dtype == kiln.bool
    assert kiln.tensor([True, 2]).dtype == kiln.int64
    assert kiln.tensor([True, 2.0]).dtype == kiln.float32
    assert kiln.tensor(((1, 2), (3, 4))).shape == (2, 2)


def test_tensor_inference_keeps_numpy_scalar_and_tensor_dtypes():
    # PyTorch promotes the leaves' own dtypes: NumPy scalars and 0-d tensors are typed.
    cases = [([np.float64(1.0)], kiln.float64), ([np.float32(1.0), 2.0], kiln.float32),
             ([1.0, np.float64(2.0)], kiln.float64), ([np.float16(1.0)], kiln.float16),
             ([np.float16(1.0), 2], kiln.float16), ([np.int32(1)], kiln.int32),
             ([np.int16(1), 2], kiln.int64), ([np.bool_(True)], kiln.bool),
             ([[np.int8(1)], [np.uint8(2)]], kiln.int16),
             ([kiln.tensor(1.0, dtype=kiln.float64), 2], kiln.float64),
             ([kiln.tensor(1, dtype=kiln.int32), 2.5], kiln.float32), ([], kiln.float32)]
    for data, dtype in cases:
        assert kiln.tensor(data).dtype == dtype, (data, dtype)
    assert kiln.tensor(list(np.linspace(0, 1, 3))).tolist() == [0.0, 0.5, 1.0]


def test_tensor_dtype_argument():
    t = kiln.tensor([1, 2, 3], dtype=kiln.float64)
    assert t.dtype == kiln.float64 and t.tolist() == [1.0, 2.0, 3.0]
    assert kiln.tensor([1.7, -1.7], dtype=kiln.int32).tolist() == [1, -1]
    assert kiln.tensor([0, 2], dtype=kiln.bool).tolist() == [False, True]
    h = kiln.tensor([0.1], dtype=kiln.float16)
    assert h.dtype == kiln.float16 and abs(h.item() - 0.1) < 1e-3
    b = kiln.tensor([1.0, 2.5], dtype=kiln.bfloat16)
    assert b.dtype == kiln.bfloat16 and b.tolist() == [1.0, 2.5]


@pytest.mark.parametrize("np_dtype, dtype", [
    (np.float64, kiln.float64), (np.float32, kiln.float32), (np.float16, kiln.float16),
    (np.int64, kiln.int64), (np.int32, kiln.int32), (np.int16, kiln.int16),
    (np.int8, kiln.int8), (np.uint8, kiln.uint8), (np.bool_, kiln.bool)])
def test_tensor_from_numpy_keeps_dtype_and_copies(np_dtype, dtype):
    a = rand(3, 4, dtype=np_dtype)
    before = a.copy()
    t = kiln.tensor(a)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), a)
    a[...] = ~a if np_dtype == np.bool_ else a + 1
    np.testing.assert_array_equal(t.numpy(), before)


def test_tensor_copies_data():
    a = rand(5)
    t = kiln.tensor(a)
    a[0] = 100.0
    assert t.tolist()[0] != 100.0


def test_tensor_from_noncontiguous_numpy():
    a = rand(4, 6)[:, ::2].T
    np.testing.assert_array_equal(kiln.tensor(a).numpy(), a)


def test_tensor_zero_dim_and_empty():
    t = kiln.tensor(3.5)
    assert t.shape == () and t.dim() == 0 and t.item() == 3.5 and t.dtype == kiln.float32
    assert kiln.tensor(7).dtype == kiln.int64
    assert kiln.tensor(True).item() is True
    e = kiln.tensor([])
    assert e.shape == (0,) and e.dtype == kiln.float32 and e.numel() == 0
    assert kiln.tensor([[], []]).shape == (2, 0)
    assert kiln.tensor(np.float64(2.0)).dtype == kiln.float64
    assert kiln.tensor(np.int32(4)).dtype == kiln.int32
    assert kiln.tensor(np.array(1.5, dtype=np.float16)).shape == ()


def test_tensor_from_other_sequences():
    assert kiln.tensor(range(3)).tolist() == [0, 1, 2]
    assert kiln.tensor([range(2), (5, 6)]).tolist() == [[0, 1], [5, 6]]
    big_endian = np.array([1.5, -2.0], dtype=">f4")
    t = kiln.tensor(big_endian)
    assert t.dtype == kiln.float32 and t.tolist() == [1.5, -2.0]
    with pytest.raises(TypeError, match=r"\[tensor\]"):
        kiln.tensor("abc")
    with pytest.raises(TypeError, match=r"\[tensor\]"):
        kiln.tensor([None])


def test_tensor_from_reversed_numpy_copies():
    a = np.arange(6.0)[::-1]
    np.testing.assert_array_equal(kiln.tensor(a).numpy(), a)
    np.testing.assert_array_equal(kiln.tensor(a.reshape(2, 3)[:, ::-1]).numpy(),
                                  a.reshape(2, 3)[:, ::-1])


def test_tensor_from_tensor_and_scalars_inside_lists():
    src = kiln.tensor([1.0, 2.0], requires_grad=True)
    t = kiln.tensor(src)
    assert not t.requires_grad and t.tolist() == [1.0, 2.0]
    t.add_(1)
    assert src.tolist() == [1.0, 2.0]
    assert kiln.tensor([kiln.tensor(1.0), kiln.tensor(2.0)]).tolist() == [1.0, 2.0]


def test_tensor_requires_grad():
    t = kiln.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf
    with pytest.raises(RuntimeError):
        kiln.tensor([1, 2], requires_grad=True)


def test_tensor_errors():
    with pytest.raises(ValueError, match=r"\[tensor\].*length"):
        kiln.tensor([[1, 2], [3]])
    with pytest.raises(ValueError, match=r"\[tensor\]"):
        kiln.tensor([[1, 2], 3])
    with pytest.raises(ValueError, match=r"\[tensor\]"):
        kiln.tensor([1, [2, 3]])
    with pytest.raises(TypeError, match=r"\[tensor\]"):
        kiln.tensor(["a", "b"])
    with pytest.raises(ValueError, match=r"\[tensor\]"):
        kiln.tensor([kiln.ones(2), kiln.ones(2)])
    with pytest.raises(TypeError):
        kiln.tensor([1.0], dtype="float32")


# --- as_tensor and from_numpy -------------------------------------------------------


def test_as_tensor():
    a = rand(3)
    t = kiln.as_tensor(a)
    a[0] = 42.0
    assert t.tolist()[0] == 42.0  # shares memory with the array
    assert kiln.as_tensor(a, dtype=kiln.float32).dtype == kiln.float32
    x = kiln.ones(2)
    assert kiln.as_tensor(x) is x
    assert kiln.as_tensor([1, 2]).dtype == kiln.int64
    assert kiln.as_tensor([1, 2], dtype=kiln.float64).dtype == kiln.float64


def test_from_numpy_zero_copy_both_ways():
    a = rand(2, 3)
    t = kiln.from_numpy(a)
    assert t.dtype == kiln.float64 and t.shape == (2, 3)
    a[1, 2] = 9.0
    assert t.tolist()[1][2] == 9.0
    t.mul_(2)
    assert a[1, 2] == 18.0


def test_from_numpy_strided_view():
    a = rand(4, 6)
    view = a[::2, 1::2]
    t = kiln.from_numpy(view)
    assert t.stride() == (12, 2)
    np.testing.assert_array_equal(t.numpy(), view)
    view[0, 0] = -7.0
    assert t.tolist()[0][0] == -7.0


def test_from_numpy_keeps_array_alive():
    t = kiln.from_numpy(np.arange(5, dtype=np.int64))
    import gc
    gc.collect()
    assert t.tolist() == [0, 1, 2, 3, 4]


def test_from_numpy_errors():
    with pytest.raises(ValueError, match=r"\[from_numpy\].*negative"):
        kiln.from_numpy(np.arange(5.0)[::-1])
    with pytest.raises(TypeError, match=r"\[from_numpy\]"):
        kiln.from_numpy([1, 2])
    with pytest.raises(TypeError, match=r"\[from_numpy\].*complex"):
        kiln.from_numpy(np.zeros(2, dtype=np.complex64))
    with pytest.raises(TypeError, match=r"\[from_numpy\]"):
        kiln.from_numpy(np.zeros(2, dtype=np.uint32))


# --- empty / zeros / ones / full ---------------------------------------------------


@pytest.mark.parametrize("fn, value", [(kiln.zeros, 0), (kiln.ones, 1)])
def test_zeros_ones(fn, value):
    for t in (fn(2, 3), fn((2, 3)), fn([2, 3]), fn(kiln.Size([2, 3]))):
        assert t.shape == (2, 3) and t.dtype == kiln.float32
        assert np.all(t.numpy() == value)
    assert fn(3, dtype=kiln.int32).dtype == kiln.int32
    assert fn(()).shape == ()
    assert fn(0, 4).shape == (0, 4)
    assert fn(2, requires_grad=True).requires_grad
    assert fn(2, device="cpu").device == kiln.device("cpu")


def test_sizes_accept_int_likes():
    assert kiln.zeros(np.int64(3)).shape == (3,)
    assert kiln.ones(2, np.int32(2)).shape == (2, 2)
    assert kiln.zeros((np.int64(1), 2)).shape == (1, 2)
    assert kiln.full([np.int16(2)], 1.0).shape == (2,)
    with pytest.raises(TypeError, match=r"\[zeros\]"):
        kiln.zeros(True)


def test_empty():
    t = kiln.empty(3, 4, dtype=kiln.float64)
    assert t.shape == (3, 4) and t.dtype == kiln.float64 and t.is_contiguous()
    assert kiln.empty(0).numel() == 0


def test_full_dtype_inference():
    assert kiln.full((2,), 1.5).dtype == kiln.float32
    assert kiln.full((2,), 3).dtype == kiln.int64
    assert kiln.full((2,), True).dtype == kiln.bool
    t = kiln.full((2, 2), 7, dtype=kiln.float64)
    assert t.dtype == kiln.float64 and t.tolist() == [[7.0, 7.0], [7.0, 7.0]]
    assert kiln.full([3], -2).tolist() == [-2, -2, -2]


def test_like_factories():
    x = kiln.tensor(rand(2, 3), dtype=kiln.float64)
    for fn, v in ((kiln.zeros_like, 0), (kiln.ones_like, 1)):
        y = fn(x)
        assert y.shape == (2, 3) and y.dtype == kiln.float64 and np.all(y.numpy() == v)
    assert kiln.empty_like(x).shape == (2, 3)
    f = kiln.full_like(x, 4)
    assert f.dtype == kiln.float64 and np.all(f.numpy() == 4)
    assert kiln.zeros_like(x, dtype=kiln.int16).dtype == kiln.int16
    # like-factories of a transposed input are contiguous and the same shape.
    assert kiln.ones_like(x.t()).shape == (3, 2)


def test_factory_errors():
    with pytest.raises(TypeError, match=r"\[zeros\]"):
        kiln.zeros(2, 3.0)
    with pytest.raises(TypeError, match=r"\[ones\]"):
        kiln.ones("abc")
    with pytest.raises(TypeError, match=r"\[zeros\].*unexpected keyword"):
        kiln.zeros(2, colour="red")
    with pytest.raises(TypeError, match=r"\[zeros\]"):
        kiln.zeros(2, dtype=np.float32)
    with pytest.raises(RuntimeError):
        kiln.zeros(-1)


# --- arange / linspace / eye -----------------------------------------------------------


def test_arange_int_and_float():
    t = kiln.arange(5)
    assert t.dtype == kiln.int64 and t.tolist() == [0, 1, 2, 3, 4]
    assert kiln.arange(2, 8, 3).tolist() == [2, 5]
    f = kiln.arange(0, 1, 0.25)
    assert f.dtype == kiln.float32 and f.tolist() == [0, 0.25, 0.5, 0.75]
    np.testing.assert_allclose(kiln.arange(0.0, 1.0, 0.1, dtype=kiln.float64).numpy(),
                               np.arange(0.0, 1.0, 0.1))
    assert kiln.arange(5.0).dtype == kiln.float32
    assert kiln.arange(3, dtype=kiln.float64).tolist() == [0.0, 1.0, 2.0]
    assert kiln.arange(start=1, end=4).tolist() == [1, 2, 3]


def test_arange_negative_step_and_empty():
    assert kiln.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert kiln.arange(1.0, -1.0, -0.5).tolist() == [1.0, 0.5, 0.0, -0.5]
    assert kiln.arange(0).shape == (0,)
    assert kiln.arange(3, 3).shape == (0,)


def test_arange_errors():
    with pytest.raises(RuntimeError, match=r"\[arange\].*nonzero"):
        kiln.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match=r"\[arange\].*sign"):
        kiln.arange(0, 5, -1)
    with pytest.raises(RuntimeError, match=r"\[arange\]"):
        kiln.arange(0, float("inf"))


def test_linspace():
    t = kiln.linspace(0, 1, 5)
    assert t.dtype == kiln.float32
    np.testing.assert_allclose(t.numpy(), np.linspace(0, 1, 5), rtol=1e-6)
    d = kiln.linspace(-3, 7, 11, dtype=kiln.float64)
    np.testing.assert_allclose(d.numpy(), np.linspace(-3, 7, 11), rtol=0, atol=1e-15)
    assert d.tolist()[-1] == 7.0
    assert kiln.linspace(2, 5, 1).tolist() == [2.0]
    assert kiln.linspace(0, 1, 0).shape == (0,)
    assert kiln.linspace(1, 0, 3).tolist() == [1.0, 0.5, 0.0]
    with pytest.raises(RuntimeError, match=r"\[linspace\]"):
        kiln.linspace(0, 1, -1)


def test_eye():
    np.testing.assert_array_equal(kiln.eye(3).numpy(), np.eye(3))
    np.testing.assert_array_equal(kiln.eye(2, 4).numpy(), np.eye(2, 4))
    np.testing.assert_array_equal(kiln.eye(4, 2).numpy(), np.eye(4, 2))
    assert kiln.eye(2, dtype=kiln.int64).dtype == kiln.int64
    assert kiln.eye(0).shape == (0, 0)
    with pytest.raises(RuntimeError, match=r"\[eye\]"):
        kiln.eye(-1)


def test_new_factories():
    x = kiln.ones(2, dtype=kiln.float64)
    assert x.new_zeros((3,)).dtype == kiln.float64
    assert x.new_ones((2, 2)).shape == (2, 2)
    assert x.new_full((2,), 5).tolist() == [5.0, 5.0]
    assert x.new_empty((1, 3)).shape == (1, 3)
