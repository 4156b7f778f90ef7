"""profile, schedule, record_function and tensorboard_trace_handler, with torch.profiler's
semantics (the state machine of profile.step() follows PyTorch's action table)."""

import contextlib
import enum
import functools
import os
import warnings

from .. import _C
from ._events import EventList, build_events

_P = _C._profiler


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    """The activities this build and machine can record."""
    from .. import cuda

    acts = {ProfilerActivity.CPU}
    if cuda.is_available():
        acts.add(ProfilerActivity.CUDA)
    return acts


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """Step -> ProfilerAction: skip `skip_first` steps, then cycles of `wait` idle steps,
    `warmup` steps and `active` recorded steps, `repeat` times (0: until the end)."""
    for name, value in (("wait", wait), ("warmup", warmup), ("active", active),
                        ("repeat", repeat), ("skip_first", skip_first)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"[profiler.schedule] {name} must be an int, got "
                            f"{type(value).__name__}")
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), "
            f"warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} "
            f"(need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)

    def schedule_fn(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _default_schedule(_step):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An on_trace_ready handler writing `<worker>.<time_ns>.pt.trace.json[.gz]` into
    dir_name, the layout TensorBoard's profiler plugin reads."""
    import socket
    import time

    def handler_fn(prof):
        nonlocal worker_name
        try:
            os.makedirs(dir_name, exist_ok=True)
        except OSError as e:
            raise RuntimeError("Can't create directory: " + str(dir_name)) from e
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        file_name = f"{worker_name}.{time.time_ns()}.pt.trace.json"
        if use_gzip:
            file_name += ".gz"
        prof.export_chrome_trace(os.path.join(dir_name, file_name))

    return handler_fn


class record_function(contextlib.ContextDecorator):
    """A named range: a context manager or a decorator. Ops run inside nest under it."""

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise TypeError(f"[record_function] name must be a str, got {type(name).__name__}")
        if args is not None and not isinstance(args, str):
            raise TypeError(f"[record_function] args must be a str or None, got "
                            f"{type(args).__name__}")
        self.name = name
        self.args = args
        self._handles = []

    def __enter__(self):
        self._handles.append(_P._begin_range(self.name))
        return self

    def __exit__(self, *exc):
        _P._end_range(self._handles.pop())
        return False


_warned_no_device = False


class profile:
    """torch.profiler.profile: records the ops, autograd nodes and record_function ranges
    run on any thread while active and, with ProfilerActivity.CUDA, the device's kernels."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, experimental_config=None,
                 acc_events=False):
        if activities is None:
            activities = supported_activities()
        activities = set(activities)
        for a in activities:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"[profiler] activities must be ProfilerActivity values, got "
                                f"{a!r}")
        if schedule is not None and not callable(schedule):
            raise TypeError("[profiler] schedule must be callable (see kiln.profiler.schedule)")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError("[profiler] on_trace_ready must be callable")
        self.activities = activities
        # A FLOP estimate needs the input shapes (PyTorch turns them on the same way).
        self.record_shapes = bool(record_shapes) or bool(with_flops)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        self.with_flops = bool(with_flops)
        self.with_modules = bool(with_modules)
        self.on_trace_ready = on_trace_ready
        self.acc_events = acc_events
        self.record_steps = schedule is not None
        self.schedule = schedule if schedule is not None else _default_schedule
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self.step_rec_fn = None
        self.profiler = None  # the last finished trace's events, as in PyTorch
        self._recording = False
        # PyTorch's table: the actions run when the schedule moves from one state to the next.
        t = _Actions(self._start_trace, self._stop_trace, self._trace_ready)
        A = ProfilerAction
        self.action_map = {
            (A.NONE, A.NONE): [], (A.NONE, A.WARMUP): [], (A.NONE, A.RECORD): [t.start],
            (A.NONE, A.RECORD_AND_SAVE): [t.start],
            (A.WARMUP, A.NONE): [functools.partial(warnings.warn,
                                                   "Incorrect schedule: WARMUP followed by NONE"),
                                 t.start, t.stop],
            (A.WARMUP, A.WARMUP): [], (A.WARMUP, A.RECORD): [t.start],
            (A.WARMUP, A.RECORD_AND_SAVE): [t.start],
            (A.RECORD, A.NONE): [functools.partial(warnings.warn,
                                                   "Incorrect schedule: RECORD followed by NONE"),
                                 t.stop],
            (A.RECORD, A.WARMUP): [functools.partial(
                warnings.warn, "Incorrect schedule: RECORD followed by WARMUP"), t.stop],
            (A.RECORD, A.RECORD): [], (A.RECORD, A.RECORD_AND_SAVE): [],
            (A.RECORD_AND_SAVE, A.NONE): [t.stop, t.ready],
            (A.RECORD_AND_SAVE, A.WARMUP): [t.stop, t.ready],
            (A.RECORD_AND_SAVE, A.RECORD): [t.stop, t.ready, t.start],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): [t.stop, t.ready, t.start],
            (A.WARMUP, None): [t.start, t.stop],
            (A.RECORD, None): [t.stop, t.ready],
            (A.RECORD_AND_SAVE, None): [t.stop, t.ready],
            (A.NONE, None): [],
        }

    def _flags(self):
        flags = 0
        if self.record_shapes:
            flags |= _P.FLAG_SHAPES
        if ProfilerActivity.CUDA in self.activities:
            flags |= _P.FLAG_CUDA
        if self.profile_memory:
            flags |= _P.FLAG_MEMORY
        if self.with_stack:
            flags |= _P.FLAG_STACK
        if self.with_flops:
            flags |= _P.FLAG_FLOPS
        return flags

    def _start_trace(self):
        global _warned_no_device
        _P._start(self._flags())
        self._recording = True
        why = _P._device_unavailable()
        if why and not _warned_no_device:
            _warned_no_device = True
            warnings.warn(f"kiln.profiler: CUDA activity is not recorded ({why}); the trace "
                          f"has host events only", stacklevel=3)

    def _stop_trace(self):
        if not self._recording:
            return
        self._recording = False
        raw = _P._stop()
        stacks = _P._stacks() if self.with_stack else ()
        has_device = ProfilerActivity.CUDA in self.activities
        self.profiler = _Trace(build_events(raw, has_device, stacks, self.with_flops))

    def _trace_ready(self):
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _transit_action(self, prev_action, current_action):
        for fn in self.action_map.get((prev_action, current_action), []):
            fn()

    def start(self):
        self._transit_action(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self.step_rec_fn = record_function("ProfilerStep#" + str(self.step_num))
            self.step_rec_fn.__enter__()

    def stop(self):
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        self._transit_action(self.current_action, None)

    def step(self):
        """Marks the start of the next step: advances the schedule."""
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        prev_action = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit_action(prev_action, self.current_action)
        if self.record_steps:
            self.step_rec_fn = record_function("ProfilerStep#" + str(self.step_num))
            self.step_rec_fn.__enter__()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.stop()
        return False

    def _require_trace(self, what):
        if self.profiler is None:
            raise AssertionError(f"Profiler must be initialized before accessing {what}: "
                                 f"no trace has finished yet")
        return self.profiler

    def events(self):
        """The recorded events (FunctionEvent), kernels included."""
        return self._require_trace("events").function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """Events grouped by name (and input shapes): an EventList of FunctionEventAvg."""
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path):
        """Writes the trace as Chrome trace JSON (gzip when path ends in .gz)."""
        self.events().export_chrome_trace(path)
        return path

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Writes the recorded stacks (with_stack=True) with ``metric`` per line, the
        flamegraph format (EventList.export_stacks)."""
        if not self.with_stack:
            raise AssertionError("[profiler] export_stacks needs profile(with_stack=True)")
        self.events().export_stacks(path, metric)
        return path


class _Trace:
    """What `profile.profiler` holds after a trace: PyTorch code reads function_events."""

    def __init__(self, function_events):
        self.function_events = function_events


class _Actions:
    def __init__(self, start, stop, ready):
        self.start, self.stop, self.ready = start, stop, ready


__all__ = ["ProfilerActivity", "ProfilerAction", "profile", "record_function", "schedule",
           "supported_activities", "tensorboard_trace_handler", "EventList"]
