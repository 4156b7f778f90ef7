"""RAdam: Adam with the variance of the adaptive lr rectified (plain momentum SGD while the
second-moment estimate is too young to trust)."""

import math

import kiln
from kiln.optim.optimizer import _TensorOpOptimizer, _check_adam_args, _check_flags, _new_step

__all__ = ["RAdam"]


class RAdam(_TensorOpOptimizer):
    """PyTorch's RAdam (optionally with AdamW's decoupled weight decay)."""

    _group_key_defaults = {
        "foreach": None, "maximize": False, "differentiable": False,
        "decoupled_weight_decay": False, "capturable": False}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_adam_args("RAdam", lr, eps, betas, weight_decay)
        _check_flags("RAdam", foreach, None, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    @staticmethod
    def _init_state(p, st, group):
        st["step"] = _new_step()
        st["exp_avg"] = kiln.zeros_like(p)
        st["exp_avg_sq"] = kiln.zeros_like(p)

    @staticmethod
    def _update(p, grad, st, group):
        lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
        beta1, beta2 = group["betas"]
        if group["maximize"]:
            grad = grad.neg()
        st["step"] += 1
        t = st["step"].item()
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)
        exp_avg, exp_avg_sq = st["exp_avg"], st["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1**t
        bias_correction2 = 1 - beta2**t
        # rho: the length of the simple moving average the second moment approximates; the
        # rectification is defined (and the adaptive lr used) only once it exceeds 5.
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * beta2**t / bias_correction2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                             / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            denom = exp_avg_sq.sqrt().add_(eps)
            p.addcdiv_(exp_avg, denom,
                       value=-lr * rect * math.sqrt(bias_correction2) / bias_correction1)
        else:
            p.add_(exp_avg, alpha=-lr / bias_correction1)
