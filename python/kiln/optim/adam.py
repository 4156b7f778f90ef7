"""Adam (and the base of AdamW, which decouples the weight decay)."""

import kiln
from kiln import _C
from kiln.optim.optimizer import Optimizer, _check_adam_args, _check_flags, _new_step

__all__ = ["Adam"]


class Adam(Optimizer):
    """PyTorch's Adam (single-tensor algorithm; bias corrections from per-parameter steps).

    With ``capturable=True`` the step counts live on the parameters' device and the bias
    corrections are computed there, so ``step()`` can be captured in a CUDA graph.
    """

    _group_key_defaults = {
        "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
        "differentiable": False, "fused": None, "decoupled_weight_decay": False}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        name = type(self).__name__
        _check_adam_args(name, lr, eps, betas, weight_decay)
        _check_flags(name, foreach, fused, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns closure()'s loss."""
        return self._fused_step(closure, _C._fused_adam_, self._step_args)

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        for group in self.param_groups:  # loaded counters come to the host; capturable keeps
            if group["capturable"]:      # them on the parameter's device
                for p in group["params"]:
                    st = self.state.get(p)
                    if st and "step" in st:
                        st["step"] = st["step"].to(device=p.device)

    @staticmethod
    def _step_args(group):
        amsgrad = group["amsgrad"]
        beta1, beta2 = group["betas"]
        keys = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq" if amsgrad else None, "step")
        return keys, (group["lr"], beta1, beta2, group["weight_decay"], group["eps"], amsgrad,
                      group["maximize"], group["decoupled_weight_decay"])

    @staticmethod
    def _init_state(p, st, group):
        if not st:
            # capturable: the count lives on the parameter's device, so a CUDA graph of the
            # step reads and advances it on every replay (Note [CUDA graphs]).
            st["step"] = (kiln.zeros((), dtype=kiln.float32, device=p.device)
                          if group["capturable"] else _new_step())
            st["exp_avg"] = kiln.zeros_like(p)
            st["exp_avg_sq"] = kiln.zeros_like(p)
        if group["amsgrad"] and "max_exp_avg_sq" not in st:
            st["max_exp_avg_sq"] = kiln.zeros_like(p)

