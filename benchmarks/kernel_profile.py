"""The GPU kernels behind one of suite.py's training steps, kiln and PyTorch side
by side: PyTorch's profiler (CUPTI) records every kernel launched in the
process, whichever library launched it, so the same table explains both.

    PYTHONPATH=python:benchmarks python3 benchmarks/kernel_profile.py "wide MLP bf16"
"""

import argparse
from collections import defaultdict

import kiln
import step_phases
import torch


def kernel_table(mod, build, steps=3):
    """{kernel name: (total device ms per step, launches per step)} over `steps` steps."""
    phases = build(mod)
    for _ in range(3):
        phases.step()
    mod.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            phases.step()
        mod.cuda.synchronize()
    totals = defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = totals[event.name]
            entry[0] += event.time_range.elapsed_us() / 1e3 / steps
            entry[1] += 1 / steps
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workload", choices=list(step_phases.WORKLOADS))
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    build = step_phases.WORKLOADS[args.workload]
    for mod in (kiln, torch):
        table = kernel_table(mod, build)
        total = sum(ms for ms, _ in table.values())
        launches = sum(n for _, n in table.values())
        print(f"\n{mod.__name__}: {total:.2f} ms of kernels per step, {launches:.0f} launches")
        for name, (ms, n) in sorted(table.items(), key=lambda kv: -kv[1][0])[:args.top]:
            print(f"  {ms:8.3f} ms  {n:5.0f}x  {name[:110]}")


if __name__ == "__main__":
    main()
