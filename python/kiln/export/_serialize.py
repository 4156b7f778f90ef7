"""kiln.export.save / load: one safetensors file, the graph JSON in its metadata
(docs/export_format.md). No pickle: loading parses JSON and tensor bytes, and the C++ loader
checks all of it before anything runs."""

import json
import os

from kiln import _C
from kiln.export._program import ExportedProgram


def _path(f, op):
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    raise TypeError(f"[{op}] expected a file path (str or os.PathLike), got {type(f).__name__}")


def save(ep, f):
    """Writes `ep` to the file `f` (a path). The file replaces `f` only once complete."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"[kiln.export.save] expected an ExportedProgram, got "
                        f"{type(ep).__name__}")
    _C._export.save_program(_path(f, "kiln.export.save"), ep.graph_json, ep.state_dict)


def load(f):
    """Reads a file written by kiln.export.save (weights on the CPU; ep.module(device) moves
    them)."""
    graph_json, state = _C._export.read_program_file(_path(f, "kiln.export.load"))
    _C._export.Program(graph_json, state, "cpu")  # every check of the C++ loader, or raises
    return ExportedProgram(json.loads(graph_json), state)
