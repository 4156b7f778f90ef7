"""kiln.autograd: backward, grad, grad modes, gradcheck, custom Functions,
functional transforms and anomaly detection."""

from kiln import _C
from kiln.autograd import function, functional  # noqa: F401
from kiln.autograd.anomaly_mode import (  # noqa: F401
    detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly)
from kiln.autograd.function import Function  # noqa: F401
from kiln.autograd.grad_mode import enable_grad, no_grad, set_grad_enabled  # noqa: F401
from kiln.autograd.gradcheck import gradcheck, gradgradcheck  # noqa: F401
from kiln.autograd.variable import Variable  # noqa: F401


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    _C._backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    single = isinstance(inputs, _C.Tensor)
    result = _C._grad(outputs, [inputs] if single else list(inputs), grad_outputs, retain_graph,
                      create_graph, allow_unused)
    return tuple(result)


def __getattr__(name):
    # kiln.autograd.profiler (PyTorch's older profiler spelling) loads on first use, like
    # kiln.profiler itself.
    if name == "profiler":
        import importlib

        return importlib.import_module("kiln.autograd.profiler")
    raise AttributeError(f"module 'kiln.autograd' has no attribute {name!r}")
