"""Tensor API PyTorch programs use (issue 17): legacy constructors (item 4), is_complex
(item 8), device and layout predicates (item 9), indexing with a range (item 11) and
pickling devices (item 13)."""

import pickle
import warnings

import numpy as np
import pytest

import kiln

LEGACY = {"FloatTensor": kiln.float32, "DoubleTensor": kiln.float64, "HalfTensor": kiln.float16,
          "BFloat16Tensor": kiln.bfloat16, "ByteTensor": kiln.uint8, "CharTensor": kiln.int8,
          "ShortTensor": kiln.int16, "IntTensor": kiln.int32, "LongTensor": kiln.int64,
          "BoolTensor": kiln.bool}


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_constructors_from_data_sizes_and_arrays(name):
    cls, dtype = getattr(kiln, name), LEGACY[name]
    t = cls([[1, 0], [0, 1]])
    assert t.dtype == dtype and t.device == kiln.device("cpu") and tuple(t.shape) == (2, 2)
    np.testing.assert_array_equal(t.float().numpy(), [[1, 0], [0, 1]])
    empty = cls(3, 4)
    assert empty.dtype == dtype and tuple(empty.shape) == (3, 4)
    assert tuple(cls().shape) == (0,) and tuple(cls(5).shape) == (5,)
    other = kiln.float64 if dtype != kiln.float64 else kiln.float32
    assert isinstance(t, cls) and not isinstance(t.to(other), cls)
    assert t.type() == f"kiln.{name}" and t.type(cls) is t


def test_legacy_constructor_details():
    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    f = kiln.FloatTensor(arr)
    assert f.dtype == kiln.float32
    np.testing.assert_array_equal(f.numpy(), arr.astype(np.float32))
    assert kiln.LongTensor([1, 2, 3]).tolist() == [1, 2, 3]
    alias = kiln.FloatTensor(f)  # same dtype: the same storage, as in PyTorch
    alias.add_(1)
    assert f[0, 0].item() == 1.0
    with pytest.raises(TypeError, match=r"\[kiln\.LongTensor\] expected kiln\.LongTensor "
                                        r"\(got kiln\.FloatTensor\)"):
        kiln.LongTensor(f)
    with pytest.raises(TypeError, match=r"\[kiln\.FloatTensor\] expected data .* or integer"):
        kiln.FloatTensor([1], 2)
    assert isinstance(kiln.ones(2), kiln.FloatTensor)
    assert not isinstance(kiln.ones(2), kiln.cuda.FloatTensor)
    assert not isinstance(np.ones(2), kiln.FloatTensor)
    assert repr(kiln.FloatTensor) == "<class 'kiln.FloatTensor'>"
    assert kiln.ones(2).type(kiln.DoubleTensor).dtype == kiln.float64
    if not kiln.cuda.is_available():
        with pytest.raises(RuntimeError):
            kiln.cuda.FloatTensor([1.0])


def test_the_tensor_class_as_legacy_constructor():
    t = kiln.Tensor(3, 4)
    assert tuple(t.shape) == (3, 4) and t.dtype == kiln.get_default_dtype()
    assert tuple(kiln.Tensor(3).shape) == (3,)  # sizes, not the value 3
    assert kiln.Tensor([3]).tolist() == [3.0]
    assert kiln.Tensor(np.array([1, 2])).dtype == kiln.float32
    assert tuple(kiln.Tensor().shape) == (0,)
    assert tuple(kiln.Tensor(2, 0, device="cpu").shape) == (2, 0)
    with pytest.raises(TypeError, match=r"\[Tensor\] unexpected keyword argument 'dtype'"):
        kiln.Tensor(2, dtype=kiln.int64)
    with pytest.raises(TypeError, match=r"\[Tensor\] device= goes with sizes only"):
        kiln.Tensor([1.0], device="cpu")
    with pytest.raises(TypeError, match=r"\[Tensor\] expected data or integer sizes"):
        kiln.Tensor(2, 3.5)
    with pytest.raises(RuntimeError):
        kiln.Tensor(-1)
    p = kiln.nn.Parameter(kiln.ones(2))  # subclasses still pass data
    assert p.tolist() == [1.0, 1.0] and p.requires_grad


