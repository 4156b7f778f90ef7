"""Shape ops, sorting and indexing against the installed PyTorch on the same device,
forward and gradients (runs where PyTorch is installed: the GPU machine)."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

# seeded_data is an autouse fixture: importing it enables it here.
from torch_compare import (  # noqa: E402, F401
    DEVICES, Fixed, GRAD_DTYPES, HALF_DTYPES, Strided, U, bools, check, check_raises, distinct,
    ints, reseed, seeded_data)

reseed(__name__)

SHAPE = [
    ("cat_dim0", lambda lib, a, b: lib.cat([a, b]), [U(2, 3), U(4, 3)]),
    ("cat_dim1_three", lambda lib, a, b: lib.cat((a, b, a), dim=1), [U(2, 3), Strided(U(2, 4))]),
    ("cat_neg_dim_empty", lambda lib, a, b: lib.cat([a, b], -1), [U(2, 0), U(2, 3)]),
    ("concat", lambda lib, a, b: lib.concat([a, b], dim=0), [U(1, 3), U(2, 3)]),
    ("stack", lambda lib, a, b: lib.stack([a, b]), [U(2, 3), U(2, 3)]),
    ("stack_last", lambda lib, a, b: lib.stack([a, b, a], dim=-1), [Strided(U(2, 3)), U(2, 3)]),
    ("hstack", lambda lib, a, b: lib.hstack([a, b]), [U(2, 3), U(2, 1)]),
    ("vstack", lambda lib, a, b: lib.vstack([a, b]), [U(3), U(2, 3)]),
    ("split_int", lambda lib, x: lib.split(x, 2, dim=1), [U(3, 5)]),
    ("split_sizes", lambda lib, x: x.split([1, 3, 1], 1), [Strided(U(3, 5))]),
    ("split_with_sizes", lambda lib, x: x.split_with_sizes([2, 1]), [U(3, 5)]),
    ("chunk", lambda lib, x: lib.chunk(x, 3, dim=1), [U(2, 7)]),
    ("chunk_uneven", lambda lib, x: x.chunk(4), [U(6, 2)]),
    ("unbind", lambda lib, x: lib.unbind(x, 1), [U(2, 3)]),
    ("unbind_method", lambda lib, x: x.unbind(), [Strided(U(3, 2))]),
    ("repeat", lambda lib, x: x.repeat(2, 1, 3), [U(2, 3)]),
    ("repeat_tuple", lambda lib, x: x.repeat((2, 2)), [Strided(U(2, 3))]),
    ("tile", lambda lib, x: lib.tile(x, (2,)), [U(2, 3)]),
    ("flip", lambda lib, x: lib.flip(x, (0, 2)), [U(2, 3, 4)]),
    ("flip_method", lambda lib, x: x.flip(-1), [Strided(U(3, 4))]),
    ("fliplr", lambda lib, x: lib.fliplr(x) + lib.flipud(x), [U(3, 3)]),
    ("roll", lambda lib, x: lib.roll(x, 1, 0), [U(3, 4)]),
    ("roll_multi", lambda lib, x: x.roll((2, -1), (1, 0)), [U(3, 4)]),
    ("roll_flat", lambda lib, x: lib.roll(x, 5), [Strided(U(3, 4))]),
    ("tril", lambda lib, x: lib.tril(x), [U(4, 5)]),
    ("tril_diag", lambda lib, x: x.tril(-1), [U(2, 4, 3)]),
    ("triu", lambda lib, x: lib.triu(x, 2), [Strided(U(4, 5))]),
    ("triu_neg", lambda lib, x: x.triu(diagonal=-1), [U(4, 3)]),
    ("permute", lambda lib, x: x.permute(2, 0, 1), [U(2, 3, 4)]),
    ("permute_fn", lambda lib, x: lib.permute(x, (1, 0, 2)), [Strided(U(2, 3, 4))]),
    ("transpose", lambda lib, x: lib.transpose(x, 0, 2), [U(2, 3, 4)]),
    ("t", lambda lib, x: x.t() + x.T, [U(3, 3)]),
    ("mT", lambda lib, x: x.mT, [U(2, 3, 4)]),
    ("swapaxes", lambda lib, x: lib.swapaxes(x, 0, 1), [U(2, 3)]),
    ("movedim", lambda lib, x: lib.movedim(x, 0, -1), [U(2, 3, 4)]),
    ("moveaxis_multi", lambda lib, x: x.moveaxis((0, 1), (2, 0)), [U(2, 3, 4)]),
    ("movedim_multi", lambda lib, x: lib.movedim(x, [0, -1], [-1, 1]), [Strided(U(2, 3, 4))]),
    ("diagonal", lambda lib, x: lib.diagonal(x, 1, 2, 0), [U(3, 2, 4)]),
    ("diagonal_method", lambda lib, x: x.diagonal(offset=-1), [Strided(U(4, 3))]),
    ("diag_1d", lambda lib, x: lib.diag(x, -2), [U(3)]),
    ("diag_2d", lambda lib, x: x.diag(1), [Strided(U(3, 4))]),
    ("trace", lambda lib, x: lib.trace(x), [U(3, 4)]),
    ("repeat_interleave", lambda lib, x: lib.repeat_interleave(x, 2), [U(2, 3)]),
    ("repeat_interleave_dim", lambda lib, x: x.repeat_interleave(3, dim=-1),
     [Strided(U(2, 3))]),
    ("repeat_interleave_tensor",
     lambda lib, x: x.repeat_interleave(lib.tensor([2, 0, 1], device=x.device), dim=0),
     [U(3, 2)]),
    ("reshape", lambda lib, x: x.reshape(4, -1), [U(2, 3, 4)]),
    ("reshape_noncontig", lambda lib, x: lib.reshape(x, (-1,)), [Strided(U(3, 4))]),
    ("view", lambda lib, x: x.view(6, 4), [U(2, 3, 4)]),
    ("view_as", lambda lib, x, y: x.view_as(y) + y, [U(2, 6), U(3, 4)]),
    ("reshape_as", lambda lib, x, y: x.reshape_as(y) * y, [Strided(U(4, 3)), U(3, 4)]),
    ("expand", lambda lib, x: x.expand(2, 3, 4), [U(3, 1)]),
    ("expand_neg", lambda lib, x: x.expand(5, -1), [U(1, 3)]),
    ("expand_as", lambda lib, x, y: x.expand_as(y) * y, [U(4), U(3, 4)]),
    ("broadcast_to", lambda lib, x: lib.broadcast_to(x, (2, 3)), [U(3)]),
    ("squeeze", lambda lib, x: x.squeeze(), [U(1, 3, 1)]),
    ("squeeze_dim", lambda lib, x: lib.squeeze(x, -1), [U(1, 3, 1)]),
    ("squeeze_dims", lambda lib, x: x.squeeze((0, 2)), [U(1, 3, 1, 2)]),
    ("unsqueeze", lambda lib, x: lib.unsqueeze(x, 1), [U(2, 3)]),
    ("unsqueeze_neg", lambda lib, x: x.unsqueeze(-1), [Strided(U(2, 3))]),
    ("narrow", lambda lib, x: lib.narrow(x, 1, 1, 2), [U(3, 4)]),
    ("narrow_method", lambda lib, x: x.narrow(0, 2, 1), [Strided(U(3, 4))]),
    ("flatten", lambda lib, x: lib.flatten(x), [U(2, 3, 4)]),
    ("flatten_range", lambda lib, x: x.flatten(1, 2), [Strided(U(2, 3, 4))]),
    ("unflatten", lambda lib, x: x.unflatten(1, (2, 3)), [U(2, 6)]),
    ("select", lambda lib, x: lib.select(x, 1, -1), [U(2, 3)]),
    ("unfold", lambda lib, x: x.unfold(1, 3, 2), [U(2, 7)]),
    ("take", lambda lib, x, i: lib.take(x, i), [U(3, 4), Fixed(np.array([[0, 11], [5, 5]]))]),
    ("contiguous", lambda lib, x: x.contiguous(), [Strided(U(3, 4))]),
    ("detach", lambda lib, x: x.detach() * x + lib.detach(x), [U(3, 4)]),
    ("clone", lambda lib, x: lib.clone(x), [Strided(U(3, 4), "step")]),
]

SHAPE_PARAMS = [pytest.param(f, i, True, id=n) for n, f, i in SHAPE] + [
    pytest.param(lambda lib, x: lib.as_strided(x, (2, 2), (1, 2), 1), [U(6)], True,
                 id="as_strided"),
    pytest.param(lambda lib, x: lib.as_strided(x, (3, 3), (1, 1), 0), [U(6)], True,
                 id="as_strided_overlapping")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("fn,inputs,grad", SHAPE_PARAMS)
def test_shape(fn, inputs, grad, dtype, device):
    check(fn, inputs, device, dtype, grad=grad)


@pytest.mark.parametrize("device", DEVICES)
def test_shape_integer_bool_0d_and_empty(device):
    i, b = Fixed(ints(2, 3)), Fixed(bools(2, 3))
    for fn in [lambda lib, x: lib.cat([x, x], 1), lambda lib, x: lib.stack([x, x]),
               lambda lib, x: x.flip(0).roll(1, 1).tril(), lambda lib, x: x.repeat(2, 2),
               lambda lib, x: x.t().reshape(-1), lambda lib, x: x.chunk(2, 1),
               lambda lib, x: x.unsqueeze(0).expand(2, 2, 3)]:
        check(fn, [i], device)
        check(fn, [b], device)
    for fn in [lambda lib, x: x.reshape(1, 1), lambda lib, x: x.unsqueeze(0),
               lambda lib, x: x.squeeze(), lambda lib, x: x.flatten(), lambda lib, x: x.expand(3),
               lambda lib, x: lib.stack([x, x]), lambda lib, x: x.flip(0) * x.roll(0)]:
        check(fn, [U()], device)
    for fn in [lambda lib, x: x.reshape(3, 0), lambda lib, x: lib.cat([x, x], 0),
               lambda lib, x: x.flip(1), lambda lib, x: x.transpose(0, 1).flatten(),
               lambda lib, x: x.split(2, 1), lambda lib, x: x.tril()]:
        check(fn, [U(0, 3)], device)
    check_raises(lambda lib, x: x.view(-1), [Strided(U(3, 4))], device)
    check_raises(lambda lib, a, b: lib.cat([a, b]), [U(2, 3), U(2, 4)], device)
    check_raises(lambda lib, x: x.reshape(5, -1), [U(3, 4)], device)
    check_raises(lambda lib, x: x.permute(0, 0), [U(3, 4)], device)
    check_raises(lambda lib, x: x.expand(3, 5), [U(3, 4)], device)


def _nan_data():
    x = distinct(3, 6)
    x[0, 2] = x[1, 0] = x[1, 4] = x[2, 5] = math.nan
    x[2, 1] = x[2, 3]  # a tie, ordered by the stable sort
    return x


SORT = [
    # With stable=True PyTorch makes dim and descending keyword-only.
    ("sort", lambda lib, x: lib.sort(x, stable=True)),
    ("sort_dim0_desc", lambda lib, x: x.sort(dim=0, descending=True, stable=True)),
    ("sort_default", lambda lib, x: x.sort(1)),
    ("argsort", lambda lib, x: lib.argsort(x, dim=-1, stable=True)),
    ("argsort_desc", lambda lib, x: x.argsort(dim=0, descending=True, stable=True)),
    ("topk", lambda lib, x: lib.topk(x, 2)),
    ("topk_smallest", lambda lib, x: x.topk(3, dim=0, largest=False)),
    ("topk_dim0", lambda lib, x: x.topk(1, 0)),
    ("sort_flat_desc", lambda lib, x: lib.sort(x.flatten(), descending=True, stable=True)[0]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in SORT])
def test_sort_family(fn, dtype, device):
    check(fn, [distinct(3, 6)], device, dtype)
    check(fn, [Strided(distinct(6, 3), "step")], device, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in SORT[:5]])
def test_sort_with_nans(fn, device):
    check(fn, [_nan_data()], device)


@pytest.mark.parametrize("device", DEVICES)
def test_topk_with_one_nan_per_row(device):
    x = distinct(3, 6)
    x[0, 2] = x[1, 5] = x[2, 0] = math.nan
    check(lambda lib, x: x.topk(2), [x], device)
    check(lambda lib, x: x.topk(2, largest=False), [x], device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_sort_integers(dtype, device):
    x = bools(4, 5) if dtype == np.bool_ else ints(4, 5, low=0, high=4, dtype=dtype)
    for fn in [lambda lib, x: x.sort(stable=True),
               lambda lib, x: x.sort(dim=0, descending=True, stable=True),
               lambda lib, x: x.argsort(stable=True), lambda lib, x: lib.unique(x),
               lambda lib, x: lib.unique(x, return_inverse=True, return_counts=True)]:
        check(fn, [Fixed(x)], device)


@pytest.mark.parametrize("device", DEVICES)
def test_unique(device):
    x = Fixed(np.array([[3.0, 1.0, 2.0], [1.0, 3.0, -1.5]]))
    for fn in [lambda lib, x: lib.unique(x), lambda lib, x: x.unique(return_counts=True),
               lambda lib, x: lib.unique(x, sorted=True, return_inverse=True),
               lambda lib, x: lib.unique(x, return_inverse=True, return_counts=True),
               lambda lib, x: lib.unique(x.t(), return_inverse=True),
               lambda lib, x: lib.unique(x[:, :0])]:
        check(fn, [x], device)


@pytest.mark.parametrize("device", DEVICES)
def test_unique_dim(device):
    rows = Fixed(np.array([[1, 2], [0, 5], [1, 2], [0, 5], [0, 1]]))
    check(lambda lib, x: lib.unique(x, dim=0, return_inverse=True, return_counts=True), [rows],
          device)
    check(lambda lib, x: lib.unique(x, dim=1), [rows], device)
    cube = Fixed(np.array([[[1, 0], [2, 2]], [[1, 0], [2, 2]], [[0, 3], [1, 1]]]))
    check(lambda lib, x: lib.unique(x, dim=0, return_inverse=True, return_counts=True), [cube],
          device)
    check(lambda lib, x: lib.unique(x, dim=-1, return_counts=True), [cube], device)


@pytest.mark.parametrize("device", DEVICES)
def test_unique_with_nans(device):
    # NaN != NaN, so each NaN is its own entry, sorted after every number.
    x = Fixed(np.array([2.0, math.nan, 1.0, 2.0, math.nan, -1.0]))
    check(lambda lib, x: lib.unique(x), [x], device)
    check(lambda lib, x: lib.unique(x, return_counts=True), [x], device)


# (id, fn, inputs): indices are Fixed int64 arrays, masks Fixed bool arrays.
PERM = np.array([[2, 0, 1, 3], [1, 2, 0, 0]])
INDEX = [
    ("gather", lambda lib, x, i: lib.gather(x, 1, i), [U(2, 5), Fixed(PERM)]),
    ("gather_dim0", lambda lib, x, i: x.gather(0, i), [Strided(U(3, 4)), Fixed(PERM % 3)]),
    ("scatter", lambda lib, x, i, s: lib.scatter(x, 1, i, s),
     [U(2, 5), Fixed(np.array([[4, 0, 2], [1, 3, 0]])), U(2, 3)]),
    ("scatter_value", lambda lib, x, i: x.scatter(0, i, 1.5),
     [U(3, 4), Fixed(np.array([[2, 0, 1, 1]]))]),
    ("scatter_inplace", lambda lib, x, i, s: (x * 1).scatter_(1, i, s),
     [U(2, 5), Fixed(np.array([[4, 0], [1, 3]])), Strided(U(2, 2))]),
    ("scatter_add", lambda lib, x, i, s: lib.scatter_add(x, 1, i, s),
     [U(2, 5), Fixed(PERM), U(2, 4)]),
    ("scatter_add_inplace", lambda lib, x, i, s: (x * 1).scatter_add_(0, i, s),
     [U(3, 4), Fixed(PERM % 3), U(2, 4)]),
    ("index_select", lambda lib, x, i: lib.index_select(x, 0, i),
     [U(4, 3), Fixed(np.array([3, 0, 0, 2]))]),
    ("index_select_dim1", lambda lib, x, i: x.index_select(1, i),
     [Strided(U(4, 3)), Fixed(np.array([2, 1]))]),
    ("index_add", lambda lib, x, i, s: lib.index_add(x, 0, i, s, alpha=2.0),
     [U(4, 3), Fixed(np.array([3, 0, 3])), U(3, 3)]),
    ("index_add_inplace", lambda lib, x, i, s: (x * 1).index_add_(1, i, s),
     [U(2, 4), Fixed(np.array([1, 1, 0])), U(2, 3)]),
    ("masked_fill", lambda lib, x, m: lib.masked_fill(x, m, -1.0), [U(3, 4), Fixed(bools(3, 4))]),
    ("masked_fill_broadcast", lambda lib, x, m: x.masked_fill(m, 2.5),
     [Strided(U(3, 4)), Fixed(bools(4))]),
    ("masked_fill_tensor_value", lambda lib, x, m, v: x.masked_fill(m, v),
     [U(3, 4), Fixed(bools(3, 1)), U()]),
    ("masked_fill_inplace", lambda lib, x, m: (x * 1).masked_fill_(m, 0.5),
     [U(3, 4), Fixed(bools(3, 4))]),
    ("masked_select", lambda lib, x, m: lib.masked_select(x, m), [U(3, 4), Fixed(bools(3, 4))]),
    ("masked_select_broadcast", lambda lib, x, m: x.masked_select(m),
     [Strided(U(3, 4)), Fixed(bools(4))]),
    ("where_cond_only_values", lambda lib, x: lib.where(x > 0, x, x * 2), [U(3, 4)]),
    ("index_put", lambda lib, x, i, v: lib.index_put(x, (i,), v),
     [U(4, 3), Fixed(np.array([3, 1])), U(2, 3)]),
    ("index_put_accumulate", lambda lib, x, i, j, v: x.index_put((i, j), v, accumulate=True),
     [U(4, 3), Fixed(np.array([3, 1, 3])), Fixed(np.array([0, 2, 0])), U(3)]),
    ("index_put_inplace", lambda lib, x, i, v: (x * 1).index_put_((i,), v, accumulate=True),
     [U(4, 3), Fixed(np.array([2, 2])), U(3)]),
    ("put_inplace", lambda lib, x, i, v: (x * 1).put_(i, v),
     [U(3, 4), Fixed(np.array([7, 1])), U(2)]),
    ("put", lambda lib, x, i, v: x.put(i, v), [U(3, 4), Fixed(np.array([0, 11, 5])), U(3)]),
    ("put_accumulate", lambda lib, x, i, v: x.put(i, v, accumulate=True),
     [U(3, 4), Fixed(np.array([0, 11, 0])), U(3)]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("fn,inputs", [pytest.param(f, i, id=n) for n, f, i in INDEX])
def test_index_ops(fn, inputs, dtype, device):
    check(fn, inputs, device, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_nonzero_and_integer_indexing(device):
    m = Fixed(bools(3, 4))
    check(lambda lib, m: lib.nonzero(m), [m], device)
    check(lambda lib, m: m.nonzero(as_tuple=True), [m], device)
    check(lambda lib, x: lib.nonzero(x), [Fixed(ints(2, 3, 2))], device)
    check(lambda lib, x: x.nonzero(), [U()], device)
    check(lambda lib, x: x.nonzero(), [U(0, 2)], device)
    check(lambda lib, x: x.count_nonzero(1), [Fixed(ints(3, 4))], device)
    x = Fixed(ints(3, 4))
    i = Fixed(PERM % 3)
    check(lambda lib, x, i: [x.gather(0, i), x.scatter_add(0, i, x[:2]),
                             x.index_select(1, i[0]), x.masked_fill(x > 0, 7),
                             x[x > 0], x.index_add(0, i[1, :3], x[:3])], [x, i], device)


# fn(x, lib, device) -> x[...]
GETITEM = [
    ("int", lambda x, lib, d: x[1]),
    ("neg_int", lambda x, lib, d: x[-1, 2]),
    ("all_ints", lambda x, lib, d: x[1, 2, 3]),
    ("slice", lambda x, lib, d: x[1:3]),
    ("slice_step", lambda x, lib, d: x[::2, 1::2]),
    ("slice_neg", lambda x, lib, d: x[-2:, :-1]),
    ("slice_empty", lambda x, lib, d: x[2:1]),
    ("none", lambda x, lib, d: x[None, 1, :, None]),
    ("ellipsis", lambda x, lib, d: x[..., 1]),
    ("ellipsis_none", lambda x, lib, d: x[1, ..., None]),
    ("int_tensor", lambda x, lib, d: x[lib.tensor([2, 0, 2], device=d)]),
    ("int_tensor_2d", lambda x, lib, d: x[lib.tensor([[0, 1], [2, 2]], device=d)]),
    ("int_list", lambda x, lib, d: x[[0, 2]]),
    ("int_tensor_dim1", lambda x, lib, d: x[:, lib.tensor([3, 0], device=d)]),
    ("two_int_tensors", lambda x, lib, d: x[lib.tensor([0, 2], device=d),
                                            lib.tensor([1, 3], device=d)]),
    ("separated_advanced", lambda x, lib, d: x[lib.tensor([0, 2], device=d), :,
                                               lib.tensor([1, 0], device=d)]),
    ("adjacent_advanced_after_slice", lambda x, lib, d: x[:, lib.tensor([1, 2], device=d),
                                                          lib.tensor([0, 4], device=d)]),
    ("broadcast_advanced", lambda x, lib, d: x[lib.tensor([[0], [2]], device=d),
                                               lib.tensor([1, 3], device=d)]),
    ("bool_mask", lambda x, lib, d: x[x > 0.5]),
    ("bool_mask_dim0", lambda x, lib, d: x[lib.tensor([True, False, True], device=d)]),
    ("bool_mask_2d_slice", lambda x, lib, d: x[1:, x[0, :, 0] > 0]),
    ("int_tensor_0d", lambda x, lib, d: x[lib.tensor(1, device=d)]),
    ("mixed_all", lambda x, lib, d: x[None, ..., lib.tensor([0, 4, 4], device=d)][:, 1:]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in GETITEM])
def test_getitem(fn, dtype, device):
    check(lambda lib, x: fn(x, lib, device), [U(3, 4, 5)], device, dtype)
    check(lambda lib, x: fn(x, lib, device), [Strided(U(3, 4, 5))], device, dtype)


SETITEM = [
    ("int_scalar", lambda y, v, lib, d: y.__setitem__(1, 2.5)),
    ("slice_tensor", lambda y, v, lib, d: y.__setitem__((slice(None), slice(1, 3)), v[:, :2])),
    ("broadcast_row", lambda y, v, lib, d: y.__setitem__((slice(0, 2),), v[0])),
    ("ellipsis", lambda y, v, lib, d: y.__setitem__((Ellipsis, 0), v[:, 0])),
    ("step", lambda y, v, lib, d: y.__setitem__((slice(None, None, 2),), v[:2])),
    ("bool_mask_scalar", lambda y, v, lib, d: y.__setitem__(y > 0, -1.0)),
    ("bool_mask_tensor", lambda y, v, lib, d: y.__setitem__(
        lib.tensor([True, False, True], device=d), v[1])),
    ("int_tensor", lambda y, v, lib, d: y.__setitem__(lib.tensor([2, 0], device=d), v[:2])),
    ("int_tensors_pair", lambda y, v, lib, d: y.__setitem__(
        (lib.tensor([0, 2], device=d), lib.tensor([3, 1], device=d)), v[0, :2])),
    ("none_zero_d", lambda y, v, lib, d: y.__setitem__((None, 1, 2), v[0, 0])),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("op", [pytest.param(f, id=n) for n, f in SETITEM])
def test_setitem(op, dtype, device):
    def fn(lib, x, v):
        y = x * 1
        op(y, v, lib, device)
        return y

    check(fn, [U(3, 4), U(3, 4)], device, dtype)
    check(fn, [Strided(U(3, 4)), Strided(U(3, 4), "step")], device, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_setitem_integer_and_bool(device):
    def fn(lib, x, b):
        x[0] = 7
        x[x < 0] = 0
        x[:, lib.tensor([1, 2], device=device)] = x[:, :2] * 2
        b[1:, 0] = True
        return x, b

    check(fn, [Fixed(ints(3, 4)), Fixed(bools(3, 2))], device)


@pytest.mark.parametrize("device", DEVICES)
def test_index_rejections(device):
    check_raises(lambda lib, x: x[3], [U(3, 4)], device)
    check_raises(lambda lib, x: x[0, 0, 0], [U(3, 4)], device)
    check_raises(lambda lib, x: x[x[:2] > 0], [U(3, 4)], device)
    check_raises(lambda lib, x, i: x.gather(1, i), [U(2, 3), Fixed(np.zeros((2, 3)))], device)
    if device == "cpu":  # PyTorch's CUDA index_select raises RuntimeError here, its CPU IndexError
        check_raises(lambda lib, x, i: x.index_select(0, i), [U(3, 4), Fixed(np.array([[0]]))],
                     device)
    check_raises(lambda lib, x, m: x.masked_fill(m, 1.0), [U(3, 4), Fixed(ints(3, 4))], device)


def test_out_of_range_tensor_indices_cpu():
    # On CUDA PyTorch reports these through a device-side assert that poisons the context.
    for fn, inputs in [
            (lambda lib, x, i: x[i], [U(3, 4), Fixed(np.array([3]))]),
            (lambda lib, x, i: x.gather(1, i), [U(2, 3), Fixed(np.array([[3]]))]),
            (lambda lib, x, i: x.index_select(0, i), [U(3, 4), Fixed(np.array([-4]))])]:
        check_raises(fn, inputs, "cpu")
