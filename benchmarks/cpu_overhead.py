"""Host overhead and CPU matmul throughput: kiln side by side with NumPy and,
where installed, PyTorch (run on the GPU machine, which has torch).

Prints, per framework:
  - host time per op of `a + b` on 1-element tensors (framework overhead),
  - time per iteration of `(x * 2).sum().backward()` on a 64x64 tensor,
  - GFLOP/s of a 1024x1024 float32 matmul on the CPU.
Each figure is the median of several repeats after a warm-up.
"""

import numpy as np

import kiln
from timing import per_call_us

try:
    import torch
except ImportError:
    torch = None


def add_overhead(lib):
    if lib == "numpy":
        a, b = np.ones(1, np.float32), np.ones(1, np.float32)
        return per_call_us(lambda: a + b, 100_000)
    mod = kiln if lib == "kiln" else torch
    a, b = mod.ones(1), mod.ones(1)
    return per_call_us(lambda: a + b, 100_000)


def backward_step(lib):
    if lib == "numpy":
        return None
    mod = kiln if lib == "kiln" else torch
    x = mod.ones(64, 64, requires_grad=True)

    def step():
        x.grad = None
        (x * 2).sum().backward()

    return per_call_us(step, 5_000)


def matmul_gflops(lib):
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((1024, 1024), dtype=np.float32)
    b_np = rng.standard_normal((1024, 1024), dtype=np.float32)
    if lib == "numpy":
        fn = lambda: a_np @ b_np  # noqa: E731
    else:
        mod = kiln if lib == "kiln" else torch
        a, b = mod.from_numpy(a_np), mod.from_numpy(b_np)
        fn = lambda: mod.matmul(a, b)  # noqa: E731
    us = per_call_us(fn, 20, repeats=5)
    return 2 * 1024**3 / (us * 1e-6) / 1e9


def main():
    libs = ["kiln", "numpy"] + (["torch"] if torch is not None else [])
    rows = [
        ("a + b, 1 element (us/op)", add_overhead, "{:.2f}"),
        ("(x*2).sum().backward(), 64x64 (us/iter)", backward_step, "{:.1f}"),
        ("matmul 1024^2 fp32 (GFLOP/s)", matmul_gflops, "{:.1f}"),
    ]
    header = f"{'benchmark':44s}" + "".join(f"{lib:>12s}" for lib in libs)
    print(header)
    print("-" * len(header))
    for name, fn, fmt in rows:
        cells = []
        for lib in libs:
            v = fn(lib)
            cells.append(f"{'n/a' if v is None else fmt.format(v):>12s}")
        print(f"{name:44s}" + "".join(cells))
    if torch is None:
        print("(PyTorch not installed here: run on the GPU machine for the side-by-side column)")


if __name__ == "__main__":
    main()
