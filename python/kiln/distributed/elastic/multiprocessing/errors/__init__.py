"""``@record``: PyTorch's decorator for a torchrun entry point. When the decorated function
raises, the exception and its traceback are written as JSON to the file named by
TORCHELASTIC_ERROR_FILE (the launcher sets one per worker) before the exception propagates,
so the launcher's failure report can name the root cause even when stderr was not kept."""

import functools
import json
import os
import time
import traceback

ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"


def _write_error_file(exc):
    path = os.environ.get(ERROR_FILE_ENV)
    if not path:
        return
    payload = {"message": {
        "message": f"{type(exc).__name__}: {exc}",
        "extraInfo": {"py_callstack": traceback.format_exc(), "timestamp": str(int(time.time()))},
    }}
    try:
        with open(path, "w") as f:
            json.dump(payload, f)
    except OSError:
        pass  # the report must never hide the original error


def record(fn, error_handler=None):
    """Decorates an entry point so a failure is recorded for the launcher, then re-raised."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            _write_error_file(exc)
            raise

    return wrapper


def read_error_file(path):
    """The recorded (message, traceback) in `path`, or None when there is none."""
    try:
        with open(path) as f:
            message = json.load(f)["message"]
        return message["message"], message["extraInfo"]["py_callstack"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
