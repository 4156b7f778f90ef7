"""Gradient clipping: clip_grad_norm_ and clip_grad_value_.

Note [No host syncs in clipping]
The total norm stays a device tensor: one norm per gradient, stacked, normed,
and the clip coefficient clamped to at most 1 and multiplied into every
gradient. Nothing is read back to the host unless error_if_nonfinite asks to
check the norm.
"""

import kiln
from kiln._C import Tensor
from kiln.autograd.grad_mode import no_grad


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (as if they were concatenated), a 0-d tensor on
    the first tensor's device."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return kiln.tensor(0.0)
    first_device = tensors[0].device
    norms = [kiln.linalg.vector_norm(t, norm_type) for t in tensors]
    dtypes = {n.dtype for n in norms}
    dtype = norms[0].dtype if len(dtypes) == 1 else (
        kiln.float64 if kiln.float64 in dtypes else kiln.float32)
    norms = [n.to(device=first_device, dtype=dtype) for n in norms]
    total = kiln.linalg.vector_norm(kiln.stack(norms), norm_type)
    if error_if_nonfinite and bool(total.isnan() | total.isinf()):
        raise RuntimeError(f"[clip_grad_norm_] The total norm of order {norm_type} for gradients "
                           "from `parameters` is non-finite, so it cannot be clipped. To disable "
                           "this error and scale the gradients by the non-finite norm anyway, "
                           "set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales every gradient by min(1, max_norm / (total_norm + 1e-6)) in place."""
    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(device=g.device, dtype=g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Rescales the gradients so their combined norm is at most max_norm; returns the total
    norm before clipping (a device tensor, Note [No host syncs in clipping])."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    with no_grad():
        total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite)
        clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
