"""The translation table: one function per kiln op (the names of kiln.export's graph nodes,
`kiln._C._export.runner_names()`) that appends the equivalent ONNX nodes. Each reads the
node's recorded arguments in the op front end's parameter order (docs/export_format.md)."""

import math

from kiln.onnx._builder import elem_type
from kiln.onnx._errors import UnsupportedOperatorError

TABLE = {}


def op(*names):
    def register(fn):
        for name in names:
            TABLE[name] = fn
        return fn
    return register


class Node:
    """One graph node as the translators see it: its arguments decoded (a tensor argument is
    its ONNX value name, with its meta at hand), its outputs' ONNX names and metas."""

    def __init__(self, data, names, metas, scalars, used):
        self.op = data["op"]
        self.data = data
        self._names = names
        self._metas = metas
        self._scalars = scalars
        self._used = used
        self.outputs = [names[o] for o in data["outputs"]]
        self.out_metas = data["meta"]

    def arg(self, i):
        (kind, v), = self.data["args"][i].items()
        if kind == "tensor":
            return self._names[v]
        if kind == "tensors":
            return [self._names[k] for k in v]
        if kind in ("none", "device"):
            return None
        if kind == "float":
            return float(v)
        if kind == "bool":
            return bool(v)
        return v

    def meta(self, i):
        """(dtype, shape) of tensor argument i."""
        m = self._metas[self.data["args"][i]["tensor"]]
        return m["dtype"], m["shape"]

    def rank(self, i):
        return len(self.meta(i)[1])

    def is_scalar(self, i):
        """Whether tensor argument i is a Python number (a `scalar` node's value)."""
        return self.data["args"][i].get("tensor") in self._scalars

    def used(self, k):
        """Whether output k feeds another node or the graph's outputs."""
        return self.data["outputs"][k] in self._used

    def out(self, k=0):
        return self.outputs[k]

    def out_dtype(self, k=0):
        return self.out_metas[k]["dtype"]

    def unsupported(self, what):
        return UnsupportedOperatorError(f"[kiln.onnx.export] op '{self.op}': {what} has no ONNX "
                                        f"translation")


def cast_to(b, name, from_dtype, to_dtype):
    if from_dtype == to_dtype:
        return name
    return b.node("Cast", [name], to=elem_type(to_dtype, "Cast"))


def axis(d, rank):
    return d + rank if d < 0 else d


# --- elementwise --------------------------------------------------------------------------

_UNARY = {"neg": "Neg", "abs": "Abs", "sign": "Sign", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "reciprocal": "Reciprocal", "sin": "Sin", "cos": "Cos", "tan": "Tan",
          "tanh": "Tanh", "sigmoid": "Sigmoid", "erf": "Erf", "asin": "Asin", "acos": "Acos",
          "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh",
          "atanh": "Atanh", "relu": "Relu", "floor": "Floor", "ceil": "Ceil", "round": "Round",
          "logical_not": "Not", "isnan": "IsNaN", "isinf": "IsInf"}


def _float_input(b, n):
    """The input of a unary op, cast to the output dtype (an int input to a float op)."""
    return cast_to(b, n.arg(0), n.meta(0)[0], n.out_dtype())


@op(*_UNARY)
def unary(b, n):
    x = n.arg(0) if n.op in ("logical_not", "isnan", "isinf") else _float_input(b, n)
    if n.op == "logical_not":
        x = cast_to(b, x, n.meta(0)[0], "bool")
    b.node(_UNARY[n.op], [x], n.out())


@op("rsqrt")
def rsqrt(b, n):
    b.node("Reciprocal", [b.node("Sqrt", [_float_input(b, n)])], n.out())


@op("square")
def square(b, n):
    x = n.arg(0)
    b.node("Mul", [x, x], n.out())


@op("silu")
def silu(b, n):
    x = _float_input(b, n)
    b.node("Mul", [x, b.node("Sigmoid", [x])], n.out())


@op("gelu", "gelu_tanh")
def gelu(b, n):
    # Opset 20's Gelu is newer than the default opset 17: the formulas, as PyTorch's exporter
    # writes them.
    x = _float_input(b, n)
    dt = n.out_dtype()
    half = b.const(0.5, dt)
    one = b.const(1.0, dt)
    if n.op == "gelu":
        inner = b.node("Erf", [b.node("Mul", [x, b.const(1 / math.sqrt(2), dt)])])
    else:
        cube = b.node("Mul", [b.node("Mul", [x, x]), x])
        poly = b.node("Add", [x, b.node("Mul", [cube, b.const(0.044715, dt)])])
        inner = b.node("Tanh", [b.node("Mul", [poly, b.const(math.sqrt(2 / math.pi), dt)])])
    b.node("Mul", [b.node("Mul", [x, half]), b.node("Add", [inner, one])], n.out())


