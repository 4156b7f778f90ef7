"""Adamax: Adam with the infinity norm in place of the second moment."""

import kiln
from kiln.optim.optimizer import _TensorOpOptimizer, _check_adam_args, _check_flags, _new_step

__all__ = ["Adamax"]


class Adamax(_TensorOpOptimizer):
    """PyTorch's Adamax: exp_inf = max(beta2 * exp_inf, |grad| + eps)."""

    _group_key_defaults = {
        "foreach": None, "maximize": False, "differentiable": False, "capturable": False}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_adam_args("Adamax", lr, eps, betas, weight_decay)
        _check_flags("Adamax", foreach, None, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @staticmethod
    def _init_state(p, st, group):
        st["step"] = _new_step()
        st["exp_avg"] = kiln.zeros_like(p)
        st["exp_inf"] = kiln.zeros_like(p)

    @staticmethod
    def _update(p, grad, st, group):
        lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
        beta1, beta2 = group["betas"]
        if group["maximize"]:
            grad = grad.neg()
        st["step"] += 1
        t = st["step"].item()
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        exp_avg, exp_inf = st["exp_avg"], st["exp_inf"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_inf.copy_(kiln.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
        p.addcdiv_(exp_avg, exp_inf, value=-lr / (1 - beta1**t))
