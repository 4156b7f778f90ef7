"""Custom kernels (issue 15): a RawKernel launch's host time against the bare-launch floor, and
ElementwiseKernel / RawKernel bandwidth against the built-in add, beside CuPy-style numbers
from PyTorch's add where installed.

Run on the GPU machine after building kiln:
    PYTHONPATH=python python3 benchmarks/custom_kernels.py
Targets (docs/benchmarks.md): RawKernel host time <= 1.3x the floor; ElementwiseKernel
bandwidth on 2^28 floats >= 0.95x the built-in add's.
"""

import numpy as np

import kiln
from ops import device_ms, host_us, launch_floor_us

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


if __name__ == "__main__":
    main()
