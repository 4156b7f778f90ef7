"""Convolution and pooling parameters anywhere in int64 raise a RuntimeError naming the op
instead of overflowing the window arithmetic (Note [Checked shape arithmetic]): issue 18's
overflow hunt, for the sizes that come from kernel, stride, padding and dilation."""

import pytest

import kiln
import kiln.nn.functional as F

BIG = 2**62
HUGE = 2**63 - 1


@pytest.mark.parametrize("call", [
    lambda x, w: F.conv1d(x, w, padding=BIG),
    lambda x, w: F.conv1d(x, w, dilation=HUGE),
    lambda x, w: F.conv1d(x, w, stride=HUGE, padding=BIG),
    lambda x, w: F.conv_transpose1d(x, w, stride=HUGE),
    lambda x, w: F.conv_transpose1d(x, w, dilation=HUGE),
    lambda x, w: F.conv_transpose1d(x, w, stride=BIG, output_padding=BIG - 1),
])
def test_convolutions_with_huge_parameters_raise(call):
    x, w = kiln.ones(1, 1, 5), kiln.ones(1, 1, 3)
    with pytest.raises(RuntimeError, match=r"\[conv"):
        call(x, w)


@pytest.mark.parametrize("call, expected", [
    # A stride past the input leaves the first window, as in PyTorch.
    (lambda x: F.max_pool1d(x, 2, stride=HUGE), [1.0]),
    (lambda x: F.max_pool1d(x, 2, stride=HUGE, ceil_mode=True), [1.0]),
    (lambda x: F.avg_pool1d(x, 2, stride=HUGE, ceil_mode=True), [0.5]),
    (lambda x: F.max_pool1d(x, 2, dilation=HUGE), r"\[max_pool1d\] .*Output size is too small"),
    (lambda x: F.max_pool1d(x, HUGE), r"\[max_pool1d\] .*Output size is too small"),
    (lambda x: F.avg_pool1d(x, HUGE, padding=BIG),
     r"\[avg_pool1d\] pad should be at most half of kernel size"),
])
def test_pooling_with_huge_parameters(call, expected):
    x = kiln.arange(5.0).reshape(1, 1, 5)
    if isinstance(expected, str):
        with pytest.raises(RuntimeError, match=expected):
            call(x)
    else:
        assert call(x).flatten().tolist() == expected


def test_fold_with_huge_padding_raises():
    with pytest.raises(RuntimeError, match=r"\[fold\]"):
        F.fold(kiln.ones(1, 4, 4), output_size=(3, 3), kernel_size=2, padding=BIG)
