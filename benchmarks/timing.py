"""Host timing shared by the benchmark scripts: warm-up, then the median over
repeats of the mean time of many back-to-back calls."""

import statistics
import time


def per_call_us(fn, iters, repeats=7, sync=None, warmup=None, include_device=False):
    """Host microseconds per call; with include_device the clock stops after
    `sync`, so the time covers the device finishing the work too."""
    for _ in range(warmup if warmup is not None else max(iters // 10, 1)):
        fn()
    if sync:
        sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        if sync and include_device:
            sync()
        samples.append((time.perf_counter() - t0) / iters * 1e6)
        if sync:
            sync()
    return statistics.median(samples)
