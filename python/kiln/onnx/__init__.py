"""kiln.onnx: kiln models as ONNX files, for ONNX Runtime, TensorRT and other ONNX consumers
(PyTorch's torch.onnx.export signature).

    kiln.onnx.export(model.eval(), (x,), "model.onnx", input_names=["x"],
                     dynamic_axes={"x": {0: "batch"}})

The graph is kiln.export's (Note [ONNX export] in _export.py); `onnx` must be installed.
"""

from kiln.onnx._errors import OnnxExporterError, UnsupportedOperatorError
from kiln.onnx._export import export

__all__ = ["OnnxExporterError", "UnsupportedOperatorError", "export"]
