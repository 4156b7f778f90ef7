"""Custom kernels (issue 15): a RawKernel launch's host time against the bare-launch floor, and
ElementwiseKernel / RawKernel bandwidth against the built-in add, beside CuPy-style numbers
from PyTorch's add where installed.

Run on the GPU machine after building kiln:
    PYTHONPATH=python python3 benchmarks/custom_kernels.py
Targets (docs/benchmarks.md): RawKernel host time <= 1.3x the floor; ElementwiseKernel
bandwidth on 2^28 floats >= 0.95x the built-in add's.

Without a GPU, --host-only times what kiln adds on the host around the CUDA calls: a RawKernel
call with its argument packing and checks (a dry-run launcher, Note [Fast kernel launch]) and
an ElementwiseKernel call's planning (launches recorded, not run), on CPU tensors.
"""

import argparse

import numpy as np

import kiln
from ops import device_ms, host_us, launch_floor_us
from timing import per_call_us

# The bare-launch floor measured on the H200 (docs/benchmarks.md, T11), for --host-only's
# prediction.
H200_FLOOR_US = 3.31

ADD = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""


def main():
    if not kiln.cuda.is_available():
        print("custom_kernels: no CUDA device")
        return
    raw = kiln.cuda.RawKernel(ADD, "add")
    ew = kiln.cuda.ElementwiseKernel("T x, T y", "T z", "z = x + y", "ew_add")

    n = 1024
    a, b = kiln.randn(n, device="cuda"), kiln.randn(n, device="cuda")
    out = kiln.empty(n, device="cuda")
    args = (a, b, out, np.int32(n))
    sync = kiln.cuda.synchronize
    floor = launch_floor_us()
    rows = [("RawKernel launch, 1024 floats", host_us(lambda: raw((4,), (256,), args), sync)),
            ("ElementwiseKernel call, 1024 floats", host_us(lambda: ew(a, b), sync)),
            ("built-in a + b, 1024 floats", host_us(lambda: a + b, sync))]
    print(f"{'host time per call':40s} {'us':>8s} {'x floor':>8s}")
    for label, us in rows:
        ratio = f"{us / floor:8.2f}" if floor else "       -"
        print(f"{label:40s} {us:8.2f} {ratio}")
    if floor:
        print(f"{'bare CUDA launch (floor)':40s} {floor:8.2f}")

    n = 1 << 28
    a, b = kiln.randn(n, device="cuda"), kiln.randn(n, device="cuda")
    out = kiln.empty(n, device="cuda")
    big = (a, b, out, np.int32(n))
    gb = 3 * 4 * n / 1e9
    timings = {
        "built-in add": device_ms(kiln, lambda: a + b),
        "ElementwiseKernel add": device_ms(kiln, lambda: ew(a, b, out)),
        "RawKernel add": device_ms(kiln, lambda: raw(((n + 255) // 256,), (256,), big)),
    }
    print(f"\n{'add, 2^28 floats':40s} {'GB/s':>8s} {'x built-in':>10s}")
    for label, ms in timings.items():
        print(f"{label:40s} {gb / (ms / 1e3):8.0f} {timings['built-in add'] / ms:10.2f}")


def cpu_us(fn, iters, repeats=7):
    """CPU microseconds per call of this thread (median of repeats): on a shared machine
    without a GPU, time spent descheduled must not count."""
    import statistics
    import time

    for _ in range(iters // 10):
        fn()
    samples = []
    for _ in range(repeats):
        t0 = time.thread_time()
        for _ in range(iters):
            fn()
        samples.append((time.thread_time() - t0) / iters * 1e6)
    return statistics.median(samples)


def host_only():
    from kiln.cuda import _elementwise_kernel, _kernel_params

    n = 1024
    a, b, out = kiln.randn(n), kiln.randn(n), kiln.empty(n)
    args = (a, b, out, np.int32(n))
    raw = kiln.cuda.RawKernel(ADD, "add")
    raw._dry_run([8, 8, 8, 4], check_devices=False)
    pack = cpu_us(lambda: raw((4,), (256,), args), 20000)

    class DryKernel(kiln.cuda.RawKernel):
        """Generated kernels, packed and checked but not compiled or launched."""

        def __init__(self, code, name, options=()):
            super().__init__(code, name, options)
            head = code[code.index(f"void {name}(") + len(name) + 6:]
            params = head[:head.index(")")].split(",")
            self._dry_run([8 if "*" in p or "long long" in p or "double" in p else 4
                           for p in params], False)

    _elementwise_kernel.RawKernel = DryKernel
    _kernel_params.check_device = lambda named, what: kiln.device("cpu")
    ew = kiln.cuda.ElementwiseKernel("T x, T y", "T z", "z = x + y", "ew_add")
    planned = cpu_us(lambda: ew(a, b), 5000)
    planned_out = cpu_us(lambda: ew(a, b, out), 5000)
    general = cpu_us(lambda: ew._general_call((a, b), None, None, None), 2000)
    empty = cpu_us(lambda: kiln.empty(n), 20000)
    builtin = cpu_us(lambda: a + b, 20000)
    print(f"{'host CPU time per call, CPU tensors, no launch':52s} {'us':>8s}")
    print(f"{'RawKernel call: packing and checks':52s} {pack:8.2f}")
    print(f"{'ElementwiseKernel call, planned (flat path)':52s} {planned:8.2f}")
    print(f"{'ElementwiseKernel call, planned, output given':52s} {planned_out:8.2f}")
    print(f"{'ElementwiseKernel call, general path':52s} {general:8.2f}")
    print(f"{'kiln.empty(1024) on the CPU':52s} {empty:8.2f}")
    print(f"{'built-in a + b (CPU kernel included)':52s} {builtin:8.2f}")
    print(f"\npredicted RawKernel launch on the H200: floor {H200_FLOOR_US} + {pack:.2f} = "
          f"{H200_FLOOR_US + pack:.2f} us ({(H200_FLOOR_US + pack) / H200_FLOOR_US:.2f}x the "
          "floor; the device guard and current-stream lookups are not in the dry run)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-only", action="store_true",
                        help="time the host-side work without a GPU")
    if parser.parse_args().host_only:
        host_only()
    else:
        main()
