"""finfo/iinfo, promotion queries, set_default_dtype, broadcast/meshgrid utilities,
set_printoptions, Tensor.type and Tensor.new_tensor."""

import itertools
import math
import warnings

import numpy as np
import pytest

import kiln
from helpers import noncontig, rand, requires_gpu

FLOATS = [kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64]
INTS = [kiln.uint8, kiln.int8, kiln.int16, kiln.int32, kiln.int64]
ALL = [kiln.bool] + INTS + FLOATS


def _name(dtype):
    return repr(dtype).split(".")[1]


@pytest.fixture
def default_float64():
    kiln.set_default_dtype(kiln.float64)
    yield
    kiln.set_default_dtype(kiln.float32)


@pytest.fixture
def restore_printoptions():
    yield
    kiln.set_printoptions(profile="default")


# finfo / iinfo -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.float32, kiln.float64], ids=_name)
def test_finfo_matches_numpy(dtype):
    ref = np.finfo(getattr(np, _name(dtype)))
    fi = kiln.finfo(dtype)
    assert fi.bits == ref.bits
    assert fi.eps == float(ref.eps) and fi.max == float(ref.max) and fi.min == float(ref.min)
    assert fi.tiny == float(ref.tiny) and fi.smallest_normal == float(ref.smallest_normal)
    assert fi.resolution == 10.0 ** -ref.precision
    assert fi.dtype == _name(dtype)
    assert all(isinstance(v, float) for v in (fi.eps, fi.max, fi.min, fi.tiny, fi.resolution))


def test_finfo_bfloat16():
    fi = kiln.finfo(kiln.bfloat16)
    assert (fi.bits, fi.eps, fi.resolution, fi.dtype) == (16, 0.0078125, 0.01, "bfloat16")
    assert fi.max == 3.3895313892515355e+38 and fi.min == -fi.max
    assert fi.tiny == fi.smallest_normal == 1.1754943508222875e-38
    # The largest finite bfloat16 survives a round trip; the next step up overflows.
    assert kiln.tensor([fi.max]).to(kiln.bfloat16).float().item() == fi.max
    assert math.isinf(kiln.tensor([fi.max * (1 + fi.eps)]).to(kiln.bfloat16).float().item())


def test_finfo_eps_is_the_gap_above_one():
    for dtype in FLOATS:
        eps = kiln.finfo(dtype).eps
        one = kiln.ones(1, dtype=dtype)
        assert ((one + eps) - one).double().item() == eps


def test_finfo_default_and_repr(default_float64):
    assert kiln.finfo().dtype == "float64"
    kiln.set_default_dtype(kiln.float32)
    assert kiln.finfo() == kiln.finfo(kiln.float32)
    text = repr(kiln.finfo(kiln.float32))
    assert text.startswith("finfo(") and "eps=1.19209e-07" in text and "dtype=float32" in text


@pytest.mark.parametrize("dtype", INTS, ids=_name)
def test_iinfo_matches_numpy(dtype):
    ref = np.iinfo(getattr(np, _name(dtype)))
    ii = kiln.iinfo(dtype)
    assert (ii.bits, ii.max, ii.min, ii.dtype) == (ref.bits, ref.max, ref.min, _name(dtype))
    assert "max=" + str(ref.max) in repr(ii)


def test_info_errors():
    with pytest.raises(TypeError, match=r"\[finfo\].*int32"):
        kiln.finfo(kiln.int32)
    with pytest.raises(TypeError, match=r"\[finfo\]"):
        kiln.finfo(kiln.bool)
    with pytest.raises(TypeError, match=r"\[iinfo\].*float32"):
        kiln.iinfo(kiln.float32)
    with pytest.raises(TypeError, match=r"\[iinfo\].*bool"):
        kiln.iinfo(kiln.bool)
    with pytest.raises(TypeError, match=r"\[finfo\].*str"):
        kiln.finfo("float32")


# result_type / promote_types / can_cast --------------------------------------------------


def test_promote_types_matches_numpy_within_a_category():
    for group in (INTS, [kiln.float16, kiln.float32, kiln.float64]):
        for a, b in itertools.product(group, repeat=2):
            expected = np.promote_types(_name(a), _name(b)).name
            assert _name(kiln.promote_types(a, b)) == expected, (a, b)


