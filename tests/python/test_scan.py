"""Scans on the CPU against NumPy: every op of the scan table (KILN_SCAN_OPS, its cases in
scan_cases.py) for values, dims, non-contiguous input, the dtypes of its signature and a float64
gradcheck; then cummax / cummin (PyTorch's index rules), logcumsumexp, and the parallel scan
over long rows (Note [Scan functors]): 0-d / empty inputs, double backward and errors."""

import numpy as np
import pytest

import kiln
from helpers import NP_DTYPE, assert_close, gradcheck, noncontig, rand
from scan_cases import SCAN, ref_extreme

NAN = float("nan")


def grad_of(fn, a):
    x = kiln.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)
    fn(x).sum().backward()
    return x.grad.numpy()


def tied(*shape, dtype=np.float64):
    """Data with many equal values (ties), in `dtype`."""
    return np.round(rand(*shape) * 1.5).astype(dtype)


SIGNATURE = kiln._C._op_table()["scan"]  # name -> Accumulate / Indexed / Floating


def sample(name, *shape):
    _, low, high = SCAN[name]
    return rand(*shape, low=low, high=high)


def values_of(result, name):
    return result.values if SIGNATURE[name] == "Indexed" else result


# ---------------------------------------------------------------- every op of the table


def test_table_is_fully_covered():
    assert set(SIGNATURE) == set(SCAN)
    for name in SCAN:
        assert callable(getattr(kiln, name)) and hasattr(kiln.Tensor, name), name


@pytest.mark.parametrize("name", sorted(SCAN))
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_every_scan_matches_its_reference(name, dim, dtype):
    a = sample(name, 3, 4, 5).astype(NP_DTYPE[dtype])
    want = SCAN[name][0](a, dim)
    tol = 1e-12 if dtype == kiln.float64 else 1e-5
    for x in (kiln.tensor(a), noncontig(a)):
        got = getattr(kiln, name)(x, dim)
        want_values = want
        if SIGNATURE[name] == "Indexed":
            np.testing.assert_array_equal(got.indices.numpy(), want[1])
            got, want_values = got.values, want[0]
        assert got.dtype == dtype
        assert_close(got, want_values, atol=tol, rtol=tol)
        method = values_of(getattr(x, name)(dim=dim), name)  # the Tensor method, by keyword
        np.testing.assert_array_equal(method.numpy(), got.numpy())


@pytest.mark.parametrize("name", sorted(SCAN))
def test_every_scan_gradcheck(name):
    gradcheck(lambda x: values_of(getattr(kiln, name)(x, 1), name), sample(name, 3, 6))


@pytest.mark.parametrize("name", sorted(SCAN))
def test_integer_inputs_follow_the_signature(name):
    a = np.array([[1, 2, 3], [4, -5, 6]], dtype=np.int32)
    x = kiln.tensor(a)
    fn = getattr(kiln, name)
    signature = SIGNATURE[name]
    if signature == "Floating":
        with pytest.raises(NotImplementedError, match=rf"\[{name}\] not implemented for dtype"):
            fn(x, 1)
        return
    got = fn(x, 1)
    if signature == "Indexed":
        assert got.values.dtype == kiln.int32 and got.indices.dtype == kiln.int64
        np.testing.assert_array_equal(got.values.numpy(), SCAN[name][0](a, 1)[0])
        return
    assert got.dtype == kiln.int64  # Accumulate: integers accumulate in int64
    np.testing.assert_array_equal(got.numpy(), SCAN[name][0](a.astype(np.int64), 1))
    assert fn(x, 1, dtype=kiln.float64).dtype == kiln.float64


@pytest.mark.parametrize("name", sorted(SCAN))
def test_dim_out_of_range_names_the_op(name):
    with pytest.raises(IndexError, match=rf"\[{name}\]"):
        getattr(kiln, name)(kiln.ones(2, 3), 2)


# ---------------------------------------------------------------- cummax / cummin


@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int64, kiln.int32,
                                   kiln.int8, kiln.uint8, kiln.bool])
def test_cummax_cummin_match_reference(is_max, dim, dtype):
    a = rand(2, 3, 5, dtype=np.bool_) if dtype == kiln.bool else tied(2, 3, 5, dtype=NP_DTYPE[dtype])
    fn = kiln.cummax if is_max else kiln.cummin
    values, indices = fn(kiln.tensor(a), dim)
    want_v, want_i = ref_extreme(a, dim, is_max)
    assert values.dtype == dtype and indices.dtype == kiln.int64
    np.testing.assert_array_equal(values.numpy(), want_v)
    np.testing.assert_array_equal(indices.numpy(), want_i)
    got = (noncontig(a).cummax(dim) if is_max else noncontig(a).cummin(dim))
    np.testing.assert_array_equal(got.indices.numpy(), want_i)


