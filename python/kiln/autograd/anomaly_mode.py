"""Anomaly detection: errors in backward name the node that raised them, and a
backward node producing NaN raises (kiln.autograd.detect_anomaly)."""

import functools
import warnings

from kiln import _C


def is_anomaly_enabled():
    return _C._is_anomaly_enabled()


def is_anomaly_check_nan_enabled():
    return _C._anomaly_check_nan_enabled()


class set_detect_anomaly:
    """Sets anomaly detection on or off; usable as a function or a context manager."""

    def __init__(self, mode, check_nan=True):
        self.prev = (_C._is_anomaly_enabled(), _C._anomaly_check_nan_enabled())
        _C._set_anomaly_enabled(bool(mode), bool(check_nan))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(*self.prev)
        return False


class detect_anomaly:
    """Context manager (and decorator) turning anomaly detection on for a block.

    kiln checks every backward node's outputs for NaN while it is on, which
    synchronizes with the device once per node: use it for debugging only.
    """

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = (False, True)

    def __enter__(self):
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)
        self.prev = (_C._is_anomaly_enabled(), _C._anomaly_check_nan_enabled())
        _C._set_anomaly_enabled(True, bool(self.check_nan))
        return self

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(*self.prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper
