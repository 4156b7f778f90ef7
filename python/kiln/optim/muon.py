"""Muon: momentum SGD for 2-D weights whose update is orthogonalised by a Newton-Schulz
iteration."""

import math

import kiln
from kiln.optim.optimizer import Optimizer

__all__ = ["Muon"]

_LR_ADJUSTMENTS = ("original", "match_rms_adamw", "spectral_unclamped")


def _orthogonalize(update, ns_coefficients, ns_steps, eps):
    """The quintic Newton-Schulz iteration X <- aX + (bG + cG^2)X, G = XX^T, in bfloat16 as in
    PyTorch: it drives the singular values of update/|update| towards 1 (roughly U V^T of its
    SVD) without a decomposition. Wide orientation keeps G the smaller Gram matrix."""
    if ns_steps >= 100:
        raise ValueError("[Muon] Number of steps must be less than 100 for computational "
                         "efficiency")
    if update.dim() != 2:
        raise ValueError("[Muon] Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("[Muon] Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    tall = update.shape[0] > update.shape[1]
    x = update.to(kiln.bfloat16).clone()
    if tall:
        x = x.t()
    x = x.div(x.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = x @ x.t()
        poly = kiln.addmm(gram, gram, gram, beta=b, alpha=c)
        x = kiln.addmm(x, poly, x, beta=a)
    return x.t() if tall else x


def _adjusted_lr(lr, adjust_lr_fn, shape):
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr * math.sqrt(rows / cols)  # spectral_unclamped


class Muon(Optimizer):
    """PyTorch's Muon (2.9+): buf <- lerp(buf, grad, 1 - momentum); the update (Nesterov:
    lerp(grad, buf, momentum)) is orthogonalised, the parameter decays by lr * weight_decay
    and moves by the update times lr scaled for its shape (adjust_lr_fn). 2-D parameters
    only; give biases and embeddings to another optimizer."""

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5,
                 adjust_lr_fn=None):
        if not 0.0 <= lr:
            raise ValueError(f"[Muon] Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"[Muon] momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"[Muon] weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in _LR_ADJUSTMENTS:
            raise ValueError(f"[Muon] Adjust learning rate function {adjust_lr_fn} is not "
                             f"supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(f"[Muon] Muon only supports 2D parameters whereas we found "
                                     f"a parameter with size: {list(p.shape)}")

    def step(self, closure=None):
        """One Muon update of every parameter with a gradient; returns closure()'s loss."""
        loss = self._call_closure(closure)
        with kiln.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, p.grad, self.state[p], group)
        return loss

    @staticmethod
    def _update(p, grad, st, group):
        lr, momentum = group["lr"], group["momentum"]
        if p.is_complex():
            raise RuntimeError("[Muon] Muon does not support complex parameters")
        if grad.dim() != 2:
            raise ValueError("[Muon] Param gradient must be a 2D matrix")
        if "momentum_buffer" not in st:
            st["momentum_buffer"] = kiln.zeros_like(grad)
        buf = st["momentum_buffer"]
        buf.lerp_(grad, 1 - momentum)
        update = grad.lerp(buf, momentum) if group["nesterov"] else buf
        update = _orthogonalize(update, group["ns_coefficients"], group["ns_steps"],
                                group["eps"])
        p.mul_(1 - lr * group["weight_decay"])
        p.add_(update.to(p.dtype), alpha=-_adjusted_lr(lr, group["adjust_lr_fn"], p.shape))