def test_cummax_ties_take_the_last_index_and_nan_propagates():
    x = kiln.tensor([1.0, 3.0, 3.0, NAN, 2.0, NAN, 5.0])
    r = kiln.cummax(x, 0)
    assert r.indices.tolist() == [0, 1, 2, 3, 3, 5, 5]
    assert r.values.tolist()[:3] == [1.0, 3.0, 3.0] and np.isnan(r.values.tolist()[3:]).all()
    r = x.cummin(dim=0)
    assert r.indices.tolist() == [0, 0, 0, 3, 3, 5, 5]
    assert kiln.cummin(kiln.tensor([2, 1, 1, 3, 1]), 0).indices.tolist() == [0, 1, 2, 2, 4]


def test_cummax_result_is_a_named_tuple():
    r = kiln.tensor([[1.0, 0.0], [2.0, 3.0]]).cummax(dim=1)
    values, indices = r
    assert type(r).__name__ == "cummax" and type(r).__module__ == "kiln.return_types"
    assert r.values is values and r.indices is indices
    assert values.tolist() == [[1.0, 1.0], [2.0, 3.0]] and indices.tolist() == [[0, 0], [0, 1]]


def test_cummax_0d_and_empty():
    r = kiln.tensor(3.0).cummax(0)
    assert r.values.shape == () and r.values.item() == 3.0 and r.indices.item() == 0
    r = kiln.cummin(kiln.tensor(4), -1)
    assert r.values.item() == 4 and r.indices.dtype == kiln.int64
    r = kiln.zeros(2, 0).cummax(1)
    assert r.values.shape == (2, 0) and r.indices.shape == (2, 0)
    assert kiln.zeros(0, 3).cummin(1).indices.shape == (0, 3)


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_cummax_half_types(dtype):
    a = tied(3, 6)
    r = kiln.tensor(a, dtype=dtype).cummax(1)
    want_v, want_i = ref_extreme(a, 1, True)
    assert r.values.dtype == dtype
    assert_close(r.values.float(), want_v)
    np.testing.assert_array_equal(r.indices.numpy(), want_i)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_grad(name):
    gradcheck(lambda x: getattr(x, name)(1).values, rand(3, 4))
    gradcheck(lambda x: getattr(kiln, name)(x, 0).values, rand(3, 4))
    gradcheck(lambda x: getattr(x, name)(0).values, rand())


def test_cummax_grad_goes_to_the_chosen_elements():
    # indices [0, 1, 2, 2, 4]: the tie at 2 collects two gradients, 3 none.
    assert_close(grad_of(lambda x: x.cummax(0).values, [1.0, 3.0, 3.0, 2.0, 4.0]),
                 [1.0, 1.0, 2.0, 0.0, 1.0])


# ---------------------------------------------------------------- logcumsumexp


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_logcumsumexp_matches_numpy(dim, dtype):
    a = rand(2, 3, 4, dtype=NP_DTYPE[dtype])
    got = kiln.tensor(a).logcumsumexp(dim)
    assert got.dtype == dtype
    assert_close(got, np.logaddexp.accumulate(a, axis=dim), dtype)
    assert_close(kiln.logcumsumexp(noncontig(a), dim), np.logaddexp.accumulate(a, axis=dim), dtype)


def test_logcumsumexp_extremes():
    a = np.array([1000.0, 1000.0, -np.inf, -1000.0, 0.0])
    assert_close(kiln.tensor(a).logcumsumexp(0), np.logaddexp.accumulate(a))
    neg = kiln.tensor([-np.inf, -np.inf, 0.0]).logcumsumexp(0).tolist()
    assert neg == [-np.inf, -np.inf, 0.0]
    assert kiln.tensor([np.inf, 1.0]).logcumsumexp(0).tolist() == [np.inf, np.inf]
    got = kiln.tensor([1.0, NAN, 2.0]).logcumsumexp(0).tolist()
    assert got[0] == 1.0 and np.isnan(got[1:]).all()


def test_logcumsumexp_half_0d_empty():
    a = rand(3, 5)
    for dtype in (kiln.float16, kiln.bfloat16):
        got = kiln.tensor(a, dtype=dtype).logcumsumexp(1)
        assert got.dtype == dtype
        assert_close(got.float(), np.logaddexp.accumulate(a, axis=1), atol=5e-2, rtol=5e-2)
    assert kiln.tensor(2.5).logcumsumexp(0).item() == 2.5
    assert kiln.zeros(0, 2).logcumsumexp(0).shape == (0, 2)


def test_logcumsumexp_grad():
    gradcheck(lambda x: x.logcumsumexp(1), rand(3, 4))
    gradcheck(lambda x: kiln.logcumsumexp(x * 50, 0), rand(3, 4))  # large values, no overflow
    gradcheck(lambda x: x.logcumsumexp(0), rand())
    # Mixed-sign upstream gradients.
    w = kiln.tensor(rand(3, 4))
    gradcheck(lambda x: x.logcumsumexp(1) * w, rand(3, 4))