@op("leaky_relu")
def leaky_relu(b, n):
    b.node("LeakyRelu", [n.arg(0)], n.out(), alpha=n.arg(1))


@op("elu")
def elu(b, n):
    b.node("Elu", [n.arg(0)], n.out(), alpha=n.arg(1))


@op("clamp")
def clamp(b, n):
    dt = n.out_dtype()
    lo = b.const(n.arg(1), dt) if n.arg(4) else None
    hi = b.const(n.arg(2), dt) if n.arg(5) else None
    b.node("Clip", [n.arg(0), lo, hi], n.out())


# ONNX op, and whether the op's inputs share the output dtype (arithmetic) or a promoted one
# (comparisons, bool results).
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow",
           "maximum": "Max", "minimum": "Min", "eq": "Equal", "lt": "Less", "le": "LessOrEqual",
           "gt": "Greater", "ge": "GreaterOrEqual", "ne": "Equal", "logical_and": "And",
           "logical_or": "Or", "logical_xor": "Xor"}
_ORDER = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


def _compare_dtype(n):
    """The dtype both inputs of a comparison are cast to: the wider category wins, and a Python
    number takes the tensor's dtype within its category (kiln's promotion)."""
    (da, _), (db, _) = n.meta(0), n.meta(1)
    if n.op.startswith("logical_"):
        return "bool"
    def category(d):
        return 0 if d == "bool" else 2 if d.startswith(("float", "bfloat")) else 1
    if n.is_scalar(1) and category(db) <= category(da):
        return da
    if n.is_scalar(0) and category(da) <= category(db):
        return db
    return max(da, db, key=_ORDER.index)


@op(*_BINARY)
def binary(b, n):
    compare = n.out_dtype() == "bool"
    dt = _compare_dtype(n) if compare else n.out_dtype()
    x = cast_to(b, n.arg(0), n.meta(0)[0], dt)
    y = cast_to(b, n.arg(1), n.meta(1)[0], dt)
    if n.op == "ne":
        b.node("Not", [b.node("Equal", [x, y])], n.out())
    else:
        b.node(_BINARY[n.op], [x, y], n.out())


@op("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")
def bitwise(b, n):
    # On bools these are the logical ops; on integers opset 18's Bitwise* ops.
    word = n.op.split("_")[1]
    ins = [n.arg(i) for i in range(1 if word == "not" else 2)]
    if n.out_dtype() == "bool":
        b.node(word.capitalize(), ins, n.out())
    elif b.opset >= 18:
        b.node("Bitwise" + word.capitalize(), ins, n.out())
    else:
        raise n.unsupported(f"{n.out_dtype()} inputs below opset 18")


@op("where")
def where(b, n):
    dt = n.out_dtype()
    cond = cast_to(b, n.arg(0), n.meta(0)[0], "bool")
    b.node("Where", [cond, cast_to(b, n.arg(1), n.meta(1)[0], dt),
                     cast_to(b, n.arg(2), n.meta(2)[0], dt)], n.out())


@op("scalar")
def scalar(b, n):
    # A Python number: a 0-d initializer of the recorded dtype (binary casts it to the
    # other operand's dtype, as kiln's promotion does).
    b.node("Constant", [], n.out(), value=b.tensor(n.arg(0), n.arg(1)))


@op("to_dtype")
def to_dtype(b, n):
    b.node("Cast", [n.arg(0)], n.out(), to=elem_type(n.arg(1), "to_dtype"))


@op("contiguous")
def contiguous(b, n):
    b.node("Identity", [n.arg(0)], n.out())


# --- linear algebra -----------------------------------------------------------------------


@op("matmul", "mm", "bmm")
def matmul(b, n):
    b.node("MatMul", [n.arg(0), n.arg(1)], n.out())


@op("linear")
def linear(b, n):
    x, w, bias = n.arg(0), n.arg(1), n.arg(2)
    if n.rank(0) == 2 and n.rank(1) == 2:
        b.node("Gemm", [x, w, bias], n.out(), transB=1)
        return
    wt = b.node("Transpose", [w], perm=[1, 0]) if n.rank(1) == 2 else w
    if bias is None:
        b.node("MatMul", [x, wt], n.out())
    else:
        b.node("Add", [b.node("MatMul", [x, wt]), bias], n.out())


# --- shapes -------------------------------------------------------------------------------


