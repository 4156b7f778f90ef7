"""parameters_to_vector / vector_to_parameters: all parameters as one flat tensor."""

import kiln
from kiln._C import Tensor


def _check_same_device(param, device):
    if device is not None and param.device != device:
        raise TypeError(f"[parameters_to_vector] Found two parameters on different devices "
                        f"({device} and {param.device}), this is currently not supported.")
    return param.device


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated, in iteration order."""
    device = None
    flat = []
    for param in parameters:
        device = _check_same_device(param, device)
        flat.append(param.reshape(-1))
    return kiln.cat(flat)


def vector_to_parameters(vec, parameters):
    """Points each parameter's data at its slice of `vec` (the inverse of
    parameters_to_vector)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"[vector_to_parameters] expected kiln.Tensor, but got: "
                        f"{type(vec).__name__}")
    device = None
    offset = 0
    for param in parameters:
        device = _check_same_device(param, device)
        n = param.numel()
        param.data = vec[offset:offset + n].view_as(param).data
        offset += n
