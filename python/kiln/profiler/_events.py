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

    def __init__(self, raw, stacks=()):
        (name, kind, id_, _parent, start_ns, end_ns, thread, device, stream, correlation,
         nbytes, shapes, output_shape, stack) = raw
        self.id = id_
        self.name = name
        self.kind = kind
        self.thread = thread
        self.time_range = Interval(start_ns / 1000.0, end_ns / 1000.0)
        self.input_shapes = [list(s) for s in shapes]
        self.output_shape = list(output_shape)
        # with_stack: "file(line): function" per frame, innermost first (PyTorch's order).
        self.stack = list(stacks[stack]) if 0 <= stack < len(stacks) else []
        self.flops = 0  # with_flops: set by build_events
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
        self.flops = 0
        self.stack = []

    def add(self, e):
        if self.count == 0:
            self.stack = list(e.stack)
        self.count += e.count
        self.flops += e.flops
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

    def __init__(self, *args, has_device=False, with_flops=False, **kwargs):
        super().__init__(*args, **kwargs)
        self._has_device = has_device
        self._with_flops = with_flops

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """Events grouped by name, and by input shapes and the innermost ``group_by_stack_n``
        frames of their stack when asked; each group's stack is cut to those frames."""
        groups = {}
        for e in self:
            if e.kind == _MEMORY:
                continue
            key = (e.key, str(e.input_shapes) if group_by_input_shape else None)
            if group_by_stack_n > 0:
                key += tuple(e.stack[:group_by_stack_n])
            if key not in groups:
                shapes = e.input_shapes if group_by_input_shape else []
                groups[key] = FunctionEventAvg(e.key, shapes, e.device_type)
            groups[key].add(e)
        for g in groups.values():
            g.stack = g.stack[:group_by_stack_n]
        return EventList(groups.values(), has_device=self._has_device,
                         with_flops=self._with_flops)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        from ._table import build_table

        return build_table(self, sort_by=sort_by, row_limit=row_limit,
                           max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width, header=header,
                           top_level_events_only=top_level_events_only,
                           with_device=self._has_device, with_flops=self._with_flops,
                           max_src_column_width=max_src_column_width)

    def export_chrome_trace(self, path):
        from ._trace import write_chrome_trace

        write_chrome_trace(self, path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Writes one line per event with a stack, ``outer;...;inner <metric>``: the input
        of flamegraph.pl and speedscope, as PyTorch's export_stacks."""
        metrics = ("self_cpu_time_total", "self_cuda_time_total", "self_device_time_total")
        if metric not in metrics:
            raise ValueError(f"[profiler] export_stacks: metric should be one of {metrics}, "
                             f"got {metric!r}")
        with open(path, "w") as f:
            for e in self:
                value = getattr(e, metric, 0)
                if e.stack and int(value) > 0:
                    frames = ";".join(entry.replace(" ", "_").replace(";", "_")
                                      for entry in reversed(e.stack))
                    f.write(f"{frames} {int(value)}\n")

    def total_average(self):
        total = FunctionEventAvg("Total", [], DeviceType.CPU)
        for e in self:
            if getattr(e, "kind", None) != _MEMORY:
                total.add(e)
        return total

    def __str__(self):
        return self.table()


def build_events(raw, has_device, stacks=(), with_flops=False):
    """Links the recorder's tuples: parents, children, kernels, memory events; with_flops,
    estimates each op's FLOPs (_flops.py)."""
    events = []
    by_id = {}
    for r in raw:
        e = FunctionEvent(r, stacks)
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
    if with_flops:
        _set_flops(events)
    return EventList(events, has_device=has_device, with_flops=with_flops)


def _set_flops(events):
    """Each op's estimate, kept on the outermost op that has one: a composite (linear over
    matmul over mm, a CPU convolution over its GEMMs) counts its work once, with the formula
    of the op the caller asked for (as PyTorch's aten::conv2d row carries a convolution's)."""
    from ._flops import estimate

    covered = set()  # ops inside an op that carries an estimate
    # Host events come sorted by start time, so a parent comes before its children.
    for e in events:
        if e.kind != _OP:
            continue
        p = e.cpu_parent
        while p is not None and p.kind != _OP:  # through user ranges and autograd nodes
            p = p.cpu_parent
        if p is not None and (p.flops or p.id in covered):
            covered.add(e.id)
        else:
            e.flops = estimate(e.name, e.input_shapes, e.output_shape)