def _reshape(b, x, shape, out):
    # A literal 0 is a size 0 in kiln but "copy the input's size" in ONNX unless allowzero.
    zero = any(isinstance(s, int) and s == 0 for s in shape)
    b.node("Reshape", [x, b.sizes(shape)], out, **({"allowzero": 1} if zero else {}))


@op("view", "reshape")
def view(b, n):
    _reshape(b, n.arg(0), n.arg(1), n.out())


def _reshape_around(b, n, lo, hi, middle):
    """Reshapes argument 0 to its sizes before dim `lo`, then `middle`, then its sizes after dim
    `hi`, the outer sizes read from the tensor: right at every size, where the recorded output
    shape has a dynamic size as a plain int when no dim expression matched it."""
    x, rank = n.arg(0), n.rank(0)
    if not b.dynamic:
        _reshape(b, x, n.out_metas[0]["shape"], n.out())
        return
    parts = [b.node("Shape", [x], end=lo)] if lo > 0 else []
    parts.append(b.sizes(middle))
    if hi < rank - 1:
        parts.append(b.node("Shape", [x], start=hi + 1))
    b.node("Reshape", [x, parts[0] if len(parts) == 1 else b.node("Concat", parts, axis=0)],
           n.out())


@op("flatten")
def flatten(b, n):
    rank = n.rank(0)
    if rank == 0:
        _reshape(b, n.arg(0), [1], n.out())
    else:
        _reshape_around(b, n, axis(n.arg(1), rank), axis(n.arg(2), rank), [-1])


@op("unflatten")
def unflatten(b, n):
    d = axis(n.arg(1), n.rank(0))
    _reshape_around(b, n, d, d, n.arg(2))


@op("expand")
def expand(b, n):
    # kiln's -1 keeps a size; ONNX's Expand broadcasts, where 1 keeps it.
    sizes = [1 if isinstance(s, int) and s == -1 else s for s in n.arg(1)]
    b.node("Expand", [n.arg(0), b.sizes(sizes)], n.out())


@op("permute")
def permute(b, n):
    b.node("Transpose", [n.arg(0)], n.out(), perm=[axis(d, n.rank(0)) for d in n.arg(1)])


@op("transpose", "t")
def transpose(b, n):
    rank = n.rank(0)
    perm = list(range(rank))
    if n.op == "transpose":
        d0, d1 = axis(n.arg(1), rank), axis(n.arg(2), rank)
        perm[d0], perm[d1] = perm[d1], perm[d0]
    else:
        perm.reverse()
    b.node("Transpose", [n.arg(0)], n.out(), perm=perm)


@op("unsqueeze")
def unsqueeze(b, n):
    b.node("Unsqueeze", [n.arg(0), b.const([axis(n.arg(1), n.rank(0) + 1)])], n.out())


@op("squeeze")
def squeeze(b, n):
    # kiln's squeeze(dims) skips dims whose size is not 1; ONNX's refuses them, so squeeze
    # what the recorded shapes say went away.
    _, shape = n.meta(0)
    dims = n.arg(1)
    rank = len(shape)
    dims = range(rank) if dims is None else [axis(d, rank) for d in dims]
    gone = [d for d in dims if shape[d] == 1]
    if not gone:
        b.node("Identity", [n.arg(0)], n.out())
    else:
        b.node("Squeeze", [n.arg(0), b.const(gone)], n.out())


@op("select")
def select(b, n):
    b.node("Gather", [n.arg(0), b.const(n.arg(2))], n.out(), axis=axis(n.arg(1), n.rank(0)))


def _slice(b, n, x, d, start, end, step, out):
    b.node("Slice", [x, b.sizes([start]), b.sizes([end]), b.const([d]), b.const([step])], out)


@op("slice")
def slice_(b, n):
    start, end = n.arg(2), n.arg(3)
    _slice(b, n, n.arg(0), axis(n.arg(1), n.rank(0)), 0 if start is None else start,
           2**63 - 1 if end is None else end, n.arg(4), n.out())


@op("narrow")
def narrow(b, n):
    start, length = n.arg(2), n.arg(3)
    end = f"({start})+({length})" if isinstance(start, str) or isinstance(length, str) \
        else start + length
    _slice(b, n, n.arg(0), axis(n.arg(1), n.rank(0)), start, end, 1, n.out())


