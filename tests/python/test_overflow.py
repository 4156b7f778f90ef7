"""Sizes, strides and Python numbers that overflow raise instead of wrapping
(Note [Checked shape arithmetic] in core/shape.h): the reproducers of issue 18,
PyTorch's rules for Python numbers cast to a dtype, and a property test that
feeds random huge, negative and zero sizes to every factory and view op."""

import math

import numpy as np
import pytest

import kiln

INT64_MAX = 2**63 - 1
BIG = 2**62
OVERFLOW = "Storage size calculation overflowed"
CANNOT = "value cannot be converted to type"


def _nested(depth, wrap=list):
    """A list (or tuple) nested `depth` deep around one number, built without recursion."""
    data = 1
    for _ in range(depth):
        data = wrap([data])
    return data


# ---------------------------------------------------------------------------------------------
# issue 18's reproducers: each raised nothing (or crashed) before


@pytest.mark.parametrize("make, message", [
    (lambda: kiln.empty(BIG, BIG),
     r"\[empty\] Storage size calculation overflowed with sizes="
     r"\[4611686018427387904, 4611686018427387904\]"),
    (lambda: kiln.arange(0, BIG, 1),
     r"\[arange\] " + OVERFLOW + r" with sizes=\[4611686018427387904\]"),
    (lambda: kiln.full((BIG,), 1.0), r"\[full\] " + OVERFLOW),
    (lambda: kiln.randn(BIG), r"\[randn\] " + OVERFLOW),
    (lambda: kiln.zeros(3).expand(BIG, 3).contiguous(),
     r"\[expand\] " + OVERFLOW + r" with sizes=\[4611686018427387904, 3\]"),
    (lambda: kiln.zeros(2**31, 2**31, 4)[5, 7], r"\[zeros\] " + OVERFLOW),
    (lambda: kiln.ones(2**32, 2**32).sum(), r"\[ones\] " + OVERFLOW),
])
def test_issue_reproducers_raise_runtime_error_naming_the_op(make, message):
    with pytest.raises(RuntimeError, match=message):
        make()


def test_a_huge_tensor_can_never_be_written_out_of_bounds():
    # Before, empty(2**62, 2**62) had 0 elements and t[3, 5] = 1.0 wrote past its memory.
    with pytest.raises(RuntimeError, match=r"\[empty\] " + OVERFLOW):
        kiln.empty(BIG, BIG)[3, 5] = 1.0


def test_deep_nesting_raises_value_error_instead_of_crashing():
    with pytest.raises(ValueError, match=r"\[tensor\] too many dimensions 'list'"):
        kiln.tensor(_nested(50_000))


def test_nesting_is_capped_at_64_dims_as_in_pytorch():
    t = kiln.tensor(_nested(64))
    assert t.shape == (1,) * 64 and t.item() == 1
    with pytest.raises(ValueError, match="too many dimensions 'list'"):
        kiln.tensor(_nested(65))
    # The cap counts dims, not items: a wide, shallow list is fine.
    assert kiln.tensor([[1, 2]] * 10_000).shape == (10_000, 2)
    with pytest.raises(ValueError, match="too many dimensions 'tuple'"):
        kiln.tensor(_nested(65, tuple))


def test_out_of_range_python_numbers_raise_on_creation():
    with pytest.raises(RuntimeError, match=r"\[tensor\] " + CANNOT + " uint8 without overflow"):
        kiln.tensor([300], dtype=kiln.uint8)
    with pytest.raises(RuntimeError, match=r"\[full\] " + CANNOT + " int32 without overflow"):
        kiln.full((2,), float("nan"), dtype=kiln.int32)


# ---------------------------------------------------------------------------------------------
# Python numbers cast to a dtype, with PyTorch's rules


