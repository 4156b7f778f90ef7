"""Profiler events as PyTorch's FunctionEvent / FunctionEventAvg / EventList.

The C++ recorder (Note [Profiler events] in core/profiler.cpp) hands back flat tuples; this
module links them into a tree (cpu_parent / cpu_children), attaches each device kernel to
the innermost range that launched it, and derives the self/total times the table shows.
Times are in microseconds, as in PyTorch.
"""

import enum

# EventKind's values in core/profiler.h.
_OP, _USER, _BACKWARD, _KERNEL, _MEMCPY, _MEMSET, _MEMORY = range(7)
_DEVICE_KINDS = (_KERNEL, _MEMCPY, _MEMSET)


class DeviceType(enum.Enum):
    CPU = 0
    CUDA = 1


class Interval:
    def __init__(self, start, end):
        self.start = start
        self.end = end

    def elapsed_us(self):
        return self.end - self.start


class FunctionEvent:
    """One range (op, autograd node, user range) or one device activity (kernel, copy)."""

    def __init__(self, raw):
        (name, kind, id_, _parent, start_ns, end_ns, thread, device, stream, correlation,
         nbytes, shapes) = raw
        self.id = id_
        self.name = name
        self.kind = kind
        self.thread = thread
        self.time_range = Interval(start_ns / 1000.0, end_ns / 1000.0)
        self.input_shapes = [list(s) for s in shapes]
        self.device_type = DeviceType.CUDA if kind in _DEVICE_KINDS else DeviceType.CPU
        self.device_index = max(device, 0)
        self.device_index_raw = device  # memory events: -1 for the CPU
        self.stream = stream
        self.correlation = correlation
        self.nbytes = nbytes
        self.cpu_parent = None
        self.cpu_children = []
        self.kernels = []  # device events this range launched itself
        self.launcher = None  # device events: the innermost range that launched this one
        self.memory_events = []  # profile_memory: allocations/frees inside this range
        self.is_async = False
        self.count = 1

    @property
    def key(self):
        return self.name

    @property
    def cpu_time_total(self):
        return 0.0 if self.device_type != DeviceType.CPU else self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        if self.device_type != DeviceType.CPU:
            return 0.0
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def self_device_time_total(self):
        if self.device_type != DeviceType.CPU:
            return self.time_range.elapsed_us()
        return sum(k.time_range.elapsed_us() for k in self.kernels)

    @property
    def device_time_total(self):
        if self.device_type != DeviceType.CPU:
            return self.time_range.elapsed_us()
        return self.self_device_time_total + sum(c.device_time_total for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self):
        return sum(m.nbytes for m in self.memory_events if m.device_index_raw < 0)

    @property
    def cpu_memory_usage(self):
        return self.self_cpu_memory_usage + sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_device_memory_usage(self):
        return sum(m.nbytes for m in self.memory_events if m.device_index_raw >= 0)

    @property
    def device_memory_usage(self):
        return self.self_device_memory_usage + sum(c.device_memory_usage for c in self.cpu_children)

    # PyTorch's older names for the device columns.
    cuda_time_total = device_time_total
    self_cuda_time_total = self_device_time_total
    cuda_memory_usage = device_memory_usage
    self_cuda_memory_usage = self_device_memory_usage

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count

    @property
    def device_time(self):
        return self.device_time_total / self.count

    cuda_time = device_time

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} device_type={self.device_type} "
                f"cpu_time_total={self.cpu_time_total:.3f}us "
                f"device_time_total={self.device_time_total:.3f}us "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """Events of one key (name, and input shapes with group_by_input_shape) summed."""

    def __init__(self, key, input_shapes, device_type):
        self.key = key
        self.input_shapes = input_shapes
        self.device_type = device_type
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.device_memory_usage = 0
        self.self_device_memory_usage = 0

    def add(self, e):
        self.count += e.count
        for field in ("cpu_time_total", "self_cpu_time_total", "device_time_total",
                      "self_device_time_total", "cpu_memory_usage", "self_cpu_memory_usage",
                      "device_memory_usage", "self_device_memory_usage"):
            setattr(self, field, getattr(self, field) + getattr(e, field))
        return self

    @property
    def name(self):
        return self.key

    @property
    def cpu_time(self):
        return self.cpu_time_total / max(self.count, 1)

    @property
    def device_time(self):
        return self.device_time_total / max(self.count, 1)

    cuda_time = device_time
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us "
                f"cpu_time_total={self.cpu_time_total:.3f}us "
                f"device_time_total={self.device_time_total:.3f}us "
                f"input_shapes={self.input_shapes}>")


class EventList(list):
    """A list of events with PyTorch's EventList methods."""

    def __init__(self, *args, has_device=False, **kwargs):
        super().__init__(*args, **kwargs)
        self._has_device = has_device

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        groups = {}
        for e in self:
            if e.kind == _MEMORY:
                continue
            key = (e.key, str(e.input_shapes) if group_by_input_shape else None)
            if key not in groups:
                shapes = e.input_shapes if group_by_input_shape else []
                groups[key] = FunctionEventAvg(e.key, shapes, e.device_type)
            groups[key].add(e)
        return EventList(groups.values(), has_device=self._has_device)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        from ._table import build_table

        return build_table(self, sort_by=sort_by, row_limit=row_limit,
                           max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width, header=header,
                           top_level_events_only=top_level_events_only,
                           with_device=self._has_device)

    def export_chrome_trace(self, path):
        from ._trace import write_chrome_trace

        write_chrome_trace(self, path)

    def total_average(self):
        total = FunctionEventAvg("Total", [], DeviceType.CPU)
        for e in self:
            if getattr(e, "kind", None) != _MEMORY:
                total.add(e)
        return total

    def __str__(self):
        return self.table()


def build_events(raw, has_device):
    """Links the recorder's tuples: parents, children, kernels, memory events."""
    events = []
    by_id = {}
    for r in raw:
        e = FunctionEvent(r)
        by_id[e.id] = e
        events.append(e)
    for r, e in zip(raw, events):
        parent = by_id.get(r[3])
        if e.kind == _MEMORY:
            if parent is not None:
                parent.memory_events.append(e)
            continue
        if e.device_type == DeviceType.CPU:
            if parent is not None:
                e.cpu_parent = parent
                parent.cpu_children.append(e)
        else:
            launcher = by_id.get(e.correlation)
            e.launcher = launcher
            if launcher is not None:
                launcher.kernels.append(e)
    return EventList(events, has_device=has_device)
