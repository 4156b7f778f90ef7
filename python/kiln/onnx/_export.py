"""kiln.onnx.export: a module traced by kiln.export, its graph written as an ONNX model
(Note [ONNX export])."""

import os

import kiln
from kiln.onnx._errors import UnsupportedOperatorError

DEFAULT_OPSET = 17
MIN_OPSET = 17

# Note [ONNX export]
# kiln.onnx does not trace anything itself: kiln.export.export records the module (the same
# graph kiln's C++ runtime runs, Note [Export tracing]) and each node is translated by the
# function _ops.TABLE holds for its op name, so what exports to ONNX is exactly what exports at
# all, and an op without a translation is named in the error. Nodes whose outputs nothing uses
# (the encoder's discarded transposes) are dropped first. Dynamic axes become kiln Dims, so
# the graph's sizes that depend on them arrive as expressions (Note [ONNX sizes]). Programs
# recorded under autocast are refused: their casts live in kiln's op front ends (Note
# [Autocast export]), not in the graph.


def _import_onnx():
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise ImportError("[kiln.onnx.export] needs the onnx package: pip install onnx (the "
                          "tests also use onnxruntime; `make test-deps` installs both)") from None


def _opset(opset_version):
    import onnx
    if opset_version is None:
        return DEFAULT_OPSET
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset_version, bool) or not isinstance(opset_version, int) or \
            not MIN_OPSET <= opset_version <= newest:
        raise ValueError(f"[kiln.onnx.export] opset_version must be an int in [{MIN_OPSET}, "
                         f"{newest}] (the installed onnx's newest), got {opset_version!r}")
    return opset_version


def _names(given, defaults, what):
    if given is None:
        return list(defaults)
    if isinstance(given, str) or not all(isinstance(n, str) for n in given):
        raise TypeError(f"[kiln.onnx.export] {what} must be a list of str, got {given!r}")
    given = list(given)
    if len(given) > len(defaults):
        raise ValueError(f"[kiln.onnx.export] {what} has {len(given)} names for "
                         f"{len(defaults)} {what.split('_')[0]}s")
    return given + list(defaults[len(given):])


def _trace(model, args, kwargs, input_names, dynamic_axes):
    from kiln.export import ExportedProgram, export
    from kiln.export._export import _input_names
    from kiln.onnx._axes import DynamicAxes

    if isinstance(model, ExportedProgram):
        if args or kwargs:
            raise ValueError("[kiln.onnx.export] an ExportedProgram takes no args: its inputs "
                             "are recorded")
        names = [e["name"] for e in model.graph.data["inputs"]]
        user = _names(input_names, names, "input_names")
        if dynamic_axes:
            raise ValueError("[kiln.onnx.export] dynamic_axes cannot change an ExportedProgram;"
                             " give dynamic_shapes to kiln.export.export instead")
        return model, user, DynamicAxes(None, user, [])
    if not isinstance(model, kiln.nn.Module):
        raise TypeError(f"[kiln.onnx.export] expected a kiln.nn.Module or a "
                        f"kiln.export.ExportedProgram, got {type(model).__name__}")
    if isinstance(args, kiln.Tensor):
        args = (args,)
    if not isinstance(args, tuple):
        raise TypeError(f"[kiln.onnx.export] args must be a tuple (or one tensor), got "
                        f"{type(args).__name__}")
    kwargs = {} if kwargs is None else dict(kwargs)
    values = list(args) + list(kwargs.values())
    tensors = [(n, v) for n, v in zip(_input_names(model, args, kwargs), values)
               if isinstance(v, kiln.Tensor)]
    user = _names(input_names, [n for n, _ in tensors], "input_names")
    axes = DynamicAxes(dynamic_axes, user, [t.dim() for _, t in tensors])
    # PyTorch's TrainingMode.EVAL: the export sees the module in eval mode, whatever mode the
    # caller left it in, and the caller gets its modes back.
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        ep = export(model, args, kwargs, dynamic_shapes=axes.dynamic_shapes)
    finally:
        for m, training in modes:
            m.training = training
    return ep, user, axes


def _live(graph):
    """The nodes some output depends on, in order, and every value id they or the outputs
    use."""
    used = set(graph["outputs"])
    live = []
    for node in reversed(graph["nodes"]):
        if not used.intersection(node["outputs"]):
            continue
        live.append(node)
        for arg in node["args"]:
            (kind, v), = arg.items()
            if kind == "tensor":
                used.add(v)
            elif kind == "tensors":
                used.update(v)
    return live[::-1], used


