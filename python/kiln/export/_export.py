"""kiln.export.export: one traced call of the module, recorded by the C++ op front ends
(Note [Export tracing] in ops/export_trace.cpp)."""

import inspect
import json
import os
import traceback

import kiln
from kiln import _C
from kiln.export import _dim
from kiln.export._program import ExportedProgram

_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _input_names(mod, args, kwargs):
    """Names for the positional arguments (the forward's parameter names where it has them)."""
    try:
        params = list(inspect.signature(mod.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(len(args)):
        p = params[i] if i < len(params) else None
        if p is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            names.append(f"arg{i}")
        else:
            names.append(p.name)
    return names + list(kwargs)


def _user_frame(tb):
    """The innermost traceback frame outside kiln's own package: the model's line."""
    for frame in reversed(traceback.extract_tb(tb)):
        if not os.path.abspath(frame.filename).startswith(_KILN_DIR + os.sep):
            return frame
    return None


def _flatten_outputs(out, where="output"):
    """(tensors, tree): the tree mirrors tuples/lists with {"tensor": k} and {"none": 0}."""
    tensors = []

    def walk(x, at):
        if isinstance(x, kiln.Tensor):
            tensors.append(x)
            return {"tensor": len(tensors) - 1}
        if x is None:
            return {"none": 0}
        if isinstance(x, (tuple, list)):
            return {"tuple" if isinstance(x, tuple) else "list":
                    [walk(v, f"{at}[{i}]") for i, v in enumerate(x)]}
        raise TypeError(f"[export] {at} is a {type(x).__name__}; an exported module returns "
                        f"tensors, None, or tuples/lists of them")

    return tensors, walk(out, where)


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=True):
    """Runs `mod(*args, **kwargs)` once with recording on and returns an ExportedProgram.

    Tensor arguments become the program's inputs (positional first, then keyword, in order);
    other arguments are fixed at their export-time values, as is all Python control flow.
    Parameters and buffers become named constants. `dynamic_shapes` marks dims as dynamic:
    {"x": {0: Dim("batch")}} or a sequence in input order. The module must be in eval mode.
    Inside a kiln.autocast region, each op records the region, and the program runs it in the
    same precision wherever it runs (Note [Autocast export] in ops/export_trace.cpp).
    `strict` is accepted for PyTorch compatibility: kiln always records at the op level and
    refuses what it cannot capture.
    """
    if not isinstance(mod, kiln.nn.Module):
        raise TypeError(f"[export] expected a kiln.nn.Module, got {type(mod).__name__}")
    if not isinstance(args, tuple):
        raise TypeError(f"[export] args must be a tuple of the module's positional arguments, "
                        f"got {type(args).__name__}")
    kwargs = {} if kwargs is None else dict(kwargs)
    training = [name or type(mod).__name__ for name, m in mod.named_modules() if m.training]
    if training:
        raise RuntimeError(f"[export] the module is in training mode ({', '.join(training[:3])}"
                           f"{', ...' if len(training) > 3 else ''}); call model.eval() first: "
                           f"an exported program has eval-mode semantics (BatchNorm running "
                           f"stats, Dropout off)")
    names = _input_names(mod, args, kwargs)
    values = list(args) + list(kwargs.values())
    inputs = [(n, v) for n, v in zip(names, values) if isinstance(v, kiln.Tensor)]
    constants = list(mod.named_parameters()) + list(mod.named_buffers())
    per_input = _dim.resolve(dynamic_shapes, inputs)
    dims = _dim.check_samples(inputs, per_input, constants)

    # Inputs that require grad route every differentiable op through autograd's record(),
    # where an op outside the exportable set is caught (Note [Export tracing]).
    traced = {}
    for n, v in inputs:
        t = v.detach()
        if t.is_floating_point():
            t.requires_grad_(True)
        traced[n] = t
    frozen = [p for _, p in mod.named_parameters() if not p.requires_grad]
    recorder = _C._export.Recorder()
    try:
        for n, _ in inputs:
            recorder.add_input(n, traced[n])
        for cname, c in constants:
            recorder.add_constant(cname, c)
        for p in frozen:
            p.requires_grad_(True)
        call_args = [traced.get(n, v) if isinstance(v, kiln.Tensor) else v
                     for n, v in zip(names[:len(args)], args)]
        call_kwargs = {k: traced.get(k, v) if isinstance(v, kiln.Tensor) else v
                       for k, v in kwargs.items()}
        try:
            with kiln.enable_grad():
                out = mod(*call_args, **call_kwargs)
            flat, tree = _flatten_outputs(out)
            graph = json.loads(recorder.finish(flat))
        except Exception as e:
            frame = _user_frame(e.__traceback__)
            if frame is None or not str(e).startswith("[export]"):
                raise
            where = f"{frame.filename}:{frame.lineno}"
            if frame.line:
                where += f": {frame.line.strip()}"
            raise type(e)(f"{e}\n  (at {where})") from None
    finally:
        recorder.close()
        for p in frozen:
            p.requires_grad_(False)

    names_by_value = {}
    for spec, (n, t), entry in zip(per_input, inputs, graph["inputs"]):
        entry["meta"]["shape"] = [spec[i].__name__ if i in spec else s
                                  for i, s in enumerate(entry["meta"]["shape"])]
        names_by_value[entry["value"]] = n
    graph["dims"] = [{"name": name, "min": d.min, "max": d.max}
                     for name, (d, _) in dims.items()]
    graph["output_tree"] = tree
    _dim.symbolize(graph, _dim.size_table(dims))
    state = {c["name"]: dict(constants)[c["name"]].detach() for c in graph["constants"]}
    return ExportedProgram(graph, state)
