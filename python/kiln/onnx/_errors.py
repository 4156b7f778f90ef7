"""kiln.onnx's exception types, under PyTorch's names (torch.onnx.errors)."""


class OnnxExporterError(RuntimeError):
    """A model or an argument that kiln.onnx.export cannot turn into ONNX."""


class UnsupportedOperatorError(OnnxExporterError):
    """The exported graph holds an op (or an op's argument) with no ONNX translation."""
