"""Weight averaging: kiln.optim.swa_utils with PyTorch's names. AveragedModel keeps a running
average (SWA, Izmailov et al. 2018) or an exponential moving average of a model's weights,
SWALR anneals each group's lr to a constant swa_lr, and update_bn recomputes batch-norm
statistics for the averaged weights."""

import copy
import itertools
import math

import kiln
from kiln.nn.modules.batchnorm import _BatchNorm
from kiln.nn.modules.module import Module
from kiln.optim.lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"[swa_utils] Invalid decay value {decay} provided. Please provide a "
                         f"value in [0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """In-place EMA over lists: ema <- decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    def ema_update(ema_params, current_params, _num_averaged):
        with kiln.no_grad():
            for ema, current in zip(ema_params, current_params):
                if ema.is_floating_point() or ema.is_complex():
                    ema.lerp_(current, 1 - decay)
                else:
                    ema.copy_(ema * decay + current * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """In-place running mean over lists: avg <- avg + (current - avg) / (n + 1)."""

    def swa_update(averaged_params, current_params, num_averaged):
        n = int(num_averaged)
        with kiln.no_grad():
            for averaged, current in zip(averaged_params, current_params):
                if averaged.is_floating_point() or averaged.is_complex():
                    averaged.lerp_(current, 1 / (n + 1))
                else:
                    averaged.copy_(averaged + (current - averaged) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """avg_fn form of the EMA: returns decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with kiln.no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """avg_fn form of the running mean: returns avg + (current - avg) / (n + 1)."""

    def swa_update(averaged_param, current_param, num_averaged):
        with kiln.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A deep copy of `model` whose weights update_parameters(model) averages.

    avg_fn(averaged, current, n) returns a new value per tensor; multi_avg_fn(averaged_list,
    current_list, n) updates lists in place; neither gives the running mean (SWA). With
    use_buffers the buffers are averaged too, otherwise they are copied from the model."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("[AveragedModel] Only one of avg_fn and multi_avg_fn should be "
                                 "provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", kiln.tensor(0, dtype=kiln.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, model):
        if self.use_buffers:
            return list(itertools.chain(model.parameters(), model.buffers()))
        return list(model.parameters())

    def update_parameters(self, model):
        """Folds model's current weights into the average (copies them the first time)."""
        averaged = [t.detach() for t in self._tensors(self.module)]
        current = [t.detach().to(a.device) for a, t in zip(averaged, self._tensors(model))]
        n = int(self.n_averaged.item())
        with kiln.no_grad():
            if n == 0:
                for a, c in zip(averaged, current):
                    a.copy_(c)
            elif self.avg_fn is not None:
                for a, c in zip(averaged, current):
                    a.copy_(self.avg_fn(a, c, self.n_averaged.to(a.device)))
            else:
                (self.multi_avg_fn or get_swa_multi_avg_fn())(averaged, current,
                                                               self.n_averaged)
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged.add_(1)


def update_bn(loader, model, device=None):
    """Recomputes the running statistics of model's batch norms as plain averages over one
    pass of `loader` (the first element of tuple/list batches is the input)."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with kiln.no_grad():
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            if device is not None:
                input = input.to(device)
            model(input)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr from its value to swa_lr over anneal_epochs ("cos" or
    "linear"), then holds swa_lr."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        for value, group in zip(_format_param("SWALR", "swa_lr", optimizer, swa_lr),
                                optimizer.param_groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"[SWALR] anneal_strategy must be one of 'cos' or 'linear', instead "
                             f"got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"[SWALR] anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self._anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t):
        if self._anneal_strategy == "cos":
            return (1 - math.cos(math.pi * t)) / 2
        return t

    def get_lr(self):
        # PyTorch's recursive form: recover the lr the annealing started from out of the
        # current one, then step the interpolation once.
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        groups = self.optimizer.param_groups
        if prev_alpha == 1:
            prev_lrs = [g["swa_lr"] for g in groups]
        else:
            prev_lrs = [(g["lr"] - prev_alpha * g["swa_lr"]) / (1 - prev_alpha) for g in groups]
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]
