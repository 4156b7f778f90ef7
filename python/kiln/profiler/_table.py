"""The text table of EventList.table(), laid out as PyTorch's profiler prints it."""

import math

_SORT_KEYS = ("cpu_time", "cuda_time", "device_time", "cpu_time_total", "cuda_time_total",
              "device_time_total", "self_cpu_time_total", "self_cuda_time_total",
              "self_device_time_total", "cpu_memory_usage", "cuda_memory_usage",
              "device_memory_usage", "self_cpu_memory_usage", "self_cuda_memory_usage",
              "self_device_memory_usage", "count")


def format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def format_percent(part, total):
    return f"{100.0 * part / total:.2f}%" if total else "0.00%"


def format_memory(nbytes):
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} b"


def _shorten(text, width):
    return text if len(text) <= width else text[: width - 3] + "..."


def _flops_unit(flops):
    """(scale, header) for a column whose smallest value is ``flops``, as PyTorch scales it."""
    units = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"]
    log = max(0, min(int(math.log10(flops) // 3), len(units) - 1))
    return 10.0 ** (-3 * log), units[log]


def _trim_path(path, width):
    if len(path) > width:
        path = "..." + path[len(path) - width + 3:]
    return path


def build_table(events, sort_by, row_limit, max_name_column_width, max_shapes_column_width,
                header, top_level_events_only, with_device, with_flops=False,
                max_src_column_width=75):
    if sort_by is not None:
        if sort_by not in _SORT_KEYS:
            raise AttributeError(
                f"[profiler] table(): unknown sort_by '{sort_by}'; expected one of "
                f"{', '.join(_SORT_KEYS)}")
        events = sorted(events, key=lambda e: getattr(e, sort_by), reverse=True)
    if top_level_events_only:
        events = [e for e in events if getattr(e, "cpu_parent", None) is None]
    rows_all = list(events)
    if row_limit is not None and row_limit > 0:
        events = rows_all[:row_limit]
    with_shapes = any(getattr(e, "input_shapes", None) for e in events)
    with_memory = any(e.cpu_memory_usage or e.device_memory_usage for e in rows_all)

    sum_self_cpu = sum(e.self_cpu_time_total for e in rows_all)
    sum_self_device = sum(e.self_device_time_total for e in rows_all
                          if e.device_type.name != "CPU")

    name_width = max([len(e.key) for e in events] + [4]) + 4
    name_width = min(name_width, max_name_column_width)
    columns = [("Name", name_width, lambda e: _shorten(e.key, name_width - 2))]
    columns += [
        ("Self CPU %", 12, lambda e: format_percent(e.self_cpu_time_total, sum_self_cpu)),
        ("Self CPU", 12, lambda e: format_time(e.self_cpu_time_total)),
        ("CPU total %", 12, lambda e: format_percent(e.cpu_time_total, sum_self_cpu)),
        ("CPU total", 12, lambda e: format_time(e.cpu_time_total)),
        ("CPU time avg", 12, lambda e: format_time(e.cpu_time_total / max(e.count, 1))),
    ]
    if with_device:
        columns += [
            ("Self CUDA", 12, lambda e: format_time(e.self_device_time_total)),
            ("Self CUDA %", 12,
             lambda e: format_percent(e.self_device_time_total, sum_self_device)),
            ("CUDA total", 12, lambda e: format_time(e.device_time_total)),
            ("CUDA time avg", 13, lambda e: format_time(e.device_time_total / max(e.count, 1))),
        ]
    if with_memory:
        columns += [
            ("CPU Mem", 12, lambda e: format_memory(e.cpu_memory_usage)),
            ("Self CPU Mem", 14, lambda e: format_memory(e.self_cpu_memory_usage)),
        ]
        if with_device:
            columns += [
                ("CUDA Mem", 12, lambda e: format_memory(e.device_memory_usage)),
                ("Self CUDA Mem", 14, lambda e: format_memory(e.self_device_memory_usage)),
            ]
    columns.append(("# of Calls", 12, lambda e: str(e.count)))
    if with_shapes:
        shapes_width = min(max_shapes_column_width,
                           max(len(str(e.input_shapes)) for e in events) + 4)
        columns.append(("Input Shapes", shapes_width,
                        lambda e: _shorten(str(e.input_shapes), shapes_width - 2)))
    raw_flops = [e.flops for e in events if getattr(e, "flops", 0) > 0] if with_flops else []
    if raw_flops:
        scale, unit = _flops_unit(min(raw_flops))
        columns.append((f"Total {unit}", 12,
                        lambda e: f"{e.flops * scale:8.3f}" if e.flops > 0 else "--"))
    stacks = [e.stack for e in events if getattr(e, "stack", None)]
    src_width = 0
    if stacks:
        src_width = min(max_src_column_width or 10 ** 9,
                        max(len(entry) for stack in stacks for entry in stack) + 4)
        src_width = max(src_width, len("Source Location"))

    # Two spaces at least between columns, as PyTorch's table has.
    columns = [(name, max(width, len(name) + 2), f) for name, width, f in columns]

    def line(cells, source=None):
        first = cells[0].ljust(columns[0][1])
        rest = "".join(c.rjust(w) for c, (_, w, _f) in zip(cells[1:], columns[1:]))
        if source is None:
            return first + rest
        # The stack's column reads left to right, one frame per line (PyTorch's layout).
        return first + rest + "  " + _trim_path(source, src_width).ljust(src_width)

    rule = "-" * (sum(w for _, w, _f in columns) + (src_width + 2 if stacks else 0))
    out = []
    if header is not None:
        out += ["=" * len(rule), header]
    source_header = "Source Location" if stacks else None
    out += [rule, line([name for name, _, _f in columns], source_header), rule]
    blank = [""] * len(columns)
    for e in events:
        frames = list(getattr(e, "stack", None) or [])
        out.append(line([f(e) for _, _, f in columns], frames[0] if frames else
                        ("" if stacks else None)))
        if stacks:
            out += [line(blank, entry) for entry in frames[1:]]
            out.append(line(blank, ""))
    out.append(rule)
    out.append(f"Self CPU time total: {format_time(sum_self_cpu)}")
    if with_device:
        out.append(f"Self CUDA time total: {format_time(sum_self_device)}")
    return "\n".join(out) + "\n"
