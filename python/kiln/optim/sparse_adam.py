"""SparseAdam: PyTorch's lazy Adam for sparse gradients."""

from kiln.optim.optimizer import Optimizer, _check_value

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """PyTorch's SparseAdam: Adam that updates only the rows a sparse gradient touches.

    kiln has no sparse gradients yet (sparse COO tensors are issue 17, item 5), so a step
    over dense gradients raises PyTorch's error, which points at Adam; construction, argument
    checks and state dicts behave as in PyTorch."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        _check_value("SparseAdam", 0.0 < lr, "learning rate", lr)
        _check_value("SparseAdam", 0.0 < eps, "epsilon value", eps)
        _check_value("SparseAdam", 0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
        _check_value("SparseAdam", 0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        complex_params = [[i, j] for i, group in enumerate(self.param_groups)
                          for j, p in enumerate(group["params"]) if p.is_complex()]
        if complex_params:
            raise ValueError(f"[SparseAdam] Complex params at indices {complex_params}: "
                             f"SparseAdam does not support complex parameters")

    def step(self, closure=None):
        """Raises for the dense gradients kiln has (as PyTorch does for dense gradients)."""
        loss = self._call_closure(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    raise RuntimeError("[SparseAdam] SparseAdam does not support dense "
                                       "gradients, please consider Adam instead")
        return loss