@pytest.mark.parametrize("a,b,expected", [
    (kiln.int32, kiln.float16, kiln.float16),  # NumPy says float64; PyTorch keeps the float
    (kiln.int64, kiln.bfloat16, kiln.bfloat16),
    (kiln.float16, kiln.bfloat16, kiln.float32),
    (kiln.bool, kiln.int8, kiln.int8),
    (kiln.bool, kiln.bool, kiln.bool),
    (kiln.uint8, kiln.int8, kiln.int16),
])
def test_promote_types_pytorch_lattice(a, b, expected):
    assert kiln.promote_types(a, b) == expected and kiln.promote_types(b, a) == expected


def test_result_type_wrapped_numbers():
    i32 = kiln.tensor([1, 2], dtype=kiln.int32)
    f16 = kiln.tensor([1.0], dtype=kiln.float16)
    assert kiln.result_type(i32, 2) == kiln.int32
    assert kiln.result_type(i32, 2.5) == kiln.float32
    assert kiln.result_type(f16, 2.0) == kiln.float16
    assert kiln.result_type(2, f16) == kiln.float16
    assert kiln.result_type(kiln.tensor([True]), 3) == kiln.int64
    assert kiln.result_type(1, 2) == kiln.int64
    assert kiln.result_type(1, 2.0) == kiln.float32
    assert kiln.result_type(True, False) == kiln.bool
    # A 0-d tensor ranks below a dimensioned one of the same category, above a number.
    assert kiln.result_type(i32, kiln.tensor(1, dtype=kiln.int64)) == kiln.int32
    assert kiln.result_type(kiln.tensor(1.0, dtype=kiln.float64), 1) == kiln.float64
    assert kiln.result_type(tensor1=i32, tensor2=kiln.tensor([1.0])) == kiln.float32


def test_result_type_agrees_with_arithmetic():
    samples = [kiln.ones(2, dtype=d) for d in ALL] + [kiln.ones((), dtype=d) for d in ALL]
    samples += [True, 3, 2.5]
    for a, b in itertools.product(samples, repeat=2):
        if not any(isinstance(x, kiln.Tensor) for x in (a, b)):
            continue
        expected = (a * b if isinstance(a, kiln.Tensor) else b * a).dtype
        assert kiln.result_type(a, b) == expected, (a, b)


def test_can_cast():
    for a, b in itertools.product(ALL, repeat=2):
        expected = not (a.is_floating_point and not b.is_floating_point)
        expected = expected and (a == kiln.bool or b != kiln.bool)
        assert kiln.can_cast(a, b) == expected, (a, b)
    assert kiln.can_cast(from_=kiln.int64, to=kiln.float16)


def test_promotion_query_errors():
    with pytest.raises(TypeError):
        kiln.promote_types(kiln.int32, "float32")
    with pytest.raises(TypeError):
        kiln.can_cast(kiln.int32, 3)
    with pytest.raises(TypeError, match=r"\[result_type\].*tensor2"):
        kiln.result_type(kiln.ones(2), "a")


# set_default_dtype ---------------------------------------------------------------------


def test_default_dtype_is_float32():
    assert kiln.get_default_dtype() == kiln.float32
    assert kiln.tensor([1.0]).dtype == kiln.float32 and kiln.zeros(2).dtype == kiln.float32