@op("split", "chunk")
def split(b, n):
    # The parts' sizes from the recorded arguments: all but the last have the split size (or
    # chunk's ceil(size / chunks)), the last takes the rest, so in a dynamic graph the sizes are
    # expressions over the dim's size read at run time. The number of parts is the one traced.
    d = axis(n.arg(2), n.rank(0))
    k = len(n.outputs)
    if k == 1:
        b.node("Identity", [n.arg(0)], n.out())
        return
    x, c = n.arg(0), n.arg(1)
    if b.dynamic:
        size, local = "s", {"s": b.shape_of(x, d)}
    else:
        size, local = n.meta(0)[1][d], None
    if n.op == "split":
        each = c
    elif isinstance(size, int):
        each = -(-size // c)
    else:
        each = f"(s+{c - 1})//{c}"
    last = size - each * (k - 1) if isinstance(size, int) else f"s-({each})*{k - 1}"
    b.node("Split", [x, b.sizes([each] * (k - 1) + [last], local)], n.outputs, axis=d)


@op("cat")
def cat(b, n):
    xs = n.arg(0)
    rank = len(n.out_metas[0]["shape"])
    b.node("Concat", xs, n.out(), axis=axis(n.arg(1), rank))


@op("arange")
def arange(b, n):
    dt = n.arg(3) or n.out_dtype()
    b.node("Range", [b.scalar_of(v, dt) if not isinstance(v, float) else b.const(v, dt)
                     for v in (n.arg(0), n.arg(1), n.arg(2))], n.out())


@op("embedding")
def embedding(b, n):
    b.node("Gather", [n.arg(1), n.arg(0)], n.out(), axis=0)


# --- reductions and normalization ---------------------------------------------------------


def _reduce(b, n, onnx_op):
    x = n.arg(0)
    dims, keepdim, dtype = n.arg(1), n.arg(2), n.arg(3)
    if dtype is not None or n.meta(0)[0] != n.out_dtype():
        x = cast_to(b, x, n.meta(0)[0], n.out_dtype())
    rank = n.rank(0)
    axes = list(range(rank)) if not dims else [axis(d, rank) for d in dims]
    if onnx_op == "ReduceSum" or b.opset >= 18:
        b.node(onnx_op, [x, b.const(axes)], n.out(), keepdims=int(keepdim))
    else:
        b.node(onnx_op, [x], n.out(), axes=axes, keepdims=int(keepdim))


@op("sum")
def sum_(b, n):
    _reduce(b, n, "ReduceSum")


@op("mean")
def mean(b, n):
    _reduce(b, n, "ReduceMean")


@op("softmax", "log_softmax")
def softmax(b, n):
    x = cast_to(b, n.arg(0), n.meta(0)[0], n.out_dtype())
    b.node("Softmax" if n.op == "softmax" else "LogSoftmax", [x], n.out(),
           axis=axis(n.arg(1), n.rank(0)))


@op("layer_norm")
def layer_norm(b, n):
    shape = n.arg(1)
    dt = n.out_dtype()
    scale = n.arg(2)
    if scale is None:
        scale = b.const(_full(shape, 1.0), dt)
    b.node("LayerNormalization", [n.arg(0), scale, n.arg(3)], n.out(), axis=-len(shape),
           epsilon=n.arg(4))


def _full(shape, value):
    if not shape:
        return value
    return [_full(shape[1:], value) for _ in range(shape[0])]


@op("rms_norm")
def rms_norm(b, n):
    x, shape, weight, eps = n.arg(0), n.arg(1), n.arg(2), n.arg(3)
    dt = n.out_dtype()
    if eps is None:
        eps = {"float64": 2.220446049250313e-16, "float16": 0.0009765625,
               "bfloat16": 0.0078125}.get(dt, 1.1920928955078125e-07)
    axes = list(range(n.rank(0) - len(shape), n.rank(0)))
    sq = b.node("Mul", [x, x])
    ms = (b.node("ReduceMean", [sq, b.const(axes)], keepdims=1) if b.opset >= 18 else
          b.node("ReduceMean", [sq], axes=axes, keepdims=1))
    inv = b.node("Reciprocal", [b.node("Sqrt", [b.node("Add", [ms, b.const(eps, dt)])])])
    if weight is None:
        b.node("Mul", [x, inv], n.out())
    else:
        b.node("Mul", [b.node("Mul", [x, inv]), weight], n.out())


@op("batch_norm")
def batch_norm(b, n):
    x, mean, var, weight, bias, training = (n.arg(i) for i in range(6))
    if training or mean is None or var is None:
        raise n.unsupported("batch norm with batch statistics (training=True or no running "
                            "stats)")
    dt = n.out_dtype()
    channels = n.meta(1)[1][0]
    weight = weight if weight is not None else b.const([1.0] * channels, dt)
    bias = bias if bias is not None else b.const([0.0] * channels, dt)
    b.node("BatchNormalization", [x, weight, bias, mean, var], n.out(), epsilon=n.arg(7))


@op("scaled_dot_product_attention")
def sdpa(b, n):
    q, k, v, mask = n.arg(0), n.arg(1), n.arg(2), n.arg(3)
    dropout_p, is_causal, scale, gqa = n.arg(4), n.arg(5), n.arg(6), n.arg(7)
    if gqa:
        raise n.unsupported("enable_gqa=True")
    if dropout_p:
        raise n.unsupported("dropout_p > 0")
    dt = n.out_dtype()
    qshape, kshape = n.meta(0)[1], n.meta(1)[1]
    rank = len(kshape)
    if scale is None:
        if not isinstance(qshape[-1], int):
            raise n.unsupported("a dynamic head size")
        scale = 1 / math.sqrt(qshape[-1])
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    scores = b.node("Mul", [b.node("MatMul", [q, b.node("Transpose", [k], perm=perm)]),
                            b.const(scale, dt)])
    if is_causal:
        # PyTorch's causal mask: query i sees keys 0..i (tril of ones [L, S]).
        ls = b.node("Concat", [b.shape_of(q, len(qshape) - 2), b.shape_of(k, rank - 2)],
                    axis=0)
        ones = b.node("ConstantOfShape", [ls], value=_one_tensor(dt))
        keep = b.node("Cast", [b.node("Trilu", [ones], upper=0)], to=elem_type("bool", "sdpa"))
        scores = b.node("Where", [keep, scores, b.const(-math.inf, dt)])
    if mask is not None:
        if n.meta(3)[0] == "bool":
            scores = b.node("Where", [mask, scores, b.const(-math.inf, dt)])
        else:
            scores = b.node("Add", [scores, cast_to(b, mask, n.meta(3)[0], dt)])
    b.node("MatMul", [b.node("Softmax", [scores], axis=-1), v], n.out())


def _one_tensor(dtype):
    from onnx import helper
    return helper.make_tensor("one", elem_type(dtype, "sdpa"), [1], [1.0])


# --- convolution and pooling --------------------------------------------------------------


@op("conv_nd", "conv_nd_padding_mode")
def conv(b, n):
    x, w, bias, stride, padding, dilation, groups, name = (n.arg(i) for i in range(8))
    if name.startswith("conv_transpose"):
        raise n.unsupported(name)
    kernel = n.meta(1)[1][2:]
    if not all(isinstance(s, int) for s in kernel):
        raise n.unsupported("a dynamic kernel size")
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0] * len(kernel)
            pads = padding + padding
        else:  # "same": PyTorch puts the odd pixel at the end
            total = [d * (k - 1) for d, k in zip(dilation, kernel)]
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
    else:
        pads = list(padding) + list(padding)
    b.node("Conv", [x, w, bias], n.out(), kernel_shape=kernel, strides=stride, pads=pads,
           dilations=dilation, group=groups)


