"""CPU elementwise loops on one thread and on all of them (Note [Parallel elementwise loops]):
median milliseconds of 15 calls on 2^24 float32 elements, and NumPy's time for the same op.

    PYTHONPATH=python python3 benchmarks/cpu_elementwise.py
"""

import statistics
import time

import numpy as np

import kiln

N = 1 << 24


def median_ms(fn, reps=15):
    fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def main():
    rng = np.random.default_rng(0)
    a_np, b_np = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    m_np = rng.standard_normal((4096, 4096)).astype(np.float32)
    a, b, m = kiln.from_numpy(a_np), kiln.from_numpy(b_np), kiln.from_numpy(m_np)
    cases = [
        ("add", lambda: a + b, lambda: a_np + b_np),
        ("mul", lambda: a * b, lambda: a_np * b_np),
        ("exp", lambda: kiln.exp(a), lambda: np.exp(a_np)),
        ("copy", lambda: a.clone(), lambda: a_np.copy()),
        ("4096x4096 transposed copy", lambda: m.t().contiguous(),
         lambda: np.ascontiguousarray(m_np.T)),
        ("float32 -> float16", lambda: a.half(), lambda: a_np.astype(np.float16)),
    ]
    threads = kiln.get_num_threads()
    print(f"2^24 float32 elements; kiln threads: 1 and {threads}")
    print(f"{'op':28s}{'1 thread ms':>13s}{f'{threads} threads ms':>15s}{'speed-up':>10s}"
          f"{'NumPy ms':>10s}")
    for name, op, np_op in cases:
        kiln.set_num_threads(1)
        one = median_ms(op)
        kiln.set_num_threads(threads)
        many = median_ms(op)
        print(f"{name:28s}{one:13.2f}{many:15.2f}{one / many:10.2f}{median_ms(np_op):10.2f}")


if __name__ == "__main__":
    main()