def test_set_default_dtype_float64_reaches_every_factory(default_float64):
    assert kiln.get_default_dtype() == kiln.float64
    assert kiln.tensor([1.0]).dtype == kiln.float64
    assert kiln.tensor(2.5).dtype == kiln.float64
    assert kiln.tensor([]).dtype == kiln.float64
    assert kiln.Tensor([1, 2]).dtype == kiln.float64
    assert kiln.tensor([1, 2]).dtype == kiln.int64
    for factory in (kiln.zeros, kiln.ones, kiln.empty, kiln.rand, kiln.randn):
        assert factory(2).dtype == kiln.float64, factory
    assert kiln.full((2,), 1.5).dtype == kiln.float64
    assert kiln.full((2,), 1).dtype == kiln.int64
    assert kiln.arange(0., 3.).dtype == kiln.float64
    assert kiln.arange(3).dtype == kiln.int64
    assert kiln.linspace(0, 1, 5).dtype == kiln.float64
    assert kiln.eye(2).dtype == kiln.float64
    assert kiln.normal(0.0, 1.0, size=(2,)).dtype == kiln.float64
    ints = kiln.ones(2, dtype=kiln.int64)
    assert (ints * 1.5).dtype == kiln.float64
    assert (ints / 2).dtype == kiln.float64
    assert kiln.exp(ints).dtype == kiln.float64
    assert ints.clamp(min=0.5).dtype == kiln.float64
    assert kiln.result_type(ints, 1.5) == kiln.float64
    # A float32 tensor is not promoted by a Python float, whatever the default.
    assert (kiln.ones(2, dtype=kiln.float32) * 1.5).dtype == kiln.float32
    assert kiln.finfo().dtype == "float64"
    assert kiln.nn.Linear(2, 3).weight.dtype == kiln.float64
    # The value survives at float64 precision.
    assert kiln.tensor([0.1]).item() == 0.1


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_set_default_dtype_half(dtype):
    try:
        kiln.set_default_dtype(dtype)
        assert kiln.tensor([1.5]).dtype == dtype and kiln.zeros(2).dtype == dtype
    finally:
        kiln.set_default_dtype(kiln.float32)


def test_set_default_dtype_errors():
    for dtype in [kiln.int32, kiln.int64, kiln.bool, kiln.uint8]:
        with pytest.raises(TypeError, match=r"\[set_default_dtype\].*floating"):
            kiln.set_default_dtype(dtype)
    with pytest.raises(TypeError):
        kiln.set_default_dtype("float64")
    assert kiln.get_default_dtype() == kiln.float32


def test_repr_follows_default_dtype(default_float64):
    assert repr(kiln.tensor([1.5])) == "tensor([1.5000])"
    assert repr(kiln.tensor([1.5], dtype=kiln.float32)) == "tensor([1.5000], dtype=kiln.float32)"
    assert repr(kiln.tensor([])) == "tensor([])"


# broadcast_shapes / broadcast_tensors ------------------------------------------------------


@pytest.mark.parametrize("shapes", [
    [(2, 1), (1, 3)], [(4, 1, 3), (5, 1), (3,)], [(), (2, 2)], [(0, 1), (1, 5)], [3, (2, 1)],
    [(2, 3)], [],
])
def test_broadcast_shapes_matches_numpy(shapes):
    out = kiln.broadcast_shapes(*shapes)
    assert isinstance(out, kiln.Size)
    assert tuple(out) == np.broadcast_shapes(*shapes)


def test_broadcast_shapes_errors():
    with pytest.raises(RuntimeError, match=r"\[broadcast_shapes\].*mismatch.*\[\[2, 3\], \[4\]\]"):
        kiln.broadcast_shapes((2, 3), (4,))
    with pytest.raises(RuntimeError, match=r"\[broadcast_shapes\].*negative"):
        kiln.broadcast_shapes((2, -1))
    with pytest.raises(TypeError, match=r"\[broadcast_shapes\]"):
        kiln.broadcast_shapes((2, 1.5))


def test_broadcast_tensors_matches_numpy_and_are_views():
    a, b, c = rand(3, 1), rand(4), rand(2, 1, 4)
    ka, kb, kc = kiln.tensor(a), kiln.tensor(b), noncontig(c)
    outs = kiln.broadcast_tensors(ka, kb, kc)
    refs = np.broadcast_arrays(a, b, c)
    assert isinstance(outs, tuple) and len(outs) == 3
    for o, r in zip(outs, refs):
        assert tuple(o.shape) == r.shape
        np.testing.assert_array_equal(o.numpy(), r)
    assert outs[0].data_ptr() == ka.data_ptr()
    assert kiln.broadcast_tensors([ka, kb])[1].shape == (3, 4)
    with pytest.raises(RuntimeError, match=r"\[broadcast_tensors\]"):
        kiln.broadcast_tensors(kiln.ones(2), kiln.ones(3))
    with pytest.raises(TypeError, match=r"\[broadcast_tensors\]"):
        kiln.broadcast_tensors(kiln.ones(2), 3)


