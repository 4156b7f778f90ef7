"""Rprop: per-element step sizes that grow while the gradient keeps its sign and shrink when
it flips; only the gradient's sign moves the parameter."""

import kiln
from kiln.optim.optimizer import _TensorOpOptimizer, _check_flags, _check_value, _new_step

__all__ = ["Rprop"]


class Rprop(_TensorOpOptimizer):
    """PyTorch's Rprop (the iRprop- variant: after a sign flip the gradient counts as zero)."""

    _group_key_defaults = {
        "foreach": None, "maximize": False, "differentiable": False, "capturable": False}

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_value("Rprop", 0.0 <= lr, "learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"[Rprop] Invalid eta values: {etas[0]}, {etas[1]}")
        _check_flags("Rprop", foreach, None, differentiable)
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    @staticmethod
    def _init_state(p, st, group):
        st["step"] = _new_step()
        st["prev"] = kiln.zeros_like(p)
        st["step_size"] = kiln.full_like(p, group["lr"])

    @staticmethod
    def _update(p, grad, st, group):
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        if group["maximize"]:
            grad = grad.neg()
        st["step"] += 1
        prev, step_size = st["prev"], st["step_size"]
        sign = grad.mul(prev).sign()
        factor = kiln.where(sign > 0, kiln.full_like(sign, etaplus),
                            kiln.where(sign < 0, kiln.full_like(sign, etaminus),
                                       kiln.ones_like(sign)))
        step_size.mul_(factor).clamp_(step_size_min, step_size_max)
        # After a sign change the step is skipped and the next comparison starts afresh.
        grad = kiln.where(sign < 0, kiln.zeros_like(grad), grad)
        p.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)
