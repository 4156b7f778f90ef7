"""Where a training step's time goes: benchmarks/suite.py's training workloads
split into forward, backward and optimizer, kiln and PyTorch side by side on
the GPU. Each phase is timed alone (device synced before and after), median of
many steps; the phases add up to a little more than suite.py's step time.

    PYTHONPATH=python:benchmarks python3 benchmarks/step_phases.py [--only NAME ...]
"""

import argparse
import statistics
import time

import kiln
import suite

try:
    import torch
except ImportError:
    torch = None

WORKLOADS = {
    "wide MLP fp32": lambda mod: suite.wide_mlp(mod, "fp32"),
    "wide MLP bf16": lambda mod: suite.wide_mlp(mod, "bf16"),
    "wide MLP fp16 + GradScaler": lambda mod: suite.wide_mlp(mod, "fp16"),
    "CNN fp32": lambda mod: suite.cnn(mod, bf16=False),
    "CNN bf16": lambda mod: suite.cnn(mod, bf16=True),
}


def phase_ms(mod, phases, steps=7, warmup=3):
    """Median milliseconds of forward, backward and update over `steps` steps."""
    sync = mod.cuda.synchronize
    for _ in range(warmup):
        phases.step()
    times = {"forward": [], "backward": [], "update": []}

    def timed(name, fn, *args):
        sync()
        t0 = time.perf_counter()
        out = fn(*args)
        sync()
        times[name].append((time.perf_counter() - t0) * 1e3)
        return out

    for _ in range(steps):
        loss = timed("forward", phases.forward)
        timed("backward", phases.backward, loss)
        timed("update", phases.update)
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", help="substrings of the workload names to run")
    args = parser.parse_args()
    if not kiln.cuda.is_available():
        raise SystemExit("benchmarks/step_phases.py needs a CUDA device (the GPU machine)")
    print(f"{'workload':30s} {'phase':9s} {'kiln ms':>9s} {'torch ms':>9s} {'ratio':>6s}")
    for name, build in WORKLOADS.items():
        if args.only and not any(s in name for s in args.only):
            continue
        k = phase_ms(kiln, build(kiln))
        t = phase_ms(torch, build(torch)) if torch is not None else {}
        for phase, value in k.items():
            ref = t.get(phase)
            ratio = f"{value / ref:6.2f}" if ref else "     -"
            ref_text = f"{ref:9.2f}" if ref else "        -"
            print(f"{name:30s} {phase:9s} {value:9.2f} {ref_text} {ratio}")


if __name__ == "__main__":
    main()
