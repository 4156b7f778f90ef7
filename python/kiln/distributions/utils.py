"""Helpers shared by the distributions: broadcasting parameters, probs <-> logits,
cached properties, summing event dimensions."""

from numbers import Number

import kiln

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
           "probs_to_logits", "sum_rightmost"]


def broadcast_all(*values):
    """Broadcast tensors and Python numbers to one shape; numbers become tensors of
    the first tensor's dtype and device (the default dtype when all are numbers)."""
    if not all(isinstance(v, (kiln.Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, "
                         "kiln.Tensor or objects implementing __torch_function__.")
    if all(isinstance(v, kiln.Tensor) for v in values):
        return kiln.broadcast_tensors(*values)
    like = next((v for v in values if isinstance(v, kiln.Tensor)), None)
    options = ({"dtype": like.dtype, "device": like.device} if like is not None
               else {"dtype": kiln.get_default_dtype()})
    tensors = [v if isinstance(v, kiln.Tensor) else kiln.tensor(v, **options) for v in values]
    return kiln.broadcast_tensors(*tensors)


def sum_rightmost(value, dim):
    """Sum out the `dim` rightmost dimensions (value may be a number when dim is 0)."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:-dim] + (-1,)).sum(-1)


def clamp_probs(probs):
    """Clamp probabilities into the open interval (0, 1) by one float epsilon."""
    eps = kiln.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    """Sigmoid for binary logits, softmax over the last dim otherwise."""
    if is_binary:
        return kiln.sigmoid(logits)
    return kiln.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    """Inverse of logits_to_probs (up to an additive constant for the categorical case)."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return kiln.log(ps_clamped) - kiln.log1p(-ps_clamped)
    return kiln.log(ps_clamped)


class lazy_property:
    """Computes an attribute on first access and stores it on the instance, so that a
    distribution built from `logits` derives `probs` only if asked. Gradients flow
    through the derived value, so it is computed with grad enabled."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with kiln.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value
