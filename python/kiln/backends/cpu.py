"""kiln.backends.cpu: get_cpu_capability(), as in torch.backends.cpu."""

import functools
import platform


@functools.lru_cache(maxsize=1)
def get_cpu_capability():
    """The widest SIMD level of this CPU among PyTorch's names: "AVX512", "AVX2" or
    "DEFAULT": what this CPU offers. kiln's CPU kernels have no runtime dispatch: they use
    baseline x86-64 unless kiln was built with -DKILN_NATIVE=ON (-march=native), in which case
    they use this level on the machine that built them."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "DEFAULT"
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return "DEFAULT"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(flags):
        return "AVX512"
    if {"avx2", "fma"} <= set(flags):
        return "AVX2"
    return "DEFAULT"