def test_broadcast_tensors_grad():
    a = kiln.tensor(rand(3, 1), requires_grad=True)
    b = kiln.tensor(rand(4), requires_grad=True)
    x, y = kiln.broadcast_tensors(a, b)
    (x * 2 + y * 3).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.full((3, 1), 8.0))
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 9.0))
    assert kiln.autograd.gradcheck(
        lambda p, q: kiln.broadcast_tensors(p, q)[0] * kiln.broadcast_tensors(p, q)[1],
        [kiln.tensor(rand(2, 1), requires_grad=True), kiln.tensor(rand(3), requires_grad=True)])


# meshgrid / cartesian_prod -------------------------------------------------------------------


@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("sizes", [(3,), (2, 3), (2, 3, 4), (0, 2)])
def test_meshgrid_matches_numpy(indexing, sizes):
    arrays = [rand(n) for n in sizes]
    refs = np.meshgrid(*arrays, indexing=indexing)
    outs = kiln.meshgrid(*[kiln.tensor(a) for a in arrays], indexing=indexing)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert tuple(o.shape) == r.shape
        np.testing.assert_array_equal(o.numpy(), r)
    listed = kiln.meshgrid([kiln.tensor(a) for a in arrays], indexing=indexing)
    for o, r in zip(listed, refs):
        np.testing.assert_array_equal(o.numpy(), r)


