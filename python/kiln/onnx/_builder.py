"""The ONNX graph under construction: node and initializer lists, unique names, constants, and
sizes that depend on the dynamic dims (Note [ONNX sizes]). Only this module and _export.py
touch the `onnx` package's API."""

import ast

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from kiln.onnx._errors import OnnxExporterError

# kiln dtype name -> (ONNX element type, NumPy dtype of an initializer's values).
DTYPES = {
    "float32": (TensorProto.FLOAT, np.float32),
    "float64": (TensorProto.DOUBLE, np.float64),
    "float16": (TensorProto.FLOAT16, np.float16),
    "bfloat16": (TensorProto.BFLOAT16, None),
    "int64": (TensorProto.INT64, np.int64),
    "int32": (TensorProto.INT32, np.int32),
    "int16": (TensorProto.INT16, np.int16),
    "int8": (TensorProto.INT8, np.int8),
    "uint8": (TensorProto.UINT8, np.uint8),
    "bool": (TensorProto.BOOL, np.bool_),
}


def elem_type(dtype, where):
    if dtype not in DTYPES:
        raise OnnxExporterError(f"[kiln.onnx.export] {where}: dtype {dtype} has no ONNX "
                                f"equivalent that kiln writes")
    return DTYPES[dtype][0]


def tensor_proto(name, t):
    """An initializer from a kiln tensor (bfloat16 through ml_dtypes, which onnx depends on)."""
    dtype = str(t.dtype).rsplit(".", 1)[-1]
    if dtype == "bfloat16":
        import ml_dtypes
        array = t.float().numpy().astype(ml_dtypes.bfloat16)
    else:
        elem_type(dtype, f"constant '{name}'")
        array = t.contiguous().numpy()
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


# Note [ONNX sizes]
# kiln.export writes a size that depends on a dynamic dim as an expression over the dim names
# ("batch", "batch*seq", "(seq+1)//2"; Note [Symbolic sizes]). ONNX has no symbolic integers in
# attributes, so such a size becomes a small int64 subgraph: each dim is read once from the
# first graph input that carries it (Shape with start/end, a 1-element tensor) and the
# expression is built from Add/Sub/Mul/Div nodes over those. Sizes are never negative, so
# ONNX's truncating Div equals the floor division kiln recorded. A list of sizes that is all
# constants stays one initializer, so static models get no shape arithmetic at all.
_BINOPS = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.FloorDiv: "Div"}


