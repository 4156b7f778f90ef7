"""Custom CUDA kernels from Python: SAXPY three ways, and a fused activation with autograd.

    python examples/custom_kernel.py            # needs a CUDA GPU

1. SAXPY (z = a*x + y) as a RawKernel: CUDA C++ compiled at run time by NVRTC, launched
   with an explicit grid and block, the classic first example of PyCUDA and Numba.
2. The same op as an ElementwiseKernel: kiln writes the loop, the indexing and the output
   allocation around one line of C++.
3. Both timed against the built-in ``a * x + y`` (two kernels) with CUDA events.
4. A fused SiLU (x * sigmoid(x)) whose forward and backward are each one RawKernel, wrapped
   in a kiln.autograd.Function so it trains like any kiln op; gradcheck confirms the
   backward against finite differences (tests/python/test_cuda_raw_kernel.py runs it).

Compiled kernels are cached on disk (KILN_KERNEL_CACHE_DIR, default ~/.cache/kiln/kernels),
so the second run of this script compiles nothing.
"""

import numpy as np

import kiln

# --- 1. RawKernel -------------------------------------------------------------------------
# extern "C" keeps the name unmangled, so RawKernel finds it by "saxpy". The scalar parameters
# are a float and an int: launch arguments must match in size, so they are passed as
# numpy.float32 / numpy.int32 (a Python float would be a double, a Python int a long long).
SAXPY_SOURCE = r"""
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* z, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    z[i] = a * x[i] + y[i];
}
"""
saxpy_raw = kiln.cuda.RawKernel(SAXPY_SOURCE, "saxpy")


def saxpy_with_raw_kernel(a, x, y):
    z = kiln.empty_like(x)
    n = x.numel()
    threads = 256
    blocks = min((n + threads - 1) // threads, 65535)
    saxpy_raw((blocks,), (threads,), (np.float32(a), x, y, z, np.int32(n)))
    return z


# --- 2. ElementwiseKernel -----------------------------------------------------------------
# "T" is a type placeholder: one kernel per dtype is compiled on first use. Inputs broadcast.
saxpy_elementwise = kiln.cuda.ElementwiseKernel(
    "T a, T x, T y", "T z", "z = a * x + y", "saxpy_elementwise")


# --- 4. A fused activation with autograd ---------------------------------------------------
# Templates compiled for float and double through name_expressions: float for training,
# double for gradcheck.
SILU_SOURCE = r"""
template <typename T>
__global__ void silu_forward(const T* x, T* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x) {
    const T s = T(1) / (T(1) + exp(-x[i]));
    y[i] = x[i] * s;
  }
}

// d/dx x*s(x) = s + x*s*(1-s)
template <typename T>
__global__ void silu_backward(const T* x, const T* grad, T* out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x) {
    const T s = T(1) / (T(1) + exp(-x[i]));
    out[i] = grad[i] * (s + x[i] * s * (T(1) - s));
  }
}
"""
_CTYPES = {kiln.float32: "float", kiln.float64: "double"}
silu_module = kiln.cuda.RawModule(
    code=SILU_SOURCE,
    name_expressions=[f"silu_{d}<{t}>" for d in ("forward", "backward")
                      for t in _CTYPES.values()])


_silu_kernels = {}


def _launch(name, x, *args):
    if x.dtype not in _CTYPES:
        raise TypeError(f"[fused_silu] takes float32 or float64 tensors, got {x.dtype}")
    expression = f"{name}<{_CTYPES[x.dtype]}>"
    kernel = _silu_kernels.get(expression)
    if kernel is None:
        kernel = _silu_kernels[expression] = silu_module.get_function(expression)
    n = x.numel()
    kernel((max(1, min((n + 255) // 256, 65535)),), (256,), (x, *args, n))


class FusedSiLU(kiln.autograd.Function):
    """x * sigmoid(x): one kernel forward, one kernel backward (saves only x)."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        y = kiln.empty_like(x)
        _launch("silu_forward", x, y)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        out = kiln.empty_like(x)
        _launch("silu_backward", x, grad.contiguous(), out)
        return out


def fused_silu(x):
    return FusedSiLU.apply(x)


def _time_ms(fn, iters=50):
    fn()  # compile / warm up
    start, end = kiln.cuda.Event(enable_timing=True), kiln.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def main(n=1 << 24):
    if not kiln.cuda.is_available():
        print("custom kernels need a CUDA GPU; none is available")
        return None
    rng = np.random.default_rng(0)
    a = 2.5
    x = kiln.tensor(rng.standard_normal(n, dtype=np.float32), device="cuda")
    y = kiln.tensor(rng.standard_normal(n, dtype=np.float32), device="cuda")
    want = a * x.cpu().numpy() + y.cpu().numpy()

    z_raw = saxpy_with_raw_kernel(a, x, y)
    z_ew = saxpy_elementwise(np.float32(a), x, y)
    for label, z in (("RawKernel", z_raw), ("ElementwiseKernel", z_ew)):
        err = np.abs(z.cpu().numpy() - want).max()
        print(f"saxpy {label:18s} max |error| vs NumPy: {err:.2e}")

    times = {
        "RawKernel": _time_ms(lambda: saxpy_with_raw_kernel(a, x, y)),
        "ElementwiseKernel": _time_ms(lambda: saxpy_elementwise(np.float32(a), x, y)),
        "built-in a * x + y": _time_ms(lambda: a * x + y),
    }
    gbytes = 3 * 4 * n / 1e9  # two reads and one write of float32
    for label, ms in times.items():
        print(f"saxpy {label:18s} {ms * 1e3:8.1f} us   {gbytes / (ms / 1e3):7.1f} GB/s")

    xg = kiln.tensor(rng.standard_normal((64, 1024), dtype=np.float32), device="cuda",
                     requires_grad=True)
    fused_silu(xg).sum().backward()
    ref = xg.detach().cpu().numpy()
    s = 1 / (1 + np.exp(-ref))
    err = np.abs(xg.grad.cpu().numpy() - (s + ref * s * (1 - s))).max()
    print(f"fused SiLU backward max |error| vs NumPy: {err:.2e}")
    return times


if __name__ == "__main__":
    main()