@pytest.mark.parametrize("value, dtype, expected", [
    (255, kiln.uint8, 255),
    (-1, kiln.uint8, 255),  # negatives down to -255 wrap, as in PyTorch
    (-255, kiln.uint8, 1),
    (-128, kiln.int8, -128),
    (2**31 - 1, kiln.int32, 2**31 - 1),
    (INT64_MAX, kiln.int64, INT64_MAX),
    (-(2**63), kiln.int64, -(2**63)),
    (2.9, kiln.int16, 2),
    (True, kiln.uint8, 1),
    (12345, kiln.bool, True),  # anything converts to bool
    (1e300, kiln.float32, math.inf),  # kiln.tensor checks integer dtypes only
    (70000, kiln.float16, math.inf),
])
def test_tensor_accepts_what_pytorch_accepts(value, dtype, expected):
    assert kiln.tensor([value], dtype=dtype).tolist() == [expected]


@pytest.mark.parametrize("value, dtype", [
    (300, kiln.uint8), (-256, kiln.uint8), (-1.0, kiln.uint8), (128, kiln.int8),
    (2**15, kiln.int16), (2**31, kiln.int32), (float("nan"), kiln.int64),
    (float("inf"), kiln.int32), (2.0**63, kiln.int64), (1e10, kiln.int32),
])
def test_tensor_refuses_numbers_outside_an_integer_dtype(value, dtype):
    name = str(dtype).split(".")[-1]
    with pytest.raises(RuntimeError, match=rf"\[tensor\] {CANNOT} {name} without overflow"):
        kiln.tensor([[0, value]], dtype=dtype)


def test_tensor_checks_numpy_scalars_and_numbers_given_without_a_list():
    with pytest.raises(RuntimeError, match="without overflow"):
        kiln.tensor([np.int64(300)], dtype=kiln.uint8)
    with pytest.raises(RuntimeError, match="without overflow"):
        kiln.tensor(300, dtype=kiln.uint8)
    # Arrays convert like any tensor: wrapping, as in PyTorch.
    assert kiln.tensor(np.array([300]), dtype=kiln.uint8).tolist() == [44]


@pytest.mark.parametrize("value, dtype, expected", [
    (-1, kiln.uint8, 255),
    (-(2**63), kiln.int64, -(2**63)),
    (-(2.0**63), kiln.int64, -(2**63)),
    (float("inf"), kiln.float16, math.inf),
    (-float("inf"), kiln.bfloat16, -math.inf),
    (65504.0, kiln.float16, 65504.0),
    (1e300, kiln.float64, 1e300),
    (3, kiln.bool, True),
])
def test_full_accepts_what_pytorch_accepts(value, dtype, expected):
    assert kiln.full((2,), value, dtype=dtype).tolist() == [expected, expected]


def test_full_keeps_nan_in_floating_dtypes():
    assert math.isnan(kiln.full((1,), float("nan"), dtype=kiln.float16).item())


@pytest.mark.parametrize("value, dtype", [
    (300, kiln.uint8), (float("nan"), kiln.int32), (float("inf"), kiln.int64),
    (2.0**63, kiln.int64), (-129, kiln.int8), (70000, kiln.float16), (1e39, kiln.float32),
    (-1e300, kiln.float32), (1e39, kiln.bfloat16),
])
def test_full_refuses_numbers_outside_the_dtype(value, dtype):
    # Unlike kiln.tensor, full checks floating dtypes too (PyTorch's Scalar conversion).
    name = str(dtype).split(".")[-1]
    with pytest.raises(RuntimeError, match=rf"\[full\] {CANNOT} {name} without overflow"):
        kiln.full((2,), value, dtype=dtype)


@pytest.mark.parametrize("write, op", [
    (lambda t: t.fill_(300), "fill_"),
    (lambda t: t.__setitem__(0, 300), "index_put_"),
    (lambda t: t.__setitem__(slice(None), -256), "index_put_"),
    (lambda t: t.masked_fill_(kiln.tensor([True, False]), 300), "masked_fill"),
    (lambda t: t.masked_fill(kiln.tensor([True, False]), float("nan")), "masked_fill"),
    (lambda t: t.new_full((2,), 1000), "new_full"),
    (lambda t: kiln.full_like(t, 256), "full_like"),
])
def test_writes_of_python_numbers_are_checked_and_leave_the_tensor_alone(write, op):
    t = kiln.tensor([1, 2], dtype=kiln.uint8)
    with pytest.raises(RuntimeError, match=rf"\[{op}\] {CANNOT} uint8 without overflow"):
        write(t)
    assert t.tolist() == [1, 2]


