"""Chrome trace JSON (chrome://tracing, Perfetto) of a profiler's events.

Host ranges are complete ("X") events on one lane per recording thread, so a range's
children sit inside it; device kernels, copies and memsets are on one lane per (device,
stream); a flow arrow ("s" -> "f", category "ac2g" as PyTorch names it) joins each device
event to the range that launched it.
"""

import json
import os

from ._events import _BACKWARD, _KERNEL, _MEMCPY, _MEMORY, _MEMSET, _OP, _USER, DeviceType

_CATEGORY = {_OP: "cpu_op", _BACKWARD: "cpu_op", _USER: "user_annotation", _KERNEL: "kernel",
             _MEMCPY: "gpu_memcpy", _MEMSET: "gpu_memset"}
# The GPU lanes' process ids sit above any host pid.
_GPU_PID_BASE = 1 << 22


def _us(ns_us):
    # Microseconds with nanosecond digits: exact, so a child's span stays inside its parent's.
    return round(ns_us, 3)


def trace_events(events):
    pid = os.getpid()
    out = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "kiln (host)"}}]
    threads, lanes = set(), set()
    for e in events:
        start, end = e.time_range.start, e.time_range.end
        if e.kind == _MEMORY:
            out.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                        "pid": pid, "tid": e.thread, "ts": _us(start),
                        "args": {"Bytes": e.nbytes, "Device Id": e.device_index_raw}})
            continue
        if e.device_type == DeviceType.CPU:
            threads.add(e.thread)
            args = {"External id": e.id}
            if e.input_shapes:
                args["Input Dims"] = e.input_shapes
            if e.stack:
                # with_stack: the Python frames, innermost last, as Kineto writes "Call stack".
                args["Call stack"] = ";".join(reversed(e.stack))
            if e.flops:
                args["flops"] = e.flops
            out.append({"ph": "X", "cat": _CATEGORY[e.kind], "name": e.name, "pid": pid,
                        "tid": e.thread, "ts": _us(start), "dur": _us(end - start),
                        "args": args})
            continue
        gpu_pid = _GPU_PID_BASE + e.device_index
        lanes.add((gpu_pid, e.device_index, e.stream))
        args = {"device": e.device_index, "stream": e.stream, "External id": e.correlation}
        if e.kind != _KERNEL:
            args["bytes"] = e.nbytes
        out.append({"ph": "X", "cat": _CATEGORY[e.kind], "name": e.name, "pid": gpu_pid,
                    "tid": e.stream, "ts": _us(start), "dur": _us(end - start), "args": args})
        launcher = getattr(e, "launcher", None)
        if launcher is not None:
            flow = {"cat": "ac2g", "name": "ac2g", "id": e.id}
            out.append(dict(flow, ph="s", pid=pid, tid=launcher.thread,
                            ts=_us(launcher.time_range.start)))
            out.append(dict(flow, ph="f", bp="e", pid=gpu_pid, tid=e.stream, ts=_us(start)))
    for t in sorted(threads):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": t,
                    "args": {"name": f"thread {t}"}})
    for gpu_pid, device, stream in sorted(lanes):
        out.append({"ph": "M", "name": "process_name", "pid": gpu_pid,
                    "args": {"name": f"GPU {device}"}})
        out.append({"ph": "M", "name": "thread_name", "pid": gpu_pid, "tid": stream,
                    "args": {"name": f"stream {stream}"}})
    return out


def write_chrome_trace(events, path):
    trace = {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": trace_events(events)}
    opener = open
    if str(path).endswith(".gz"):
        import gzip

        opener = gzip.open
    with opener(path, "wt") as f:
        json.dump(trace, f)
