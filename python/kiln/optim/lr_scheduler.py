"""Learning-rate schedulers with PyTorch's behaviour: each step computes the new lr from the
current one (the recursive form PyTorch uses, so sequences match it), and schedulers that
PyTorch gives a closed form use it when stepped to an explicit epoch (SequentialLR)."""

import functools
import math
import types
from bisect import bisect_right
from collections import Counter

from kiln import _C

__all__ = [
    "LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
    "LinearLR", "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "ChainedScheduler",
    "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR",
    "PolynomialLR",
]


def _set_lr(group, lr):
    if isinstance(group["lr"], _C.Tensor):
        group["lr"].fill_(lr)
    else:
        group["lr"] = lr


def _format_param(cls_name, name, optimizer, param):
    """One value per param group: a list/tuple of that length, or a value for every group."""
    n = len(optimizer.param_groups)
    if isinstance(param, (list, tuple)):
        if len(param) != n:
            raise ValueError(f"[{cls_name}] {name} must have the same length as "
                             f"optimizer.param_groups. "
                             f"{name} has {len(param)} values, param_groups has {n}.")
        return list(param)
    return [param] * n


class LRScheduler:
    """Base class. Subclasses define get_lr() (the lrs at self.last_epoch, computed from the
    groups' current lrs) and optionally _get_closed_form_lr()."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                initial = group["lr"]
                if isinstance(initial, _C.Tensor):
                    initial = initial.clone()
                group.setdefault("initial_lr", initial)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"[{type(self).__name__}] param 'initial_lr' is not specified "
                                   f"in param_groups[{i}] when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        # get_lr can tell the constructor's step (which must not change the lrs)
        # from later ones, including SequentialLR's step(0) at a milestone.
        self._is_initial = True
        self._step_count = 0
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self):
        """Everything but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The lrs the last step() set, one per param group."""
        return self._last_lr

    def get_lr(self):
        raise NotImplementedError(f"[{type(self).__name__}.get_lr] is not implemented")

    def step(self, epoch=None):
        """Advances one epoch (or jumps to `epoch`) and writes the new lrs into the groups."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_lr(group, lr)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


# PyTorch's older name, still subclassed by many training scripts.
_LRScheduler = LRScheduler