def test_in_range_writes_and_arithmetic_still_work():
    t = kiln.tensor([1, 2], dtype=kiln.uint8)
    t[0] = 255
    t.masked_fill_(kiln.tensor([False, True]), -1)
    assert t.tolist() == [255, 255]
    h = kiln.zeros(2, dtype=kiln.float16).fill_(float("-inf"))
    assert h.tolist() == [-math.inf, -math.inf]


# ---------------------------------------------------------------------------------------------
# Sizes: the ops that make new ones, one by one


def test_negative_sizes_keep_pytorchs_error():
    with pytest.raises(RuntimeError, match=r"\[empty\] Trying to create tensor with negative "
                       r"dimension -1: \[2, -1\]"):
        kiln.empty(2, -1)
    with pytest.raises(RuntimeError, match=r"\[rand\] Trying to create tensor with negative"):
        kiln.rand(-3)
    with pytest.raises(RuntimeError, match=r"\[new_zeros\] Trying to create tensor with negative"):
        kiln.ones(2).new_zeros(-1)


def test_sizes_beyond_int64_raise_runtime_error():
    for size in (2**63, 2**64, -(2**63) - 1):
        with pytest.raises(RuntimeError):
            kiln.empty(size)


def test_zero_sizes_are_fine_unless_the_strides_would_overflow():
    assert kiln.empty(0, BIG).shape == (0, BIG)
    assert kiln.zeros(BIG, 0, 1).stride() == (1, 1, 1)
    # No elements, but the contiguous stride of dim 0 would be 2**64.
    with pytest.raises(RuntimeError, match=r"\[empty\] " + OVERFLOW + r" with sizes=\[0, "):
        kiln.empty(0, BIG, 4)


def test_byte_counts_must_fit_int64():
    with pytest.raises(RuntimeError, match=r"\[empty\] " + OVERFLOW):
        kiln.empty(2**61, dtype=kiln.float32)  # 2**63 bytes, one too many
    # 2**61 - 1 float32s fit the count; no machine has the memory.
    with pytest.raises(RuntimeError, match="failed to allocate"):
        kiln.empty(2**61 - 1, dtype=kiln.float32)


@pytest.mark.parametrize("make, op", [
    (lambda: kiln.ones(2).new_empty(BIG, BIG), "new_empty"),
    (lambda: kiln.ones(2).new_ones((BIG, 4)), "new_ones"),
    (lambda: kiln.empty_like(kiln.zeros(1).expand(BIG), dtype=kiln.float64), "empty_like"),
    (lambda: kiln.rand(BIG, 2), "rand"),
    (lambda: kiln.randint(0, 5, (BIG, 2)), "randint"),
    (lambda: kiln.randperm(BIG), "randperm"),
    (lambda: kiln.linspace(0, 1, BIG), "linspace"),
    (lambda: kiln.logspace(0, 1, BIG), "logspace"),
    (lambda: kiln.eye(2**32), "eye"),
    (lambda: kiln.empty_strided((BIG, BIG), (1, 1)), "empty_strided"),
    (lambda: kiln.zeros(3).repeat(BIG), "repeat"),
    (lambda: kiln.zeros(3).repeat(2, BIG), "repeat"),
    (lambda: kiln.zeros(3).tile(BIG, 1), "repeat"),
    (lambda: kiln.zeros(3).repeat_interleave(BIG), "repeat_interleave"),
    (lambda: kiln.zeros(4).view(BIG, BIG, 0), "view"),
    (lambda: kiln.zeros(0).reshape(BIG, -1, BIG), "reshape"),
    (lambda: kiln.zeros(1, 3).expand(BIG, 2**40, 3), "expand"),
    (lambda: kiln.zeros(1).expand(BIG).unfold(0, 2**61, 1), "unfold"),
    (lambda: kiln.zeros(4).as_strided((BIG, BIG), (0, 0)), "as_strided"),
    (lambda: kiln.zeros(4).as_strided((3,), (BIG,)), "as_strided"),
    (lambda: kiln.cat([kiln.zeros(1).expand(BIG)] * 2), "cat"),
    (lambda: kiln.kron(kiln.zeros(1).expand(BIG), kiln.zeros(4)), "kron"),
    (lambda: kiln.nn.functional.pad(kiln.zeros(2), (INT64_MAX, 1)), "pad"),
])
def test_every_op_that_makes_sizes_checks_them(make, op):
    with pytest.raises(RuntimeError, match=rf"\[{op}\] .*(overflowed|negative dimension)"):
        make()