def test_meshgrid_default_warns_and_uses_ij():
    a, b = kiln.arange(3), kiln.arange(2)
    with pytest.warns(UserWarning, match="indexing"):
        x, y = kiln.meshgrid(a, b)
    assert x.shape == (3, 2)
    np.testing.assert_array_equal(y.numpy(), np.meshgrid(np.arange(3), np.arange(2),
                                                         indexing="ij")[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kiln.meshgrid(a, b, indexing="ij")


def test_meshgrid_zero_dim_and_grad():
    x, y = kiln.meshgrid(kiln.tensor(2.0), kiln.tensor([1.0, 2.0]), indexing="ij")
    assert x.shape == (1, 2) and x.tolist() == [[2.0, 2.0]]
    a = kiln.tensor(rand(3), requires_grad=True)
    b = kiln.tensor(rand(2), requires_grad=True)
    gx, gy = kiln.meshgrid(a, b, indexing="xy")
    (gx * gy).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.full(3, b.detach().numpy().sum()))
    np.testing.assert_allclose(b.grad.numpy(), np.full(2, a.detach().numpy().sum()))
    assert kiln.autograd.gradcheck(
        lambda p, q: kiln.meshgrid(p, q, indexing="xy")[0] * kiln.meshgrid(p, q, indexing="xy")[1],
        [kiln.tensor(rand(2), requires_grad=True), kiln.tensor(rand(3), requires_grad=True)])


def test_meshgrid_errors():
    with pytest.raises(RuntimeError, match=r"\[meshgrid\].*indexing"):
        kiln.meshgrid(kiln.ones(2), indexing="ji")
    with pytest.raises(RuntimeError, match=r"\[meshgrid\].*0D or 1D.*\[2, 2\]"):
        kiln.meshgrid(kiln.ones(2, 2), indexing="ij")
    with pytest.raises(RuntimeError, match=r"\[meshgrid\].*same dtype"):
        kiln.meshgrid(kiln.ones(2), kiln.ones(2, dtype=kiln.int64), indexing="ij")
    with pytest.raises(RuntimeError, match=r"\[meshgrid\].*non-empty"):
        kiln.meshgrid(indexing="ij")


def test_cartesian_prod_matches_itertools():
    a, b, c = [1, 2, 3], [4, 5], [6, 7]
    out = kiln.cartesian_prod(kiln.tensor(a), kiln.tensor(b), kiln.tensor(c))
    assert out.dtype == kiln.int64
    assert out.tolist() == [list(p) for p in itertools.product(a, b, c)]
    single = kiln.tensor([1.5, 2.5])
    assert kiln.cartesian_prod(single).tolist() == [1.5, 2.5]
    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    y = kiln.tensor([3.0, 4.0, 5.0], requires_grad=True)
    kiln.cartesian_prod(x, y).prod(1).sum().backward()
    assert x.grad.tolist() == [12.0, 12.0] and y.grad.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(RuntimeError, match=r"\[cartesian_prod\].*1D.*\[2, 2\]"):
        kiln.cartesian_prod(kiln.ones(2, 2), kiln.ones(2))


# set_printoptions ----------------------------------------------------------------------------


def test_default_repr_formats():
    assert repr(kiln.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(kiln.tensor([1.25, -2.5])) == "tensor([ 1.2500, -2.5000])"
    assert repr(kiln.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00])"
    # PyTorch switches to scientific notation when the range spans over 1000x.
    assert repr(kiln.tensor([1.0, 2000.0])) == "tensor([1.0000e+00, 2.0000e+03])"
    assert repr(kiln.tensor([1, 20])) == "tensor([ 1, 20])"
    # Widths come from the finite values, as in PyTorch.
    assert repr(kiln.tensor([float("nan"), 1.0])) == "tensor([nan, 1.])"
    assert repr(kiln.tensor([float("-inf"), 10.5])) == "tensor([   -inf, 10.5000])"


def test_precision_and_sci_mode(restore_printoptions):
    t = kiln.tensor([1.23456789, 2.5])
    kiln.set_printoptions(precision=2)
    assert repr(t) == "tensor([1.23, 2.50])"
    kiln.set_printoptions(sci_mode=True)
    assert repr(t) == "tensor([1.23e+00, 2.50e+00])"
    kiln.set_printoptions(precision=6, sci_mode=False)
    assert (repr(kiln.tensor([1e-5, 1.0], dtype=kiln.float64)) ==
            "tensor([0.000010, 1.000000], dtype=kiln.float64)")
    kiln.set_printoptions()  # sci_mode back to automatic; precision stays
    assert repr(kiln.tensor([1e-5, 1.0], dtype=kiln.float64)).startswith("tensor([1.000000e-05")


def test_threshold_and_edgeitems(restore_printoptions):
    t = kiln.arange(10)
    assert repr(t) == "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"
    kiln.set_printoptions(threshold=5)
    assert repr(t) == "tensor([0, 1, 2,  ..., 7, 8, 9])"
    kiln.set_printoptions(edgeitems=1)
    assert repr(t) == "tensor([0,  ..., 9])"
    m = kiln.arange(36).reshape(6, 6)
    kiln.set_printoptions(edgeitems=2)
    assert repr(m) == ("tensor([[ 0,  1,  ...,  4,  5],\n"
                       "        [ 6,  7,  ..., 10, 11],\n"
                       "        ...,\n"
                       "        [24, 25,  ..., 28, 29],\n"
                       "        [30, 31,  ..., 34, 35]])")


def test_summarized_width_comes_from_shown_values(restore_printoptions):
    kiln.set_printoptions(threshold=2, edgeitems=1)
    t = kiln.tensor([1.0, 12345.678, 2.0])
    assert repr(t) == "tensor([1.,  ..., 2.])"


def test_linewidth_wraps(restore_printoptions):
    t = kiln.arange(30)
    kiln.set_printoptions(linewidth=30)
    lines = repr(t).split("\n")
    assert len(lines) > 1 and all(len(line) <= 30 for line in lines)
    assert lines[1].startswith("        ")
    assert [int(v) for v in repr(t)[8:-2].replace("\n", "").split(",")] == list(range(30))


def test_suffix_wraps_to_a_new_line(restore_printoptions):
    kiln.set_printoptions(linewidth=40)
    text = repr(kiln.tensor([1.5, 2.5, 3.5, 4.5, 5.5], dtype=kiln.float64))
    assert text == "tensor([1.5000, 2.5000, 3.5000, 4.5000,\n        5.5000], dtype=kiln.float64)"
    text = repr(kiln.tensor([1.5, 2.5, 3.5, 4.5], dtype=kiln.float64))
    assert text == "tensor([1.5000, 2.5000, 3.5000, 4.5000],\n       dtype=kiln.float64)"


def test_profiles_round_trip(restore_printoptions):
    from kiln import _tensor_str

    defaults = _tensor_str.get_printoptions()
    assert defaults == {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
                        "sci_mode": None}
    big = kiln.arange(2000)
    kiln.set_printoptions(profile="short")
    assert repr(kiln.tensor([1.23456])) == "tensor([1.23])"
    assert repr(big).startswith("tensor([   0,    1,  ...,")
    kiln.set_printoptions(profile="full")
    assert "..." not in repr(big) and repr(big).count(",") == 1999
    kiln.set_printoptions(profile="default")
    assert _tensor_str.get_printoptions() == defaults
    assert repr(big).startswith("tensor([   0,    1,    2,  ...,")
    with _tensor_str.printoptions(precision=1):
        assert repr(kiln.tensor([1.25])) == "tensor([1.2])"
    assert _tensor_str.get_printoptions() == defaults
    with pytest.raises(ValueError, match=r"\[set_printoptions\].*'long'"):
        kiln.set_printoptions(profile="long")


# Tensor.type / Tensor.new_tensor -------------------------------------------------------------


@pytest.mark.parametrize("dtype,name", [
    (kiln.float32, "FloatTensor"), (kiln.float64, "DoubleTensor"), (kiln.float16, "HalfTensor"),
    (kiln.bfloat16, "BFloat16Tensor"), (kiln.int64, "LongTensor"), (kiln.int32, "IntTensor"),
    (kiln.int16, "ShortTensor"), (kiln.int8, "CharTensor"), (kiln.uint8, "ByteTensor"),
    (kiln.bool, "BoolTensor"),
])
def test_tensor_type_names(dtype, name):
    t = kiln.zeros(2, dtype=dtype)
    assert t.type() == "kiln." + name
    for spelling in ("kiln." + name, "torch." + name):
        assert t.float().type(spelling).dtype == dtype


def test_tensor_type_casts():
    t = kiln.tensor([1.7, -2.2])
    assert t.type(kiln.float32) is t
    assert t.type("kiln.FloatTensor") is t
    out = t.type(kiln.int64)
    assert out.dtype == kiln.int64 and out.tolist() == [1, -2]
    assert t.type(dtype=kiln.float64, non_blocking=True).dtype == kiln.float64
    with pytest.raises(ValueError, match=r"\[Tensor.type\].*'kiln.NopeTensor'"):
        t.type("kiln.NopeTensor")
    with pytest.raises(ValueError, match=r"\[Tensor.type\]"):
        t.type("float32")
    with pytest.raises(TypeError, match=r"\[Tensor.type\]"):
        t.type(3)


def test_new_tensor():
    base = kiln.zeros(2, dtype=kiln.float64)
    t = base.new_tensor([1, 2])
    assert t.dtype == kiln.float64 and t.device == base.device and t.tolist() == [1.0, 2.0]
    assert not t.requires_grad
    u = base.new_tensor([[1.5]], dtype=kiln.int32, device="cpu", requires_grad=False)
    assert u.dtype == kiln.int32 and u.shape == (1, 1)
    g = base.new_tensor(np.array([0.5]), requires_grad=True)
    assert g.requires_grad and g.is_leaf
    src = kiln.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="clone"):
        copy = base.new_tensor(src)
    assert copy.dtype == kiln.float64 and not copy.requires_grad
    copy.add_(1)
    assert src.tolist() == [1.0, 1.0]