def export(model, args=(), f=None, *, kwargs=None, export_params=True, verbose=None,
           input_names=None, output_names=None, opset_version=None, dynamic_axes=None,
           keep_initializers_as_inputs=False, training=None, do_constant_folding=True,
           **unsupported):
    """Exports `model` (a kiln.nn.Module, run once on `args`, or a kiln.export.ExportedProgram)
    as an ONNX model, written to `f` (a path or a binary file object) when given, and returns
    the onnx.ModelProto.

    PyTorch's arguments: `input_names`/`output_names` name the graph's inputs (the tensors of
    args and kwargs, in order) and outputs; `dynamic_axes` maps such a name to {axis: "dim
    name"} or a list of axes; `opset_version` defaults to 17; `export_params=False` makes the
    parameters graph inputs instead of initializers. The module is exported in eval mode.
    """
    _import_onnx()
    import onnx
    from kiln.onnx import _builder, _ops

    if unsupported:
        raise TypeError(f"[kiln.onnx.export] unsupported arguments: {sorted(unsupported)} "
                        f"(kiln exports from kiln.export's graph; the TorchScript and dynamo "
                        f"options have no meaning here)")
    if getattr(training, "name", training) not in (None, "EVAL"):
        raise ValueError("[kiln.onnx.export] only training=EVAL is supported: an exported "
                         "graph has eval-mode semantics")
    opset = _opset(opset_version)
    ep, in_names, axes = _trace(model, args, kwargs, input_names, dynamic_axes)
    graph = ep.graph.data
    out_names = _names(output_names,
                       ["output"] if len(graph["outputs"]) == 1 else
                       [f"output_{k}" for k in range(len(graph["outputs"]))], "output_names")
    axes.bind_outputs(dynamic_axes, in_names, out_names)
    recorded = [node["op"] for node in graph["nodes"] if "autocast" in node]
    if recorded:
        raise UnsupportedOperatorError(
            f"[kiln.onnx.export] the graph was recorded under autocast (ops {recorded[:3]}); "
            f"ONNX export writes the model's own precision: export without autocast, or "
            f"convert the model with .half()/.bfloat16()")

    b = _builder.GraphBuilder(opset)
    names, metas = {}, {}
    onnx_inputs = []
    for entry, name in zip(graph["inputs"], in_names):
        names[entry["value"]] = b.reserve(name)
        metas[entry["value"]] = entry["meta"]
        shape = [axes.dim_param(s) for s in entry["meta"]["shape"]]
        onnx_inputs.append(_builder.value_info(name, entry["meta"]["dtype"], shape, name))
        for a, s in enumerate(entry["meta"]["shape"]):
            if isinstance(s, str):
                b.add_dim_source(s, name, a)
    live, used = _live(graph)
    state = ep.state_dict
    for entry in graph["constants"]:
        if entry["value"] not in used:  # num_batches_tracked, weights of dropped nodes
            continue
        name = b.reserve(entry["name"])
        names[entry["value"]] = name
        metas[entry["value"]] = entry["meta"]
        if export_params:
            b.initializers.append(_builder.tensor_proto(name, state[name]))
        if not export_params or keep_initializers_as_inputs:
            onnx_inputs.append(_builder.value_info(name, entry["meta"]["dtype"],
                                                   entry["meta"]["shape"], name))

    # A graph output that a node computes gets its output name directly; one that is an input,
    # a constant or an output twice goes through an Identity.
    renamed = {}
    for value, name in zip(graph["outputs"], out_names):
        if value not in names and value not in renamed:
            renamed[value] = b.reserve(name)
    scalars = set()
    for node in live:
        for value, meta in zip(node["outputs"], node["meta"]):
            names[value] = renamed.get(value) or b.fresh(f"{node['op']}_{value}")
            metas[value] = meta
        if node["op"] == "scalar":
            scalars.update(node["outputs"])
        translate = _ops.TABLE.get(node["op"])
        if translate is None:
            raise UnsupportedOperatorError(
                f"[kiln.onnx.export] op '{node['op']}' has no ONNX translation (kiln.onnx "
                f"translates {len(_ops.TABLE)} of kiln.export's ops: "
                f"{', '.join(sorted(_ops.TABLE))})")
        translate(b, _ops.Node(node, names, metas, scalars, used))
    onnx_outputs = []
    for k, (value, name) in enumerate(zip(graph["outputs"], out_names)):
        if renamed.get(value) != name:
            b.node("Identity", [names[value]], b.reserve(name))
        meta = metas[value]
        shape = [axes.dim_param(s) for s in meta["shape"]]
        for a, dim in axes.outputs.get(name, {}).items():
            if -len(shape) <= a < len(shape):
                shape[a] = dim
        onnx_outputs.append(_builder.value_info(name, meta["dtype"], shape, name))

    model_proto = b.model(onnx_inputs, onnx_outputs, kiln.__version__)
    onnx.checker.check_model(model_proto)
    if verbose:
        print(onnx.helper.printable_graph(model_proto.graph))
    if f is not None:
        if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "write"):
            raise TypeError(f"[kiln.onnx.export] f must be a path or a binary file object, got "
                            f"{type(f).__name__}")
        onnx.save_model(model_proto, os.fspath(f) if isinstance(f, os.PathLike) else f)
    return model_proto
