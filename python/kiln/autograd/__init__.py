"""kiln.autograd: backward, grad, grad modes and gradcheck."""

from kiln import _C
from kiln.autograd.grad_mode import enable_grad, no_grad, set_grad_enabled  # noqa: F401
from kiln.autograd.gradcheck import gradcheck  # noqa: F401


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    _C._backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    single = isinstance(inputs, _C.Tensor)
    result = _C._grad(outputs, [inputs] if single else list(inputs), grad_outputs, retain_graph,
                      create_graph, allow_unused)
    return tuple(result)