def test_complex_and_other_predicates_answer_as_pytorch_does_for_real_cpu_tensors():
    t = kiln.ones(2)
    for name in ("is_meta", "is_xpu", "is_mps", "is_ipu", "is_xla", "is_maia", "is_mtia",
                 "is_vulkan", "is_quantized", "is_mkldnn", "is_nested"):
        assert getattr(t, name) is False, name
    for name in ("is_complex", "is_conj", "is_neg", "is_inference"):
        assert getattr(t, name)() is False and getattr(kiln, name)(t) is False, name
    assert kiln.float32.is_complex is False
    assert t.is_signed() and kiln.is_signed(t) and not kiln.ones(1, dtype=kiln.uint8).is_signed()
    with pytest.raises(TypeError):
        kiln.is_complex([1.0])


def test_the_predicates_match_pytorch_where_installed():
    torch = pytest.importorskip("torch")
    x, y = torch.ones(2), kiln.ones(2)
    for name in [n for n in dir(torch.Tensor) if n.startswith("is_")]:
        if name in ("is_sparse", "is_sparse_csr", "is_coalesced", "is_set_to", "is_same_size",
                    "is_nonzero", "is_distributed", "is_shared", "is_pinned", "is_contiguous"):
            continue  # owned elsewhere or taking arguments
        assert hasattr(y, name), name
        a, b = getattr(x, name), getattr(y, name)
        if callable(a):
            a, b = a(), b()
        assert a == b, name


def test_indexing_with_a_python_range():
    x = kiln.zeros(4, 5)
    idx = kiln.tensor([1, 0, 4])
    x[range(3), idx] = 1.0
    expected = np.zeros((4, 5))
    expected[range(3), [1, 0, 4]] = 1.0
    np.testing.assert_array_equal(x.numpy(), expected)
    np.testing.assert_array_equal(x[range(1, 4, 2)].numpy(), expected[range(1, 4, 2)])
    np.testing.assert_array_equal(x[:, range(2)].numpy(), expected[:, range(2)])
    assert tuple(x[range(0)].shape) == (0, 5)
    with pytest.raises(IndexError):
        x[range(3, 6)]


def test_devices_and_dtypes_pickle():
    for d in (kiln.device("cpu"), kiln.device("cuda"), kiln.device("cuda", 1)):
        assert pickle.loads(pickle.dumps(d)) == d
        assert str(pickle.loads(pickle.dumps(d))) == str(d)
    assert pickle.loads(pickle.dumps(kiln.bfloat16)) is kiln.bfloat16


def test_dropout2d_on_2d_and_3d_input_warns_and_proceeds_like_pytorch():
    kiln.manual_seed(0)
    x = kiln.ones(64, 32)
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        y = kiln.nn.Dropout2d(0.5)(x)
    vals = y.numpy()
    assert set(np.unique(vals)) <= {0.0, 2.0} and 0.3 < (vals == 0).mean() < 0.7
    # (N, C) is feature dropout of single elements: rows are not all-or-nothing
    assert ((vals == 0).all(1) | (vals == 2).all(1)).mean() < 0.5
    with pytest.warns(UserWarning, match=r"Received a 3D input .* \(N, C, L\)"):
        y3 = kiln.nn.functional.dropout2d(kiln.ones(8, 16, 5), 0.5).numpy()
    assert ((y3 == 0).all(-1) | (y3 == 2).all(-1)).all()  # whole (n, c) rows
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kiln.nn.functional.dropout2d(kiln.ones(2, 3, 4, 4), 0.5)  # 4-D: no warning
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"):
        with pytest.warns(UserWarning):
            kiln.nn.functional.dropout2d(kiln.ones(3), 0.5)
    m = kiln.nn.Dropout2d(0.5).eval()
    with pytest.warns(UserWarning):
        assert m(x) is x
