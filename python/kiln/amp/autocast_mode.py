"""kiln.autocast: regions where ops run in the dtype the autocast policy picks.

The policy and the casts live in C++ (ops/autocast_policy.cpp, Note
[Autocast]); this class only switches the thread's state on and off.
"""

import functools
import warnings

from kiln import _C
import kiln

_DEFAULT_DTYPE = {"cuda": "float16", "cpu": "bfloat16"}
# Per device type: how many enabled regions were entered, and the latest one's
# dtype. The GradScaler reads it to tell bfloat16 training (no scaling needed)
# from float16, counting only regions entered since the scaler was created.
_regions = {"cuda": [0, None], "cpu": [0, None]}


def _check_device_type(device_type, where):
    if not isinstance(device_type, str) or device_type not in _DEFAULT_DTYPE:
        raise RuntimeError(
            f"[{where}] User specified an unsupported autocast device_type {device_type!r} "
            "(expected 'cuda' or 'cpu')"
        )


class autocast:
    """Context manager and decorator: inside, ops in the autocast table run in
    lower precision (matmul, linear, sdpa, ...), float32 (softmax, losses,
    reductions, exp/log, ...) or the widest input dtype (cat, stack, ...).

    ``dtype`` defaults to float16 on CUDA and bfloat16 on the CPU. Regions nest;
    ``enabled=False`` switches autocast off inside an enclosing region. With
    ``cache_enabled``, each parameter is cast once per region.
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        _check_device_type(device_type, "autocast")
        self.device = device_type
        self.fast_dtype = getattr(kiln, _DEFAULT_DTYPE[device_type]) if dtype is None else dtype
        self._enabled = bool(enabled)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        if self._enabled and self.fast_dtype not in (kiln.float16, kiln.bfloat16):
            # PyTorch's behaviour: an unsupported dtype disables the region with a warning.
            warnings.warn(
                f"[autocast] {device_type} autocast supports float16 and bfloat16, got "
                f"{self.fast_dtype}; autocast is disabled in this region",
                stacklevel=2,
            )
            self._enabled = False
        self._saved = []

    def __enter__(self):
        enabled, dtype, _, cache = _C._autocast_state(self.device)
        self._saved.append((enabled, dtype, cache))
        _C._autocast_set(self.device, self._enabled, self.fast_dtype, self._cache_enabled)
        _C._autocast_increment_nesting(self.device)
        if self._enabled:
            _regions[self.device] = [_regions[self.device][0] + 1, self.fast_dtype]
        return self

    def __exit__(self, exc_type, exc, tb):
        enabled, dtype, cache = self._saved.pop()
        depth = _C._autocast_decrement_nesting(self.device)
        if depth == 0 and all(_C._autocast_state(d)[2] == 0 for d in _DEFAULT_DTYPE):
            _C._clear_autocast_cache()
        _C._autocast_set(self.device, enabled, dtype, cache)
        return False

    def __call__(self, func):
        # A fresh region per call, so recursive and concurrent calls each restore their own state.
        args = (self.device, self.fast_dtype, self._enabled, self._cache_enabled)

        @functools.wraps(func)
        def wrapper(*a, **kw):
            with autocast(*args):
                return func(*a, **kw)

        return wrapper


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for ``device_type`` (default ``"cuda"``, as in PyTorch)."""
    device_type = "cuda" if device_type is None else device_type
    _check_device_type(device_type, "is_autocast_enabled")
    return _C._autocast_state(device_type)[0]


def get_autocast_dtype(device_type):
    """The lower-precision dtype autocast uses on ``device_type``."""
    _check_device_type(device_type, "get_autocast_dtype")
    return _C._autocast_state(device_type)[1]


def is_autocast_cache_enabled(device_type=None):
    device_type = "cuda" if device_type is None else device_type
    _check_device_type(device_type, "is_autocast_cache_enabled")
    return _C._autocast_state(device_type)[3]


def clear_autocast_cache():
    _C._clear_autocast_cache()


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom forward: with ``cast_inputs``, it runs with autocast
    off and its floating tensor arguments on ``device_type`` cast to that dtype
    when called inside an autocast region; without, it runs in the caller's state."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    _check_device_type(device_type, "custom_fwd")

    @functools.wraps(fwd)
    def wrapper(*args, **kwargs):
        if cast_inputs is None or not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)

        def cast(v):
            floating = isinstance(v, kiln.Tensor) and v.is_floating_point()
            return v.to(cast_inputs) if floating and v.device.type == device_type else v

        with autocast(device_type, enabled=False):
            return fwd(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})

    return wrapper


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom backward: runs with autocast off (backward runs in
    the dtypes the forward used)."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    _check_device_type(device_type, "custom_bwd")

    @functools.wraps(bwd)
    def wrapper(*args, **kwargs):
        with autocast(device_type, enabled=False):
            return bwd(*args, **kwargs)

    return wrapper
