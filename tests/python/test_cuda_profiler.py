"""kiln.profiler with CUDA activity (CUPTI): every op of a training step on the GPU has its
kernels, each kernel is tied to the op that launched it and lies after its launch, device
times are positive, and the chrome trace draws kernels on stream lanes with flow arrows.
Skips without a GPU."""

import json

import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from helpers import requires_gpu
from kiln.profiler import DeviceType, ProfilerActivity, profile, record_function

pytestmark = requires_gpu
BOTH = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def gpu_step_profile(**kwargs):
    kiln.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).cuda()
    opt = kiln.optim.Adam(model.parameters(), lr=1e-3)
    x = kiln.randn(32, 64, device="cuda")
    y = kiln.randint(0, 10, (32,), device="cuda")
    for _ in range(2):  # warm-up: cuBLAS handles, workspaces
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    kiln.cuda.synchronize()
    with profile(activities=BOTH, **kwargs) as prof:
        with record_function("forward"):
            loss = F.cross_entropy(model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad()
    return prof


def test_cupti_is_available_on_the_gpu_machine():
    from kiln import _C

    with profile(activities=BOTH):
        pass
    assert _C._profiler._device_unavailable() == ""


def test_kernels_are_recorded_with_positive_times_and_a_launching_op():
    events = gpu_step_profile().events()
    kernels = [e for e in events if e.device_type == DeviceType.CUDA and e.kind == 3]
    assert len(kernels) >= 10
    for k in kernels:
        assert k.time_range.elapsed_us() > 0
        assert k.launcher is not None, f"kernel {k.name} has no launching op"
        assert k in k.launcher.kernels
        # A kernel runs after its launch began.
        assert k.time_range.start >= k.launcher.time_range.start


def test_forward_backward_and_optimizer_each_own_kernels():
    events = gpu_step_profile().events()
    by_name = {e.name: e for e in events if e.name in ("forward", "backward", "optimizer")}
    for name, e in by_name.items():
        assert e.device_time_total > 0, name
    adam = [e for e in events if e.name == "kiln::_fused_adam_"]
    assert adam and adam[0].self_device_time_total > 0
    linear = [e for e in events if e.name == "kiln::linear"]
    assert len(linear) == 2 and all(e.device_time_total > 0 for e in linear)
    nodes = [e for e in events if e.name.startswith("autograd::engine")]
    assert sum(e.device_time_total > 0 for e in nodes) >= 3


def test_table_sorted_by_cuda_time_shows_kernels():
    prof = gpu_step_profile()
    avgs = prof.key_averages()
    table = avgs.table(sort_by="cuda_time_total", row_limit=15)
    assert "Self CUDA" in table and "CUDA total" in table
    assert "Self CUDA time total:" in table
    totals = [a.cuda_time_total for a in sorted(avgs, key=lambda a: a.cuda_time_total,
                                                 reverse=True)]
    assert totals[0] > 0
    kernel_rows = [a for a in avgs if a.device_type == DeviceType.CUDA]
    assert kernel_rows and all(a.self_cuda_time_total > 0 for a in kernel_rows)


def test_chrome_trace_has_kernel_lanes_and_flows(tmp_path):
    prof = gpu_step_profile()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in trace if e.get("cat") == "kernel"]
    assert kernels
    starts = {e["id"] for e in trace if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {e["id"] for e in trace if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    assert starts and starts == ends
    host_pid = next(e["pid"] for e in trace if e.get("cat") == "cpu_op")
    assert all(k["pid"] != host_pid and k["dur"] > 0 for k in kernels)


def test_copies_are_recorded():
    with profile(activities=BOTH) as prof:
        t = kiln.ones(1024).cuda()
        t.cpu()
    memcpy = [e for e in prof.events() if e.name.startswith("Memcpy")]
    assert {"Memcpy HtoD", "Memcpy DtoH"} <= {e.name for e in memcpy}
