"""Adadelta: steps scaled by the ratio of running RMS of past updates and of gradients."""

import kiln
from kiln.optim.optimizer import _TensorOpOptimizer, _check_flags, _check_value, _new_step

__all__ = ["Adadelta"]


class Adadelta(_TensorOpOptimizer):
    """PyTorch's Adadelta (lr multiplies the Adadelta update; 1.0 is the paper's method)."""

    _group_key_defaults = {
        "foreach": None, "maximize": False, "differentiable": False, "capturable": False}

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check_value("Adadelta", 0.0 <= lr, "learning rate", lr)
        _check_value("Adadelta", 0.0 <= rho <= 1.0, "rho value", rho)
        _check_value("Adadelta", 0.0 <= eps, "epsilon value", eps)
        _check_value("Adadelta", 0.0 <= weight_decay, "weight_decay value", weight_decay)
        _check_flags("Adadelta", foreach, None, differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    @staticmethod
    def _init_state(p, st, group):
        st["step"] = _new_step()
        st["square_avg"] = kiln.zeros_like(p)
        st["acc_delta"] = kiln.zeros_like(p)

    @staticmethod
    def _update(p, grad, st, group):
        lr, rho, eps, weight_decay = group["lr"], group["rho"], group["eps"], group["weight_decay"]
        st["step"] += 1
        if group["maximize"]:
            grad = grad.neg()
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        square_avg, acc_delta = st["square_avg"], st["acc_delta"]
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-lr)