def test_as_strided_checks_the_storage_it_reaches():
    base = kiln.zeros(4)
    with pytest.raises(RuntimeError, match=r"\[as_strided\] " + OVERFLOW
                       + r" with sizes=\[3\] and strides=\[4611686018427387904\]"):
        base.as_strided((3,), (BIG,))
    with pytest.raises(RuntimeError, match=r"\[as_strided\] Tensor: invalid storage offset -1"):
        base.as_strided((1,), (1,), -1)
    with pytest.raises(RuntimeError, match=r"\[as_strided\] .* out of bounds for storage of 4"):
        base.as_strided((2,), (3,), 1)
    assert base.as_strided((2,), (3,)).shape == (2,)
    # A view with no elements reaches no storage, however large its strides.
    assert base.as_strided((0, 5), (INT64_MAX, INT64_MAX)).numel() == 0


def test_huge_views_that_fit_int64_work_without_memory():
    t = kiln.zeros(1, 3).expand(2**40, 3)
    assert t.shape == (2**40, 3) and t.stride() == (0, 1)
    assert t.unfold(0, 2**39, 2**38).shape == (3, 3, 2**39)
    assert kiln.zeros(1).expand(BIG).view(2, -1).shape == (2, 2**61)


def test_steps_past_the_end_keep_one_element():
    x = kiln.arange(10.0)
    assert x[::BIG].tolist() == [0.0]
    assert x[3::INT64_MAX].tolist() == [3.0]
    assert x.unfold(0, 4, INT64_MAX).tolist() == [[0.0, 1.0, 2.0, 3.0]]
    assert x[::3].stride() == (3,)
    # 2**61 float32s apart: the byte stride NumPy would be given overflows, unused.
    assert x[::2**61].numpy().tolist() == [0.0]


def test_arange_lengths_near_the_int64_limits():
    assert kiln.arange(-(2**63), INT64_MAX, 2**62).tolist() == [-(2**63) + k * 2**62
                                                                 for k in range(4)]
    assert kiln.arange(INT64_MAX - 2, INT64_MAX).tolist() == [INT64_MAX - 2, INT64_MAX - 1]
    with pytest.raises(RuntimeError, match=r"\[arange\] invalid size, possible overflow"):
        kiln.arange(-(2**63), INT64_MAX)
    with pytest.raises(RuntimeError, match=r"\[arange\] invalid size, possible overflow"):
        kiln.arange(0.0, 1e300, 1e-300)


# ---------------------------------------------------------------------------------------------
# Property test: random sizes into every factory and view op


def _numel(sizes):
    """The element count of a tensor of `sizes`, or None for sizes no tensor may have."""
    if any(s < 0 for s in sizes) or math.prod(max(s, 1) for s in sizes) > INT64_MAX:
        return None
    return math.prod(sizes)


def _random_size(rng):
    kind = rng.integers(0, 10)
    if kind < 2:
        return 0
    if kind < 6:
        return int(rng.integers(1, 6))
    if kind < 7:
        return -int(rng.choice([1, 2, 2**31, 2**63]))
    return int(rng.integers(2**31, 2**63, dtype=np.uint64)) if kind < 8 else 2**int(
        rng.integers(31, 63))