@op("max_pool_nd")
def max_pool(b, n):
    x, kernel, stride, padding, dilation, ceil_mode = (n.arg(i) for i in range(6))
    if n.used(1):
        raise n.unsupported("the indices output (PyTorch numbers them per plane, ONNX per "
                            "tensor)")
    b.node("MaxPool", [x], n.out(0), kernel_shape=kernel, strides=stride or kernel,
           pads=list(padding) * 2, dilations=dilation, ceil_mode=int(ceil_mode))


@op("avg_pool_nd")
def avg_pool(b, n):
    x, kernel, stride, padding, ceil_mode, count_include_pad, divisor = (n.arg(i) for i in range(7))
    if divisor is not None:
        raise n.unsupported("divisor_override")
    b.node("AveragePool", [x], n.out(), kernel_shape=kernel, strides=stride or kernel,
           pads=list(padding) * 2, ceil_mode=int(ceil_mode),
           count_include_pad=int(count_include_pad))


@op("adaptive_avg_pool_nd")
def adaptive_avg_pool(b, n):
    x, out_size = n.arg(0), n.arg(1)
    spatial = n.meta(0)[1][-len(out_size):]
    if all(s == 1 for s in out_size):
        b.node("GlobalAveragePool", [x], n.out())
        return
    # Otherwise an AveragePool when every window is the same: input sizes that divide evenly.
    kernel = []
    for i, o in zip(spatial, out_size):
        if o == -1:
            kernel.append(1)
        elif isinstance(i, int) and i % o == 0:
            kernel.append(i // o)
        else:
            raise n.unsupported(f"output size {out_size} from input size {spatial} (windows of "
                                f"different sizes)")
    b.node("AveragePool", [x], n.out(), kernel_shape=kernel, strides=kernel)
