"""kiln.amp.GradScaler: dynamic loss scaling for float16 training.

The scale, the growth tracker and the found-inf flags are device tensors
updated by kiln._C._amp_* (ops/amp.cpp), so unscaling and the inf/NaN check
never wait for the GPU; step() reads the flag once to decide whether to step.
"""

import enum
import warnings

from kiln import _C
import kiln
from kiln.amp import autocast_mode


class OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scales the loss so float16 gradients do not underflow, unscales them
    before the optimizer step, skips steps whose gradients hold inf/NaN and
    adapts the scale: ``backoff_factor`` after an overflow, ``growth_factor``
    after ``growth_interval`` clean steps.

    Unlike PyTorch, ``step()`` returns whether the optimizer step was taken.
    With bfloat16 autocast no scaling is needed: the scaler says so once and
    passes everything through (scale 1).
    """

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        device = device.type if isinstance(device, kiln.device) else str(device).split(":")[0]
        if device not in ("cuda", "cpu"):
            raise RuntimeError(
                f"[GradScaler] unsupported device {device!r} (expected 'cuda' or 'cpu')")
        if enabled and device == "cuda" and not kiln.cuda.is_available():
            warnings.warn("[GradScaler] is enabled for cuda, but CUDA is not available; disabling",
                          stacklevel=2)
            enabled = False
        self._device = device
        self._enabled = enabled
        if growth_factor <= 1.0:
            raise ValueError(f"[GradScaler] growth_factor must be > 1.0, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"[GradScaler] backoff_factor must be in (0, 1), got {backoff_factor}")
        if int(growth_interval) != growth_interval or growth_interval <= 0:
            raise ValueError(
                f"[GradScaler] growth_interval must be a positive integer, got {growth_interval}")
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._scale = None
        self._growth_tracker = None
        self._per_optimizer_states = {}
        self._passthrough = False
        self._regions_seen = autocast_mode._regions[device][0]
        if enabled and _C._autocast_state(device)[:2] == (True, kiln.bfloat16):
            self._regions_seen -= 1  # created inside a bfloat16 region
        self._check_bfloat16()

    # --- bfloat16: nothing to scale ---------------------------------------------

    def _check_bfloat16(self):
        """Switches to pass-through (once, with a warning) when the latest autocast
        region entered on this device since the scaler was created uses bfloat16."""
        if not self._enabled or self._passthrough:
            return
        count, dtype = autocast_mode._regions[self._device]
        if count > self._regions_seen and dtype == kiln.bfloat16:
            warnings.warn(
                "[GradScaler] bfloat16 autocast keeps float32's exponent range, so gradients do "
                "not underflow and loss scaling is unnecessary; this GradScaler passes them "
                "through unscaled (scale 1)",
                stacklevel=3,
            )
            self._passthrough = True

    def _active(self):
        self._check_bfloat16()
        return self._enabled and not self._passthrough

    # --- state ---------------------------------------------------------------------

    def _lazy_init(self, device):
        self._scale = kiln.full((), self._init_scale, dtype=kiln.float32, device=device)
        self._growth_tracker = kiln.full((), self._init_growth_tracker, dtype=kiln.int32,
                                         device=device)

    def _check_inited(self, method):
        if self._scale is None:
            raise RuntimeError(
                f"[GradScaler.{method}] the scale is not initialized yet: call scale() on the "
                "outputs (the loss) first")

    def _opt_state(self, optimizer):
        return self._per_optimizer_states.setdefault(id(optimizer), _fresh_state())

    # --- the training-loop API -----------------------------------------------------

    def scale(self, outputs):
        """Multiplies a tensor (or nested lists/tuples of tensors) by the scale."""
        if not self._active():
            return outputs

        def apply(v):
            if isinstance(v, kiln.Tensor):
                if self._scale is None:
                    self._lazy_init(v.device)
                s = self._scale if v.device == self._scale.device else self._scale.to(v.device)
                return v * s
            if isinstance(v, (list, tuple)):
                mapped = [apply(x) for x in v]
                return type(v)(mapped) if isinstance(v, list) else tuple(mapped)
            raise ValueError(
                f"[GradScaler.scale] outputs must be a Tensor or nested lists/tuples of Tensors, "
                f"got {type(v).__name__}")

        return apply(outputs)

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale in place (one C++ call per
        device) and records whether any was inf/NaN."""
        if not self._active():
            return
        self._check_inited("unscale_")
        state = self._opt_state(optimizer)
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError(
                "[GradScaler.unscale_] unscale_() has already been called on this optimizer "
                "since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("[GradScaler.unscale_] unscale_() is being called after step().")
        inv_scale = self._scale.double().reciprocal().float()
        by_device = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.dtype == kiln.float16:
                    raise ValueError(
                        "[GradScaler.unscale_] Attempting to unscale FP16 gradients: keep the "
                        "parameters in float32 and let autocast cast them")
                by_device.setdefault(str(g.device), []).append(g)
        found = state["found_inf_per_device"]
        for dev, grads in by_device.items():
            device = grads[0].device
            flag = kiln.zeros((), dtype=kiln.float32, device=device)
            inv = inv_scale if inv_scale.device == device else inv_scale.to(device)
            _C._amp_foreach_non_finite_check_and_unscale_(grads, flag, inv)
            found[dev] = flag
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscales (unless unscale_ was called) and steps the optimizer unless a
        gradient was inf/NaN. Returns True when the step was taken."""
        if not self._active():
            optimizer.step(*args, **kwargs)
            return True
        if "closure" in kwargs:
            raise RuntimeError(
                "[GradScaler.step] Closure use is not currently supported if GradScaler is "
                "enabled.")
        self._check_inited("step")
        state = self._opt_state(optimizer)
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError(
                "[GradScaler.step] step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        flags = list(state["found_inf_per_device"].values())
        total = flags[0] if flags else None
        for f in flags[1:]:
            total = total + f.to(total.device)
        # The one host sync of the step.
        taken = total is None or total.item() == 0.0
        if taken:
            optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return taken

    def update(self, new_scale=None):
        """Adjusts the scale from this iteration's inf/NaN checks (or sets it to
        ``new_scale``) and resets the per-optimizer state."""
        if not self._active():
            return
        self._check_inited("update")
        if new_scale is not None:
            if isinstance(new_scale, kiln.Tensor):
                if new_scale.numel() != 1 or new_scale.dtype != kiln.float32:
                    raise ValueError(
                        "[GradScaler.update] new_scale must be a float or a one-element float32 "
                        f"tensor, got shape {list(new_scale.shape)} {new_scale.dtype}")
                self._scale.copy_(new_scale.reshape(()))
            else:
                self._scale.fill_(float(new_scale))
        else:
            flags = [f for s in self._per_optimizer_states.values()
                     for f in s["found_inf_per_device"].values()]
            if not flags:
                raise RuntimeError("[GradScaler.update] No inf checks were recorded prior to "
                                   "update(): call step() (or unscale_()) first.")
            found = flags[0].to(self._scale.device)
            for f in flags[1:]:
                found = found + f.to(self._scale.device)
            _C._amp_update_scale_(self._scale, self._growth_tracker, found, self._growth_factor,
                                  self._backoff_factor, self._growth_interval)
        self._per_optimizer_states = {}

    # --- accessors -----------------------------------------------------------------

    def get_scale(self):
        if not self._active():
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self):
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return int(self._growth_tracker.item())

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "[GradScaler.load_state_dict] The source state dict is empty, possibly because "
                "it was saved from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(self._init_growth_tracker)
