"""torch.autograd.profiler's spelling of the profiler: `profile(use_cuda=...)` as a context
manager whose results are read on the object itself, and `record_function`. Both are
kiln.profiler underneath."""

from kiln.profiler import record_function  # noqa: F401
from kiln.profiler._profile import ProfilerActivity
from kiln.profiler._profile import profile as _profile


class profile:
    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False):
        activities = []
        if use_cpu:
            activities.append(ProfilerActivity.CPU)
        if use_cuda or use_device == "cuda":
            activities.append(ProfilerActivity.CUDA)
        self.enabled = enabled
        self._prof = _profile(activities=activities, record_shapes=record_shapes,
                              profile_memory=profile_memory, with_stack=with_stack)
        self.function_events = None

    def __enter__(self):
        if self.enabled:
            self._prof.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self.enabled:
            self._prof.stop()
            self.function_events = self._prof.events()
        return False

    def _events(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")
        return self.function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        return self._events().key_averages(group_by_input_shape, group_by_stack_n)

    def table(self, sort_by=None, row_limit=100, **kwargs):
        return self._events().table(sort_by=sort_by, row_limit=row_limit, **kwargs)

    def export_chrome_trace(self, path):
        self._events().export_chrome_trace(path)

    def total_average(self):
        return self._events().total_average()

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self._events())

    def __str__(self):
        return self.table()