# Against PyTorch (GPU machine) ------------------------------------------------------------------

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


def test_info_vs_torch():
    torch = pytest.importorskip("torch")
    for dtype in FLOATS:
        ours, ref = kiln.finfo(dtype), torch.finfo(getattr(torch, _name(dtype)))
        for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution",
                     "dtype"):
            assert getattr(ours, attr) == getattr(ref, attr), (dtype, attr)
    for dtype in INTS:
        ours, ref = kiln.iinfo(dtype), torch.iinfo(getattr(torch, _name(dtype)))
        assert (ours.bits, ours.max, ours.min, ours.dtype) == (ref.bits, ref.max, ref.min,
                                                               ref.dtype)


def test_promotion_vs_torch():
    torch = pytest.importorskip("torch")
    tt = lambda d: getattr(torch, _name(d))  # noqa: E731
    for a, b in itertools.product(ALL, repeat=2):
        assert _name(kiln.promote_types(a, b)) == str(torch.promote_types(tt(a), tt(b)))[6:]
        assert kiln.can_cast(a, b) == torch.can_cast(tt(a), tt(b))
        for number in (True, 2, 2.5):
            ours = kiln.result_type(kiln.ones(2, dtype=a), number)
            assert _name(ours) == str(torch.result_type(torch.ones(2, dtype=tt(a)), number))[6:]


