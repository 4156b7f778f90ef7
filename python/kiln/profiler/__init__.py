"""kiln.profiler: where a step's time goes, with torch.profiler's API.

    with kiln.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                               record_shapes=True) as prof:
        with kiln.profiler.record_function("step"):
            loss = model(x).sum(); loss.backward(); opt.step()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")   # chrome://tracing or ui.perfetto.dev

Ops are recorded in C++ at their front ends, autograd nodes by the engine, CUDA kernels
through CUPTI (Note [Profiler events] in core/profiler.cpp). Loaded on first use of
kiln.profiler, not by `import kiln`.
"""

from ._events import DeviceType, EventList, FunctionEvent, FunctionEventAvg
from ._profile import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)

__all__ = ["DeviceType", "EventList", "FunctionEvent", "FunctionEventAvg", "ProfilerAction",
           "ProfilerActivity", "profile", "record_function", "schedule",
           "supported_activities", "tensorboard_trace_handler"]
