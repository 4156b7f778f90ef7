"""What kiln.profiler costs on the host: `a + b` on 1-element tensors with the profiler
off, on (CPU activity), and on with record_shapes; PyTorch beside it where installed.

The "off" figure is the number issue 15 holds to <= 2% above a build without the profiler:
run this script against both builds (PYTHONPATH=<other build>/python) and compare.

    PYTHONPATH=python:benchmarks python3 benchmarks/profiler_overhead.py [--device cuda]
"""

import argparse

import kiln
from timing import per_call_us

try:
    import torch
except ImportError:
    torch = None


def add_times(mod, device, iters):
    a = mod.ones(1, device=device)
    b = mod.ones(1, device=device)
    sync = mod.cuda.synchronize if device == "cuda" else None
    off = per_call_us(lambda: a + b, iters, sync=sync)
    acts = [mod.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        acts.append(mod.profiler.ProfilerActivity.CUDA)
    # Profiled loops are shorter: every call leaves an event behind.
    with mod.profiler.profile(activities=acts):
        on = per_call_us(lambda: a + b, iters // 10, sync=sync)
    with mod.profiler.profile(activities=acts, record_shapes=True):
        shapes = per_call_us(lambda: a + b, iters // 10, sync=sync)
    return off, on, shapes


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--iters", type=int, default=200_000)
    args = parser.parse_args()
    libs = [("kiln", kiln)] + ([("torch", torch)] if torch is not None else [])
    print(f"a + b host time per call, us ({args.device})")
    print(f"{'':8}{'off':>10}{'on':>10}{'on+shapes':>12}")
    for name, mod in libs:
        off, on, shapes = add_times(mod, args.device, args.iters)
        print(f"{name:8}{off:10.3f}{on:10.3f}{shapes:12.3f}")


if __name__ == "__main__":
    main()