class GraphBuilder:
    def __init__(self, opset):
        self.opset = opset
        self.nodes = []
        self.initializers = []
        self._used = set()
        self._dim_sources = {}  # dim name -> (graph input name, axis)
        self._cache = {}        # memoized sizes and constants: key -> tensor name

    def fresh(self, hint):
        name = hint
        k = 0
        while name in self._used:
            k += 1
            name = f"{hint}_{k}"
        self._used.add(name)
        return name

    def reserve(self, name):
        if name in self._used:
            raise OnnxExporterError(f"[kiln.onnx.export] the name '{name}' is used twice "
                                    f"(input_names, output_names and the module's parameter "
                                    f"names must be distinct)")
        self._used.add(name)
        return name

    def node(self, op_type, inputs, outputs=None, **attrs):
        """Appends a node; returns its output name (or the list of names for several).
        `outputs` is a name, a list of names, or None for one fresh name. An input of None is
        an omitted optional input."""
        if outputs is None:
            outputs = self.fresh(op_type.lower())
        names = [outputs] if isinstance(outputs, str) else list(outputs)
        ins = ["" if i is None else i for i in inputs]
        while ins and ins[-1] == "":
            ins.pop()
        self.nodes.append(helper.make_node(op_type, ins, names,
                                           name=self.fresh(f"{op_type}_{len(self.nodes)}"),
                                           **attrs))
        return names[0] if isinstance(outputs, str) else names

    @staticmethod
    def tensor(value, dtype, name=""):
        """A TensorProto holding `value` (a number or nested list) as `dtype`."""
        if dtype == "bfloat16":
            import ml_dtypes
            array = np.asarray(value, dtype=np.float32).astype(ml_dtypes.bfloat16)
        else:
            elem_type(dtype, "a constant")
            array = np.asarray(value, dtype=DTYPES[dtype][1])
        return numpy_helper.from_array(array, name)

    def const(self, value, dtype="int64"):
        """An initializer holding `value` (a number or nested list) as `dtype`."""
        key = ("const", dtype, repr(value))
        if key not in self._cache:
            name = self.fresh("const")
            self.initializers.append(self.tensor(value, dtype, name))
            self._cache[key] = name
        return self._cache[key]

    def add_dim_source(self, dim, input_name, axis):
        self._dim_sources.setdefault(dim, (input_name, axis))

    @property
    def dynamic(self):
        """Whether the graph has dynamic dims: then a size the trace recorded as an int may
        still depend on them (a product of three dims), and shapes are read at run time."""
        return bool(self._dim_sources)

    def size(self, v, local=None):
        """A 1-element int64 tensor holding the size `v` (an int or an expression). `local`
        binds more names in expressions to 1-element tensors (a Shape read)."""
        if isinstance(v, int):
            return self.const([v])
        local = local or {}
        key = ("size", v, tuple(sorted(local.items())))
        if key not in self._cache:
            try:
                tree = ast.parse(v, mode="eval").body
            except SyntaxError:
                raise OnnxExporterError(f"[kiln.onnx.export] bad size expression '{v}'") from None
            self._cache[key] = self._expr(tree, v, local)
        return self._cache[key]

    def _expr(self, e, text, local):
        if isinstance(e, ast.Constant) and isinstance(e.value, int):
            return self.const([e.value])
        if isinstance(e, ast.Name) and e.id in local:
            return local[e.id]
        if isinstance(e, ast.Name):
            if e.id not in self._dim_sources:
                raise OnnxExporterError(f"[kiln.onnx.export] size expression '{text}' names "
                                        f"'{e.id}', which no graph input carries")
            src, axis = self._dim_sources[e.id]
            key = ("dim", e.id)
            if key not in self._cache:
                self._cache[key] = self.node("Shape", [src], self.fresh(e.id), start=axis,
                                             end=axis + 1)
            return self._cache[key]
        if isinstance(e, ast.BinOp) and type(e.op) in _BINOPS:
            return self.node(_BINOPS[type(e.op)], [self._expr(e.left, text, local),
                                                   self._expr(e.right, text, local)])
        raise OnnxExporterError(f"[kiln.onnx.export] unsupported size expression '{text}'")

    def sizes(self, values, local=None):
        """A 1-D int64 tensor holding the sizes `values` (ints or expressions)."""
        if all(isinstance(v, int) for v in values):
            return self.const(list(values))
        key = ("sizes", tuple(values), tuple(sorted((local or {}).items())))
        if key not in self._cache:
            self._cache[key] = self.node("Concat", [self.size(v, local) for v in values], axis=0)
        return self._cache[key]

    def shape_of(self, x, d):
        """A 1-element int64 tensor holding dim d (>= 0) of tensor x at run time."""
        key = ("shape_of", x, d)
        if key not in self._cache:
            self._cache[key] = self.node("Shape", [x], start=d, end=d + 1)
        return self._cache[key]

    def scalar_of(self, v, dtype):
        """A 0-d tensor of `dtype` holding the size `v` (an int or an expression)."""
        if isinstance(v, int):
            return self.const(v, dtype)
        out = self.node("Squeeze", [self.size(v), self.const([0])])
        return out if dtype == "int64" else self.node("Cast", [out], to=elem_type(dtype, v))

    def model(self, inputs, outputs, producer_version):
        graph = helper.make_graph(self.nodes, "kiln", inputs, outputs, self.initializers)
        return helper.make_model(graph, producer_name="kiln", producer_version=producer_version,
                                 opset_imports=[helper.make_opsetid("", self.opset)],
                                 ir_version=ir_version(self.opset))


# The IR version each default-domain opset was introduced with (the ONNX versioning table).
# A model is stamped with its opset's, not the installed onnx package's newest: a newer onnx
# beside an older ONNX Runtime would otherwise write files that runtime refuses ("Unsupported
# model IR version"), though nothing in them needs the newer IR.
_IR_VERSION_OF_OPSET = {17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 11}


def ir_version(opset):
    return _IR_VERSION_OF_OPSET.get(opset, onnx.IR_VERSION)


def value_info(name, dtype, shape, where):
    return helper.make_tensor_value_info(name, elem_type(dtype, where), list(shape))
