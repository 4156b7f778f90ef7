"""no_grad / enable_grad / set_grad_enabled: context managers and decorators
over the C++ thread-local grad mode."""

import functools
import threading

from kiln import _C

# Whether an inference_mode(True) block is active on this thread (is_inference_mode_enabled).
_inference = threading.local()


def is_inference_mode_enabled():
    return getattr(_inference, "enabled", False)


class _GradModeContext:
    """Sets grad mode on enter, restores it on exit; also works as a decorator."""

    _enabled = True

    def __enter__(self):
        self._prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class _NoParamContext(_GradModeContext):
    """Also usable as a bare decorator, `@no_grad` without parentheses, as in PyTorch."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamContext):
    _enabled = False


class enable_grad(_NoParamContext):
    _enabled = True


class inference_mode(_GradModeContext):
    """Same as no_grad in kiln (no separate inference tensors)."""

    def __init__(self, mode=True):
        self._enabled = not mode

    def __enter__(self):
        self._prev_inference = is_inference_mode_enabled()
        _inference.enabled = not self._enabled
        return super().__enter__()

    def __exit__(self, *exc):
        _inference.enabled = self._prev_inference
        return super().__exit__(*exc)

    def __call__(self, fn):
        mode = not self._enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper


class set_grad_enabled(_GradModeContext):
    """Sets grad mode immediately (as a function) or for a `with` block."""

    def __init__(self, mode):
        self._prev = _C.is_grad_enabled()
        self._enabled = bool(mode)
        _C._set_grad_enabled(self._enabled)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        mode = self._enabled
        _C._set_grad_enabled(self._prev)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper
