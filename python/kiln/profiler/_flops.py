"""FLOP estimates for with_flops: PyTorch's formulae (a multiply-add counts 2) from an op's
recorded input shapes and result shape.

Only the ops whose work is a matrix product carry an estimate, as in PyTorch: matmul, mm,
bmm, linear and the convolutions (conv1d/2d/3d, whose front end kiln records as conv_nd). A
composite counts once: build_events keeps the estimate of the outermost op that has one, so
linear calling matmul calling mm is counted once, as linear.
"""


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _mm(inputs, out):
    a, b = inputs[0], inputs[1]
    return 2 * a[0] * a[1] * b[1] if len(a) == 2 and len(b) == 2 else 0


def _bmm(inputs, out):
    a, b = inputs[0], inputs[1]
    return 2 * a[0] * a[1] * a[2] * b[2] if len(a) == 3 and len(b) == 3 else 0


def _matmul(inputs, out):
    # Every output element is a dot product over the first operand's last dim.
    a = inputs[0]
    return 2 * _numel(out) * a[-1] if a and out is not None else 0


def _linear(inputs, out):
    # weight is [out_features, in_features]
    w = inputs[1]
    return 2 * _numel(out) * w[-1] if len(w) == 2 and out is not None else 0


def _conv(inputs, out):
    # PyTorch: 2 * N * out_h * out_w * kernel_h * kernel_w * in_channels * out_channels /
    # groups, i.e. each output element is a dot product over weight[c_out]'s elements.
    w = inputs[1]
    return 2 * _numel(out) * _numel(w[1:]) if len(w) >= 3 and out else 0


_FORMULAE = {
    "kiln::mm": _mm,
    "kiln::bmm": _bmm,
    "kiln::matmul": _matmul,
    "kiln::linear": _linear,
    "kiln::conv_nd": _conv,
    "kiln::conv_nd_padding_mode": _conv,
}


def estimate(name, input_shapes, output_shape):
    """The FLOPs of one op call (0 for ops without a formula or without the shapes)."""
    f = _FORMULAE.get(name)
    if f is None or len(input_shapes) < 2 or not input_shapes[0] or not input_shapes[1]:
        return 0
    return int(f(input_shapes, output_shape or None))