@pytest.mark.parametrize("device", DEVICES)
def test_grids_vs_torch(device):
    torch = pytest.importorskip("torch")
    a, b, c = rand(3), rand(2), rand(4)
    for indexing in ("ij", "xy"):
        ours = kiln.meshgrid(*[kiln.tensor(x, device=device) for x in (a, b, c)],
                             indexing=indexing)
        ref = torch.meshgrid(*[torch.tensor(x, device=device) for x in (a, b, c)],
                             indexing=indexing)
        for o, r in zip(ours, ref):
            np.testing.assert_array_equal(o.cpu().numpy(), r.cpu().numpy())
    ours = kiln.cartesian_prod(kiln.tensor(a, device=device), kiln.tensor(b, device=device))
    ref = torch.cartesian_prod(torch.tensor(a, device=device), torch.tensor(b, device=device))
    np.testing.assert_array_equal(ours.cpu().numpy(), ref.cpu().numpy())
    x, y = rand(3, 1), rand(2, 1, 4)
    for o, r in zip(kiln.broadcast_tensors(kiln.tensor(x, device=device),
                                           kiln.tensor(y, device=device)),
                    torch.broadcast_tensors(torch.tensor(x, device=device),
                                            torch.tensor(y, device=device))):
        np.testing.assert_array_equal(o.cpu().numpy(), r.cpu().numpy())
    assert tuple(kiln.broadcast_shapes((3, 1), (2, 1, 4))) == tuple(
        torch.broadcast_shapes((3, 1), (2, 1, 4)))


@pytest.mark.parametrize("device", DEVICES)
def test_type_and_new_tensor_vs_torch(device):
    torch = pytest.importorskip("torch")
    for dtype in ALL:
        ours = kiln.zeros(2, dtype=dtype, device=device).type()
        ref = torch.zeros(2, dtype=getattr(torch, _name(dtype)), device=device).type()
        assert ours == ref.replace("torch.", "kiln.")
    ours = kiln.ones(2, dtype=kiln.int32, device=device).new_tensor([1.5, 2.5])
    ref = torch.ones(2, dtype=torch.int32, device=device).new_tensor([1.5, 2.5])
    assert _name(ours.dtype) == str(ref.dtype)[6:] and ours.device.type == ref.device.type
    assert ours.tolist() == ref.tolist()


def test_repr_vs_torch(restore_printoptions):
    torch = pytest.importorskip("torch")
    values = [[1.0, 2.0], [1.25, -2.5], [1e-5, 1.0], [1.0, 2000.0], [3.0, 1e9],
              np.linspace(-3, 3, 40).tolist(), [float("nan"), 1.0, float("inf")]]
    try:
        for options in ({}, {"precision": 2}, {"sci_mode": True}, {"sci_mode": False},
                        {"threshold": 10, "edgeitems": 2}, {"linewidth": 40},
                        {"profile": "short"}):
            kiln.set_printoptions(**options)
            torch.set_printoptions(**options)
            for v in values:
                # float32 only: a dtype suffix is one character shorter in kiln, which
                # can move a line break.
                assert repr(kiln.tensor(v)) == repr(torch.tensor(v)), (options, v)
            kiln.set_printoptions(profile="default")
            torch.set_printoptions(profile="default")
    finally:
        torch.set_printoptions(profile="default")
