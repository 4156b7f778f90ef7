"""kiln.export: capture a module's computation as a graph, save it in one file, and run it
from Python or from C++ without the model's code (after torch.export's shape).

    ep = kiln.export.export(model.eval(), (x,), dynamic_shapes={"x": {0: Dim("batch")}})
    kiln.export.save(ep, "model.kiln")
    out = kiln.export.load("model.kiln").module()(x)

C++: kiln::runtime::Program::load("model.kiln", device).run({x}) (runtime/program.h).
The file format is docs/export_format.md; how ops are recorded is Note [Export tracing].
"""

from kiln.export._dim import Dim
from kiln.export._export import export
from kiln.export._program import ExportedProgram
from kiln.export._serialize import load, save

__all__ = ["Dim", "ExportedProgram", "export", "load", "save"]