def _random_shape(rng):
    return [_random_size(rng) for _ in range(int(rng.integers(0, 5)))]


def _inferred(target, numel):
    """The shape view(target) gives a tensor of `numel` elements, or None if it fails."""
    infer = [i for i, s in enumerate(target) if s == -1]
    if len(infer) > 1:
        return None
    known = _numel([1 if s == -1 else s for s in target])
    if known is None:
        return None
    if not infer:
        return target if known == numel else None
    if known == 0 or numel % known:
        return None
    return [numel // known if s == -1 else s for s in target]


def _check(expected_numel, expected_shape, make):
    """`make` returns a tensor of the expected shape, or raises RuntimeError when there is none."""
    if expected_numel is None:
        with pytest.raises(RuntimeError):
            make()
        return
    t = make()
    assert tuple(t.shape) == tuple(expected_shape)
    assert t.numel() == expected_numel


# Small enough to create, or no memory could hold it (past the 47-bit address space):
# anything in between could be allocated and filled, which this test must not do.
_MAX_BYTES = 1 << 20
_UNALLOCATABLE = 1 << 48

FACTORIES = {
    "empty": lambda s: kiln.empty(s),
    "zeros": lambda s: kiln.zeros(*s) if s else kiln.zeros(()),
    "ones": lambda s: kiln.ones(s, dtype=kiln.int8),
    "full": lambda s: kiln.full(s, 1.5, dtype=kiln.float64),
    "rand": lambda s: kiln.rand(s),
    "randn": lambda s: kiln.randn(s, dtype=kiln.float16),
    "randint": lambda s: kiln.randint(0, 5, s),
    "new_empty": lambda s: kiln.ones(1).new_empty(s),
    "new_zeros": lambda s: kiln.ones(1, dtype=kiln.bool).new_zeros(s),
    "new_ones": lambda s: kiln.ones(1).new_ones(s),
    "new_full": lambda s: kiln.ones(1).new_full(s, 2),
    "empty_strided": lambda s: kiln.empty_strided(s, [1] * len(s)),
}
ITEMSIZE = {"ones": 1, "full": 8, "randn": 2, "randint": 8, "new_zeros": 1}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_take_random_sizes_without_crashing(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    checked = 0
    while checked < 300:
        shape = _random_shape(rng)
        numel = _numel(shape)
        if numel is not None:
            nbytes = numel * ITEMSIZE.get(name, 4)
            if name == "empty_strided":  # strides of 1 overlap: one element per unit of extent
                nbytes = (1 + sum(s - 1 for s in shape)) * 4 if numel else 0
            if nbytes > INT64_MAX or nbytes >= _UNALLOCATABLE:
                numel = None
            elif nbytes > _MAX_BYTES:
                continue
        _check(numel, shape, lambda: FACTORIES[name](shape))
        checked += 1


def test_one_dim_factories_take_random_lengths_without_crashing():
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = _random_size(rng)
        if 10**5 < n and n * 8 < _UNALLOCATABLE:
            continue
        numel = _numel([n]) if n * 8 <= INT64_MAX and n * 8 < _UNALLOCATABLE else None
        _check(numel, [n], lambda: kiln.arange(n))
        _check(numel, [n], lambda: kiln.linspace(0, 1, n, dtype=kiln.float64))
        _check(numel, [n], lambda: kiln.randperm(n))
        m = _random_size(rng)
        eye = _numel([n, m])
        if eye is not None and eye * 4 > _MAX_BYTES:
            if eye * 4 < _UNALLOCATABLE:
                continue
            eye = None
        _check(eye, [n, m], lambda: kiln.eye(n, m))


def test_view_ops_take_random_sizes_without_crashing():
    rng = np.random.default_rng(2)
    base = kiln.zeros(2, 3, 4)
    for _ in range(300):
        shape = _random_shape(rng)
        numel = _numel(shape)

        # view/reshape, with one size sometimes inferred; shapes of 24 elements sometimes
        target = list(shape)
        if rng.integers(0, 3) == 0:
            target = [int(f) for f in rng.permutation([2, 3, 4])[:int(rng.integers(1, 4))]]
            target += [24 // math.prod(target)] if math.prod(target) < 24 else []
        if target and rng.integers(0, 3) == 0:
            target[int(rng.integers(0, len(target)))] = -1
        expected = _inferred(target, 24)
        for op in (base.view, base.reshape):
            _check(None if expected is None else 24, expected, lambda: op(target))

        # expand of a [1, 4] tensor to [..., 4]: a view, so any valid size works; -1 keeps
        # the existing size, and a new leading dim cannot be -1
        wide = shape + [4]
        kept = shape[:-1] + [1 if shape[-1] == -1 else shape[-1], 4] if shape else None
        _check(None if kept is None else _numel(kept), kept,
               lambda: kiln.zeros(1, 4).expand(wide))

        # as_strided over 64 elements
        strides = [int(rng.choice([0, 1, 3, 2**31, 2**62])) for _ in shape]
        offset = int(rng.choice([0, 5, -1]))
        reach = None
        if numel is not None and offset >= 0 and all(s >= 0 for s in strides):
            extent = 0 if numel == 0 else offset + 1 + sum((s - 1) * st
                                                           for s, st in zip(shape, strides))
            reach = numel if extent <= 64 else None
        _check(reach, shape, lambda: kiln.zeros(64).as_strided(shape, strides, offset))

        # repeat of a [2, 3] tensor (allocates: small results only)
        reps = shape + [1] * (2 - len(shape))
        padded = [1] * (len(reps) - 2) + [2, 3]
        out = [r * p for r, p in zip(reps, padded)]
        count = None if any(r < 0 for r in reps) else _numel(out)
        if count is not None and count * 4 > _MAX_BYTES:
            if count * 4 < _UNALLOCATABLE:
                continue
            count = None
        _check(count, out, lambda: kiln.zeros(2, 3).repeat(*reps))

        # unfold of a long expanded row: windows * size elements, no memory
        length, size, step = (min(abs(_random_size(rng)), INT64_MAX) for _ in range(3))
        step = max(step, 1)
        row = kiln.zeros(1).expand(length) if length else kiln.zeros(0)
        windows = (length - size) // step + 1 if size <= length else None
        count = None if windows is None else _numel([windows, size])
        _check(count, [windows, size], lambda: row.unfold(0, size, step))


# ---------------------------------------------------------------------------------------------
# tril_indices / triu_indices count their pairs in closed form: huge row and col counts neither
# loop for ages nor overflow


@pytest.mark.parametrize("fn", [kiln.tril_indices, kiln.triu_indices])
def test_triangle_indices_with_too_many_pairs_raise(fn):
    with pytest.raises(RuntimeError, match=r"_indices\] row=4611686018427387904, col="
                                           r"4611686018427387904 and offset=0 give more indices "
                                           r"than a tensor can hold: " + OVERFLOW):
        fn(BIG, BIG)


@pytest.mark.parametrize("fn, args, expected", [
    (kiln.tril_indices, (BIG, 0), [[], []]),               # no columns: no pairs, no loop
    (kiln.tril_indices, (BIG, 3, -BIG + 2), [[BIG - 2, BIG - 1, BIG - 1], [0, 0, 1]]),
    (kiln.triu_indices, (BIG, 2, 1), [[0], [1]]),          # only row 0 reaches a column
    (kiln.triu_indices, (2, 2, -INT64_MAX), [[0, 0, 1, 1], [0, 1, 0, 1]]),
    (kiln.tril_indices, (2, 2, INT64_MAX), [[0, 0, 1, 1], [0, 1, 0, 1]]),
])
def test_triangle_indices_with_huge_arguments_but_few_pairs(fn, args, expected):
    out = fn(*args)
    assert out.shape == (2, len(expected[0]))
    assert out.tolist() == expected
