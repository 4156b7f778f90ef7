"""GPU ops side by side with PyTorch on the same machine (issue 3's table).

Run on the GPU machine after `scripts/gpu_machine.sh` has built kiln:
    PYTHONPATH=python python3 benchmarks/ops.py
Host overheads are medians over repeats of many back-to-back calls
(perf_counter, synchronizing only at the end); device throughput uses CUDA
events after warm-up, median of many iterations, on random data.
"""

import argparse
import os
import statistics
import subprocess

import kiln
from timing import per_call_us

try:
    import torch
except ImportError:
    torch = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def host_us(fn, sync, iters=5000):
    return per_call_us(fn, iters, sync=sync, warmup=200)


def device_ms(mod, fn, iters=20):
    fn()
    mod.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = mod.cuda.Event(enable_timing=True), mod.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def launch_floor_us():
    exe = os.path.join(ROOT, "build", "kiln_launch_floor")
    if not os.path.exists(exe):
        return None
    out = subprocess.run([exe], capture_output=True, text=True)
    return float(out.stdout.strip()) if out.returncode == 0 else None


def kiln_layers():
    """kiln's host cost per layer, from C++ without Python (benchmarks/cuda_overhead.cpp)."""
    exe = os.path.join(ROOT, "build", "kiln_cuda_overhead")
    if not os.path.exists(exe):
        return []
    out = subprocess.run([exe], capture_output=True, text=True)
    if out.returncode != 0:
        return []
    rows = []
    for name, v in (line.rsplit(" ", 1) for line in out.stdout.strip().splitlines()):
        unit = "host us/op"
        if name.startswith("mallocs "):
            name, unit = name[len("mallocs "):], "mallocs/op"
        rows.append(f"{'kiln C++ ' + name + ': ' + unit:42s}{float(v):12.2f}")
    return rows


def run(mod, host_only=False):
    r = {}
    a, b = mod.randn(1024, device="cuda"), mod.randn(1024, device="cuda")
    r["a + b, 1024 floats: host us/op"] = host_us(lambda: a + b, mod.cuda.synchronize)
    x = mod.randn(64, 64, device="cuda", requires_grad=True)

    def step():
        x.grad = None
        (x * 2).sum().backward()

    r["(x*2).sum().backward(), 64x64: us/iter"] = host_us(step, mod.cuda.synchronize, iters=500)
    if host_only:
        return r
    n = 1 << 28
    big_a, big_b = mod.randn(n, device="cuda"), mod.randn(n, device="cuda")
    ms = device_ms(mod, lambda: big_a + big_b)
    r["add 2^28 floats: GB/s"] = 3 * 4 * n / (ms * 1e-3) / 1e9
    del big_a, big_b
    s = mod.randn(8192, 32768, device="cuda")
    softmax = mod.softmax
    ms = device_ms(mod, lambda: softmax(s, -1))
    r["softmax 8192x32768 fp32: GB/s"] = 2 * 4 * s.numel() / (ms * 1e-3) / 1e9
    del s
    # Scans read and write each element once: [1, 2^24] is one long row (the whole GPU must
    # work on it), [4096, 4096] many rows (Note [Scan functors]).
    for shape, label in (((1, 1 << 24), "[1, 2^24]"), ((4096, 4096), "[4096, 4096]")):
        c = mod.randn(*shape, device="cuda")
        ms = device_ms(mod, lambda: c.cumsum(1))
        r[f"cumsum {label} fp32: GB/s"] = 2 * 4 * c.numel() / (ms * 1e-3) / 1e9
    ms = device_ms(mod, lambda: c.cummax(1))
    r["cummax [4096, 4096] fp32: GB/s"] = (4 + 4 + 8) * c.numel() / (ms * 1e-3) / 1e9
    del c
    m = 8192
    ga, gb = mod.randn(m, m, device="cuda"), mod.randn(m, m, device="cuda")
    ms = device_ms(mod, lambda: ga @ gb, iters=10)
    r["GEMM 8192^3 fp32: TFLOP/s"] = 2 * m**3 / (ms * 1e-3) / 1e12
    del ga, gb
    host = mod.randn(64 << 20)  # 256 MB
    pinned = host.pin_memory()
    r["H2D 256 MB pageable: GB/s"] = 256 * 2**20 / (device_ms(mod, lambda: host.to("cuda")) * 1e-3) / 1e9
    r["H2D 256 MB pinned: GB/s"] = 256 * 2**20 / (device_ms(mod, lambda: pinned.to("cuda", non_blocking=True)) * 1e-3) / 1e9
    return r


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host-only", action="store_true",
                        help="only the host-overhead rows and the launch floor (seconds, not "
                             "minutes: repeat it in fresh processes to see the machine's spread)")
    args = parser.parse_args()
    kiln_results = run(kiln, args.host_only)
    torch_results = run(torch, args.host_only) if torch is not None else {}
    floor = launch_floor_us()
    print(f"{'benchmark':42s}{'kiln':>12s}{'torch':>12s}{'kiln/torch':>12s}")
    for key, value in kiln_results.items():
        ref = torch_results.get(key)
        ratio = f"{value / ref:12.2f}" if ref else f"{'n/a':>12s}"
        print(f"{key:42s}{value:12.2f}{(ref if ref else float('nan')):12.2f}{ratio}")
    print(f"{'bare CUDA launch floor: host us/op':42s}{floor if floor else float('nan'):12.2f}")
    if args.host_only:
        return
    for line in kiln_layers():
        print(line)


if __name__ == "__main__":
    main()
