"""CPU elementwise loops split over OpenMP threads (Note [Parallel elementwise loops]):
large strided and broadcast operands give NumPy's results, the thread count does not change
any bit, and an error inside a threaded loop is raised as usual."""

import numpy as np
import pytest

import kiln
from helpers import RNG, assert_close, with_threads

N = 1 << 17  # above kElementwiseGrain


def test_large_strided_and_broadcast_operands_match_numpy():
    a = RNG.standard_normal((257, 513))
    b = RNG.standard_normal((513,))
    ka, kb = kiln.tensor(a), kiln.tensor(b)
    assert_close(with_threads(2, lambda: ka.t() * 2 + 1), a.T * 2 + 1)
    assert_close(with_threads(2, lambda: ka + kb), a + b)
    assert_close(with_threads(2, lambda: kiln.exp(ka[:, ::2])), np.exp(a[:, ::2]))
    assert_close(with_threads(2, lambda: ka.t().contiguous()), a.T)
    assert_close(with_threads(2, lambda: kiln.where(ka > 0, ka, kb)), np.where(a > 0, a, b))
    # Runs are cut where a thread's range starts: an odd inner size and many outer dims.
    c = RNG.standard_normal((3, 5, 7, 11, 13, 17))
    kc = kiln.tensor(c).permute(5, 3, 1, 0, 2, 4)
    want = c.transpose(5, 3, 1, 0, 2, 4).astype(np.float32).astype(np.float64)
    assert_close(with_threads(2, lambda: kc.float().double()), want)


def test_thread_count_changes_no_bit():
    x = kiln.tensor(RNG.standard_normal(N).astype(np.float32))
    y = kiln.tensor(RNG.standard_normal((N // 64, 64)).astype(np.float32)).t()
    ops = [lambda: kiln.tanh(x), lambda: x * 3 - x, lambda: y.contiguous(), lambda: x.half(),
           lambda: kiln.pow(x.abs(), 0.3)]
    for op in ops:
        one = with_threads(1, op).numpy()
        two = with_threads(2, op).numpy()
        assert np.array_equal(one, two)


def test_an_error_inside_a_threaded_loop_is_raised():
    a = kiln.arange(N, dtype=kiln.int64)
    b = kiln.ones(N, dtype=kiln.int64)
    b[N - 3] = 0  # met by the last thread's range only
    with pytest.raises(RuntimeError, match=r"\[floor_divide\].*division by zero"):
        with_threads(2, lambda: a // b)
    assert (with_threads(2, lambda: a // (b + 1))[:4].tolist()) == [0, 0, 1, 1]
