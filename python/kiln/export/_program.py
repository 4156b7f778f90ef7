"""ExportedProgram: the graph (a JSON-shaped dict, docs/export_format.md), its constants, and
ways to run it. Running always goes through the C++ runtime (runtime/program.h), so Python and
C++ callers execute the same code."""

import json

import kiln
from kiln import _C


def _arg_text(arg, names):
    (kind, v), = arg.items()
    if kind == "tensor":
        return names.get(v, f"%{v}")
    if kind == "tensors":
        return "[" + ", ".join(names.get(i, f"%{i}") for i in v) + "]"
    if kind == "none":
        return "None"
    if kind == "bool":
        return str(bool(v))
    if kind == "str":
        return repr(v)
    if kind == "dtype":
        return f"kiln.{v}"
    if kind == "device":
        return "<device>"
    if kind == "ints":
        return "[" + ", ".join(str(i) for i in v) + "]"
    return str(v)


def _meta_text(meta):
    return f"{meta['dtype']}[{', '.join(str(s) for s in meta['shape'])}]"


class Graph:
    """The recorded graph; str() prints one line per node."""

    def __init__(self, data):
        self.data = data

    @property
    def nodes(self):
        return self.data["nodes"]

    def __str__(self):
        g = self.data
        names = {}
        for entry in g["inputs"]:
            names[entry["value"]] = f"%{entry['name']}"
        for entry in g["constants"]:
            names[entry["value"]] = f"%{entry['name']}"
        sig = ", ".join(f"{names[e['value']]}: {_meta_text(e['meta'])}" for e in g["inputs"])
        lines = [f"graph({sig}):"]
        for d in g["dims"]:
            lines.append(f"    # dim {d['name']} in [{d['min']}, {d['max']}]")
        for e in g["constants"]:
            lines.append(f"    # constant {names[e['value']]}: {_meta_text(e['meta'])}")
        for node in g["nodes"]:
            outs = ", ".join(f"%{o}: {_meta_text(m)}" for o, m in zip(node["outputs"],
                                                                      node["meta"]))
            args = ", ".join(_arg_text(a, names) for a in node["args"])
            regions = "".join(f"  # autocast {r['device_type']} {r['dtype']}"
                              for r in node.get("autocast", ()))
            lines.append(f"    {outs} = {node['op']}({args}){regions}")
        lines.append("    return (" + ", ".join(names.get(o, f"%{o}") for o in g["outputs"])
                     + ")")
        return "\n".join(lines)

    __repr__ = __str__


def _unflatten(tree, flat):
    (kind, v), = tree.items()
    if kind == "tensor":
        return flat[v]
    if kind == "none":
        return None
    items = [_unflatten(t, flat) for t in v]
    return tuple(items) if kind == "tuple" else items


class ExportedModule(kiln.nn.Module):
    """ep.module(): call it like the original module (tensor arguments in the same places)."""

    def __init__(self, program, tree, input_names):
        super().__init__()
        self._program = program
        self._tree = tree
        self._input_names = input_names
        self.training = False

    def forward(self, *args, **kwargs):
        inputs = [a for a in list(args) + list(kwargs.values()) if isinstance(a, kiln.Tensor)]
        if len(inputs) != len(self._input_names):
            raise TypeError(f"[ExportedModule] expected {len(self._input_names)} tensor "
                            f"arguments ({', '.join(self._input_names)}), got {len(inputs)}")
        return _unflatten(self._tree, self._program.run(inputs))

    def train(self, mode=True):
        if mode:
            raise RuntimeError("[ExportedModule] an exported program runs in eval mode only")
        return self


class ExportedProgram:
    """What kiln.export.export returns and kiln.export.load reads back."""

    def __init__(self, graph, state_dict):
        self._graph = graph
        self._state = dict(state_dict)
        self._json = json.dumps(graph, separators=(",", ":"))
        # Built once on the constants' device: this checks the graph (as loading a file does)
        # and serves module().
        device = next(iter(self._state.values())).device if self._state else "cpu"
        self._program = _C._export.Program(self._json, self._state, device)

    @property
    def graph(self):
        return Graph(self._graph)

    @property
    def graph_json(self):
        return self._json

    @property
    def state_dict(self):
        return dict(self._state)

    @property
    def range_constraints(self):
        return {d["name"]: (d["min"], d["max"]) for d in self._graph["dims"]}

    def module(self, device=None):
        """A module that runs the graph (through the C++ runtime) on `device` (default: where
        the constants are)."""
        program = self._program
        if device is not None:
            program = _C._export.Program(self._json, self._state, device)
        return ExportedModule(program, self._graph.get("output_tree", {"tensor": 0}),
                              [e["name"] for e in self._graph["inputs"]])

    def __call__(self, *args, **kwargs):
        raise RuntimeError("[ExportedProgram] call ep.module()(...) to run an exported program")

    def __str__(self):
        return f"ExportedProgram:\n{self.graph}"
