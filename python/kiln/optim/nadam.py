"""NAdam: Adam with Nesterov momentum and a momentum schedule."""

import kiln
from kiln.optim.optimizer import _TensorOpOptimizer, _check_adam_args, _check_flags, _check_value, _new_step

__all__ = ["NAdam"]


class NAdam(_TensorOpOptimizer):
    """PyTorch's NAdam. State "mu_product" (the product of the momentum schedule so far) is a
    0-d float32 tensor on the host, like "step", as PyTorch keeps it."""

    _group_key_defaults = {
        "foreach": None, "maximize": False, "capturable": False, "differentiable": False,
        "decoupled_weight_decay": False}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_adam_args("NAdam", lr, eps, betas, weight_decay)
        _check_value("NAdam", 0.0 <= momentum_decay, "momentum_decay value", momentum_decay)
        _check_flags("NAdam", foreach, None, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    @staticmethod
    def _init_state(p, st, group):
        st["step"] = _new_step()
        st["mu_product"] = kiln.ones((), dtype=kiln.float32)
        st["exp_avg"] = kiln.zeros_like(p)
        st["exp_avg_sq"] = kiln.zeros_like(p)

    @staticmethod
    def _cast_state(param, value, key):
        # mu_product feeds host-side step sizes: kept on the host in float32 (no device sync).
        if key == "mu_product":
            return value.to(dtype=kiln.float32, device="cpu").clone()
        return _TensorOpOptimizer._cast_state(param, value, key)

    @staticmethod
    def _update(p, grad, st, group):
        lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
        beta1, beta2 = group["betas"]
        psi = group["momentum_decay"]
        if group["maximize"]:
            grad = grad.neg()
        st["step"] += 1
        t = st["step"].item()
        bias_correction2 = 1 - beta2**t
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        # The product is rounded to float32 at every step, as in PyTorch's float32 tensor.
        mu_product = st["mu_product"].mul_(mu).item()
        exp_avg, exp_avg_sq = st["exp_avg"], st["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt_().add_(eps)
        p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product))
        p.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1.0 - mu_product * mu_next))
