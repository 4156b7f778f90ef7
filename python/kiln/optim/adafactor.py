"""Adafactor: Adam-like steps whose second moment of a matrix is kept as row and column
factors (memory O(rows + cols) instead of O(rows * cols))."""

import kiln
from kiln.optim.optimizer import _TensorOpOptimizer, _new_step

__all__ = ["Adafactor"]


class Adafactor(_TensorOpOptimizer):
    """PyTorch's Adafactor (Shazeer and Stern, 2018, in PyTorch's variant: no first moment,
    beta2_t = 1 - t^beta2_decay, relative step size min(lr, 1/sqrt(t)) scaled by the
    parameter's RMS, update clipped to RMS d, decoupled weight decay).

    Tensors of two or more dims keep row_var (last dim reduced) and col_var (second-to-last
    reduced); vectors keep a full variance. Like PyTorch's, each step reads the parameter's
    and the update's norms on the host."""

    _group_key_defaults = {"foreach": None}

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        checks = [(0.0 <= lr, f"Learning rate should be >= 0 but is: {lr}"),
                  (0.0 >= beta2_decay, f"beta2_decay should be <= 0 but is: {beta2_decay}"),
                  (eps[0] is None or 0.0 <= eps[0], f"epsilon1 should be >= 0 but is: {eps[0]}"),
                  (0.0 <= eps[1], f"epsilon2 should be >= 0 but is: {eps[1]}"),
                  (1.0 <= d, f"Clipping threshold d should be >= 1 but is: {d}"),
                  (0.0 <= weight_decay, f"weight_decay should be >= 0 but is: {weight_decay}")]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"[Adafactor] {message}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    @staticmethod
    def _init_state(p, st, group):
        st["step"] = _new_step()
        if p.dim() > 1:
            row_shape, col_shape = list(p.shape), list(p.shape)
            row_shape[-1] = 1
            col_shape[-2] = 1
            st["row_var"] = kiln.zeros(row_shape, dtype=p.grad.dtype, device=p.device)
            st["col_var"] = kiln.zeros(col_shape, dtype=p.grad.dtype, device=p.device)
        else:
            st["variance"] = kiln.zeros_like(p)

    @staticmethod
    def _update(p, grad, st, group):
        lr, weight_decay, d = group["lr"], group["weight_decay"], group["d"]
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = kiln.finfo(p.dtype).eps
        if group["maximize"]:
            grad = grad.neg()
        st["step"] += 1
        t = st["step"].item()
        one_minus_beta2 = t ** group["beta2_decay"]
        rho = min(lr, 1 / t**0.5)
        alpha = max(eps2, p.norm(2).item() / p.numel() ** 0.5) * rho
        if weight_decay != 0:
            p.mul_(1 - lr * weight_decay)
        if grad.dim() > 1:
            row_var, col_var = st["row_var"], st["col_var"]
            row_var.lerp_((grad * grad).mean(dim=-1, keepdim=True), one_minus_beta2)
            col_var.lerp_((grad * grad).mean(dim=-2, keepdim=True), one_minus_beta2)
            var_estimate = (row_var @ col_var).div_(
                row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
        else:
            st["variance"].lerp_(grad * grad, one_minus_beta2)
            var_estimate = st["variance"].clone()
        # eps1 bounds the variance from below, squared since the step divides by its root.
        update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_().mul_(grad)
        denom = max(1.0, update.norm(2).item() / (update.numel() ** 0.5 * d))
        p.add_(update, alpha=-alpha / denom)