@pytest.mark.parametrize("op", [
    lambda x: x.logcumsumexp(1),
    lambda x: x.cummax(1).values,
    lambda x: x.cummin(0).values,
])
def test_double_backward(op):
    def first_grad(x):
        out = op(x)
        (g,) = kiln.autograd.grad((out * out).sum(), x, create_graph=True)
        return g

    gradcheck(first_grad, rand(2, 3))


def test_logcumsumexp_gradgradcheck_mixed_sign_and_zero_upstream():
    # Note [logcumsumexp gradient]: upstream gradients of both signs, and a part with no entries
    # at all (all-positive grad_outputs), keep the second derivative finite and right.
    x = kiln.tensor(rand(3, 4), requires_grad=True)
    for upstream in (np.array([[1.0, -2.0, 0.3, 0.5]] * 3), np.full((3, 4), 0.7)):
        g = kiln.tensor(upstream, requires_grad=True)
        assert kiln.autograd.gradgradcheck(lambda t: t.logcumsumexp(1), [x], [g])
    # An exact zero upstream: the second derivative in x stays right (the one in that zero
    # grad_output is the Note's stated limit, so g is held constant here).
    g0 = kiln.tensor(np.array([[1.0, 0.0, -0.5, 0.0]] * 3))
    assert kiln.autograd.gradgradcheck(lambda t: t.logcumsumexp(1), [x], [g0])
    y = kiln.tensor(rand(5), requires_grad=True)
    assert kiln.autograd.gradgradcheck(lambda t: kiln.logcumsumexp(t * 30, 0), [y])


@pytest.mark.parametrize("fn,match,exc", [
    (lambda: kiln.tensor([1, 2]).logcumsumexp(0), r"\[logcumsumexp\].*int64", NotImplementedError),
    (lambda: kiln.tensor([True]).logcumsumexp(0), r"\[logcumsumexp\].*bool", NotImplementedError),
    (lambda: kiln.ones(2, 3).cummax(2), r"\[cummax\]", IndexError),
    (lambda: kiln.ones(2, 3).cummin(-3), r"\[cummin\]", IndexError),
    (lambda: kiln.ones(2).logcumsumexp(1), r"\[logcumsumexp\]", IndexError),
    (lambda: kiln.cummax([1.0, 2.0], 0), None, TypeError),
])
def test_errors(fn, match, exc):
    with pytest.raises(exc, match=match):
        fn()


# ---------------------------------------------------------------- the parallel CPU scan

LONG = 3 * 2 ** 15 + 77  # several chunks of the two-pass scan, and a ragged last one


def test_long_rows_match_numpy():
    a = rand(2, LONG)
    assert_close(kiln.tensor(a).cumsum(1), np.cumsum(a, 1), atol=1e-9, rtol=1e-9)
    b = rand(LONG, low=0.999, high=1.001)
    assert_close(kiln.tensor(b).cumprod(0), np.cumprod(b), atol=1e-9, rtol=1e-9)
    i = rand(1, LONG, dtype=np.int64)
    assert kiln.tensor(i).cumsum(1).tolist() == np.cumsum(i, 1).tolist()
    assert_close(kiln.tensor(a).logcumsumexp(1), np.logaddexp.accumulate(a, axis=1),
                 atol=1e-9, rtol=1e-9)


def test_long_rows_keep_the_index_rules_across_chunks():
    a = np.ones(LONG)
    r = kiln.tensor(a).cummax(0)
    assert r.indices.tolist() == list(range(LONG))  # every tie takes over, in every chunk
    a[5] = 2.0
    a[2 ** 15 + 3] = NAN
    r = kiln.tensor(a).cummin(0)
    want_v, want_i = ref_extreme(a[: 2 ** 15 + 10], 0, False)
    np.testing.assert_array_equal(r.indices.numpy()[: 2 ** 15 + 10], want_i)
    assert (r.indices.numpy()[2 ** 15 + 3:] == 2 ** 15 + 3).all()


def test_many_rows_match_numpy():
    a = rand(700, 130)
    assert_close(kiln.tensor(a).cumsum(1), np.cumsum(a, 1))
    assert_close(kiln.tensor(a).cumsum(0), np.cumsum(a, 0))
    t = tied(700, 130)
    np.testing.assert_array_equal(kiln.tensor(t).cummax(1).indices.numpy(),
                                  ref_extreme(t, 1, True)[1])


def test_results_do_not_depend_on_the_thread_count():
    a = kiln.tensor(rand(3, LONG, dtype=np.float32))
    threads = kiln.get_num_threads()
    try:
        kiln.set_num_threads(1)
        one = [a.cumsum(1).numpy(), a.logcumsumexp(1).numpy()]
        kiln.set_num_threads(max(2, threads))
        many = [a.cumsum(1).numpy(), a.logcumsumexp(1).numpy()]
    finally:
        kiln.set_num_threads(threads)
    for x, y in zip(one, many):
        np.testing.assert_array_equal(x, y)