class _LambdaStateMixin:
    """state_dict for schedulers holding lr lambdas: functions are not saved, callable objects
    save their __dict__ (as PyTorch does)."""

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)

    def _set_lambdas(self, optimizer, lr_lambda):
        n = len(optimizer.param_groups)
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * n
        else:
            if len(lr_lambda) != n:
                raise ValueError(f"[{type(self).__name__}] Expected {n} lr_lambdas, but got "
                                 f"{len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)


class LambdaLR(_LambdaStateMixin, LRScheduler):
    """lr = initial_lr * lr_lambda(epoch)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self._set_lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaStateMixin, LRScheduler):
    """lr *= lr_lambda(epoch) at every step after the first."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self._set_lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if not self._is_initial:
            return [g["lr"] * fn(self.last_epoch) for fn, g in zip(self.lr_lambdas, groups)]
        return [g["lr"] for g in groups]


class StepLR(LRScheduler):
    """lr = initial_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = initial_lr * gamma ** (number of milestones reached)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch not in self.milestones:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch] for g in groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = initial_lr * factor until total_iters, then initial_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError(f"[ConstantLR] Constant multiplicative factor expected to be "
                             f"between 0 and 1, got factor={factor}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in groups]
        if self.last_epoch != self.total_iters:
            return [g["lr"] for g in groups]
        return [g["lr"] * (1.0 / self.factor) for g in groups]

    def _get_closed_form_lr(self):
        done = self.last_epoch >= self.total_iters
        return [base * (self.factor + done * (1 - self.factor)) for base in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor goes linearly from start_factor to end_factor over total_iters steps."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(f"[LinearLR] Starting multiplicative factor expected to be greater "
                             f"than 0 and less or equal to 1, got start_factor={start_factor}")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(f"[LinearLR] Ending multiplicative factor expected to be between 0 "
                             f"and 1, got end_factor={end_factor}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in groups]
        if self.last_epoch > self.total_iters:
            return [g["lr"] for g in groups]
        delta = self.end_factor - self.start_factor
        scale = 1.0 + delta / (self.total_iters * self.start_factor
                               + (self.last_epoch - 1) * delta)
        return [g["lr"] * scale for g in groups]

    def _get_closed_form_lr(self):
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * frac)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = initial_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine from initial_lr down to eta_min over T_max steps (and back up after)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and e > 0:
            return [lo + (base - lo) * (1 + math.cos(e * math.pi / t)) / 2
                    for base in self.base_lrs]
        if (e - 1 - t) % (2 * t) == 0:
            return [g["lr"] + (base - lo) * (1 - math.cos(math.pi / t)) / 2
                    for base, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
                * (g["lr"] - lo) + lo for g in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - min(epoch, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        e, n = self.last_epoch, self.total_iters
        if e == 0 or e > n:
            return [g["lr"] for g in groups]
        factor = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [g["lr"] * factor for g in groups]

    def _get_closed_form_lr(self):
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (1.0 - frac) ** self.power for base in self.base_lrs]


class _SchedulerChain(LRScheduler):
    """A scheduler that drives others (self._schedulers): its state holds theirs."""

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        saved = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, saved):
            s.load_state_dict(sd)


class SequentialLR(_SchedulerChain):
    """Runs schedulers one after another, switching at the milestones."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError("[SequentialLR] expects at least one scheduler, but got no "
                             "scheduler.")
        _check_schedulers("SequentialLR", schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"[SequentialLR] Sequential Schedulers expects number of schedulers "
                             f"provided to be one more than the number of milestone points, but "
                             f"got number of schedulers {len(schedulers)} and the number of "
                             f"milestones to be equal to {len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            _set_lr(group, group["initial_lr"])
        # Undo the initial step each scheduler took when it was built; only the first one
        # starts now.
        self._recursive_undo()
        self._schedulers[0]._initial_step()
        self._last_lr = schedulers[0].get_last_lr()

    def _recursive_undo(self, schedulers=None):
        for s in self._schedulers if schedulers is None else schedulers:
            if isinstance(s, SequentialLR):
                s._recursive_undo(s._schedulers)
            s.last_epoch -= 1

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler.step(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


def _check_schedulers(cls_name, schedulers, optimizer):
    """SequentialLR's and ChainedScheduler's checks of the schedulers they drive."""
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"[{cls_name}] at index {i} should have `optimizer` as its "
                            f"attribute, got {type(s).__name__}")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"[{cls_name}] does not support `ReduceLROnPlateau` scheduler as "
                             f"it requires additional kwargs to be specified when calling "
                             f"`step`, but got one at index {i} in the given schedulers "
                             f"sequence.")
        if s.optimizer is not optimizer:
            raise ValueError(f"[{cls_name}] expects all schedulers to belong to the same "
                             f"optimizer, but got scheduler {type(s).__name__} at index {i} "
                             f"with a different optimizer")


