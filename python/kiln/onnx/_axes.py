"""PyTorch's dynamic_axes ({name: {axis: "dim name"}} or {name: [axis, ...]}) as kiln.export's
dynamic_shapes, and the ONNX dim_param names of the graph's inputs and outputs."""

import keyword
import re

from kiln.export import Dim


def _identifier(name, taken):
    """A kiln Dim name for an ONNX dim name (which may be any string)."""
    base = re.sub(r"\W", "_", name)
    if not base or base[0].isdigit() or keyword.iskeyword(base):
        base = f"d_{base}"
    ident, k = base, 0
    while ident in taken:
        k += 1
        ident = f"{base}_{k}"
    return ident


def _per_name(dynamic_axes, name):
    spec = dynamic_axes[name]
    if isinstance(spec, dict):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        items = [(a, f"{name}_dynamic_axes_{i + 1}") for i, a in enumerate(spec)]
    else:
        raise TypeError(f"[kiln.onnx.export] dynamic_axes['{name}'] must be a dict "
                        f"{{axis: name}} or a list of axes, got {type(spec).__name__}")
    for a, dim in items:
        if isinstance(a, bool) or not isinstance(a, int):
            raise TypeError(f"[kiln.onnx.export] dynamic_axes['{name}']: axis {a!r} must be an "
                            f"int")
        if not isinstance(dim, str) or not dim:
            raise TypeError(f"[kiln.onnx.export] dynamic_axes['{name}'][{a}]: the dim name must "
                            f"be a non-empty str, got {dim!r}")
    return items


class DynamicAxes:
    """dynamic_shapes: a list per tensor input for kiln.export.export; onnx_name: kiln Dim
    name -> ONNX dim name; outputs: output name -> {axis: ONNX dim name}."""

    def __init__(self, dynamic_axes, input_names, ranks):
        self.dynamic_shapes = None
        self.onnx_name = {}
        self.outputs = {}
        if not dynamic_axes:
            return
        if not isinstance(dynamic_axes, dict):
            raise TypeError(f"[kiln.onnx.export] dynamic_axes must be a dict, got "
                            f"{type(dynamic_axes).__name__}")
        dims = {}  # ONNX dim name -> Dim
        shapes = []
        for name, rank in zip(input_names, ranks):
            spec = {}
            for a, dim in (_per_name(dynamic_axes, name) if name in dynamic_axes else []):
                if not -rank <= a < rank:
                    raise ValueError(f"[kiln.onnx.export] dynamic_axes['{name}']: axis {a} is "
                                     f"out of range for a {rank}-d input")
                if dim not in dims:
                    ident = _identifier(dim, self.onnx_name)
                    dims[dim] = Dim(ident)
                    self.onnx_name[ident] = dim
                spec[a % rank] = dims[dim]
            shapes.append(spec)
        self.dynamic_shapes = shapes

    def bind_outputs(self, dynamic_axes, input_names, output_names):
        """Checks that dynamic_axes names only inputs and outputs; keeps the outputs' axes."""
        if not dynamic_axes:
            return
        unknown = [k for k in dynamic_axes if k not in input_names and k not in output_names]
        if unknown:
            raise ValueError(f"[kiln.onnx.export] dynamic_axes names {unknown}, which are "
                             f"neither inputs {list(input_names)} nor outputs "
                             f"{list(output_names)}")
        for name in output_names:
            if name in dynamic_axes:
                self.outputs[name] = dict(_per_name(dynamic_axes, name))

    def dim_param(self, size):
        """An ONNX shape entry for a recorded size: an int, or a dim name / expression with
        the kiln Dim names replaced by the ONNX ones."""
        if isinstance(size, int):
            return size
        return re.sub(r"[A-Za-z_]\w*", lambda m: self.onnx_name.get(m.group(0), m.group(0)),
                      size)