class ChainedScheduler(_SchedulerChain):
    """Steps every scheduler at each step, so their factors multiply."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("[ChainedScheduler] expects at least one scheduler to be chained, "
                             "but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers("ChainedScheduler", schedulers, optimizer)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in schedulers[-1].optimizer.param_groups]

    def step(self):
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr rises from max_lr/div_factor to max_lr over pct_start of the
    steps, then anneals to initial_lr/final_div_factor; momentum (or Adam's beta1) cycles the
    other way."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"[OneCycleLR] Expected positive integer total_steps, but got "
                                 f"{total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"[OneCycleLR] Expected positive integer epochs, but got "
                                 f"{epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"[OneCycleLR] Expected positive integer steps_per_epoch, but "
                                 f"got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("[OneCycleLR] You must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        n = self.total_steps
        up = float(pct_start * n) - 1
        if three_phase:
            self._schedule_phases = [
                dict(end_step=up, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * n) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum",
                     end_momentum="max_momentum"),
                dict(end_step=n - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum"),
            ]
        else:
            self._schedule_phases = [
                dict(end_step=up, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=n - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
            ]
        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise ValueError(f"[OneCycleLR] Expected float between 0 and 1 pct_start, but got "
                             f"{pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"[OneCycleLR] anneal_strategy must be one of 'cos' or 'linear', "
                             f"instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("OneCycleLR", "max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("[OneCycleLR] optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            maxs = _format_param("OneCycleLR", "max_momentum", optimizer, max_momentum)
            bases = _format_param("OneCycleLR", "base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m_max, m_base, group in zip(maxs, bases, optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (m_max, *group["betas"][1:])
                    else:
                        group["momentum"] = m_max
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"[OneCycleLR] Tried to step {step} times. The specified number of "
                             f"total steps is {self.total_steps}")
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step <= end_step or i == last:
                    pct = (step - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]],
                                                group[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: cosine from initial_lr to eta_min over T_i epochs, then a restart with
    T_i *= T_mult. step(epoch) takes fractional epochs (e.g. epoch + batch / num_batches)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"[CosineAnnealingWarmRestarts] Expected positive integer T_0, but "
                             f"got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"[CosineAnnealingWarmRestarts] Expected integer T_mult >= 1, but "
                             f"got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"[CosineAnnealingWarmRestarts] Expected float or int eta_min, but "
                             f"got {eta_min} of type {type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch=None):
        """Advances one epoch, or jumps to `epoch` (an int or a float)."""
        self._step_count += 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        elif epoch < 0:
            raise ValueError(f"[CosineAnnealingWarmRestarts] Expected non-negative epoch, but "
                             f"got {epoch}")
        elif epoch < self.T_0:
            self.T_i = self.T_0
            self.T_cur = epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:
            # Restart n begins at epoch T_0 * (T_mult**n - 1) / (T_mult - 1).
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult**n
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            _set_lr(group, lr)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


def _triangular_scale(x):
    return 1.0


def _triangular2_scale(x):
    return 1 / (2.0 ** (x - 1))


def _exp_range_scale(gamma, x):
    return gamma**x


class CyclicLR(LRScheduler):
    """The lr cycles between base_lr and max_lr (step_size_up steps up, step_size_down down),
    the amplitude scaled per cycle or per iteration; momentum (or Adam's beta1) cycles the
    other way between max_momentum and base_momentum."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        self.optimizer = optimizer
        base_lrs = _format_param("CyclicLR", "base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_lr(group, lr)
        self.max_lrs = _format_param("CyclicLR", "max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = step_size_up if step_size_down is None else float(step_size_down)
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"[CyclicLR] mode is invalid and scale_fn is None (mode={mode!r})")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("[CyclicLR] optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _format_param("CyclicLR", "base_momentum", optimizer,
                                                base_momentum)
            self.max_momentums = _format_param("CyclicLR", "max_momentum", optimizer,
                                               max_momentum)
            if last_epoch == -1:
                for m_max, m_base, group in zip(self.max_momentums, self.base_momentums,
                                                optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (m_max, *group["betas"][1:])
                    else:
                        group["momentum"] = m_max
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        super().__init__(optimizer, last_epoch)
        # The groups' initial_lr may predate this scheduler: the cycle's floor is base_lr.
        self.base_lrs = base_lrs

    def _init_scale_fn(self):
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = _triangular_scale
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = _triangular2_scale
            self.scale_mode = "cycle"
        else:
            self._scale_fn_ref = functools.partial(_exp_range_scale, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    def get_lr(self):
        e = self.last_epoch
        cycle = math.floor(1 + e / self.total_size)
        x = 1.0 + e / self.total_size - cycle
        if x <= self.step_ratio:
            frac = x / self.step_ratio
        else:
            frac = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else e)
        lrs = [base + (top - base) * frac * scale
               for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, m_base, m_max in zip(self.optimizer.param_groups, self.base_momentums,
                                            self.max_momentums):
                momentum = m_max - (m_max - m_base) * frac * scale
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs

    def state_dict(self):
        """As LRScheduler's, without the built-in scale function; a custom scale_fn is saved
        as its __dict__ when it is a callable object (None for a plain function)."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = (None if fn is None or isinstance(fn, types.FunctionType)
                                     else fn.__dict__.copy())
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        saved_fn = state_dict.pop("_scale_fn_custom")
        super().load_state_dict(state_dict)
        if saved_fn is not None:
            self._scale_fn_custom.__dict__.update(saved_fn)
        self._init_scale_fn()


class ReduceLROnPlateau(LRScheduler):
    """Multiplies the lr by `factor` when a metric stops improving for `patience` epochs."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError(f"[ReduceLROnPlateau] Factor should be < 1.0, got {factor}")
        self.factor = factor
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"[ReduceLROnPlateau] expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * n
        self.patience = patience
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"[ReduceLROnPlateau] mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"[ReduceLROnPlateau] threshold mode {threshold_mode} is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def step(self, metrics, epoch=None):
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"[ReduceLROnPlateau] The number of param groups in the "
                                   f"optimizer ({len(groups)}) differs from when it was "
                                   f"initially created ({len(self.min_lrs)}), and no default "
                                   f"min_lr was given")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                _set_lr(group, new)

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
