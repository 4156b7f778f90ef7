"""Custom CUDA kernels on the GPU: RawKernel / RawModule / ElementwiseKernel /
ReductionKernel results against NumPy and kiln ops for every dtype they accept, argument and
launch-configuration errors, streams, the disk cache across processes, and a fused activation
under autograd (examples/custom_kernel.py) checked with gradcheck."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from helpers import requires_gpu
from kiln.cuda import _kernel_cache

pytestmark = requires_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]
CTYPES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short",
          "int32": "int", "int64": "long long", "float16": "__half",
          "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double"}
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_KERNEL_CACHE_DIR", str(tmp_path / "kernels"))
    yield tmp_path / "kernels"


def data(shape, dtype):
    """NumPy data for a kiln dtype name (bfloat16 values that float32 holds exactly)."""
    if dtype == "bool":
        return RNG.random(shape) > 0.5
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        return (RNG.integers(-64, 64, shape) / 8).astype(np.float32 if dtype == "bfloat16"
                                                         else dtype)
    lo = 0 if dtype == "uint8" else -30  # 2 * x + y stays in range for int8
    return RNG.integers(lo, 30, shape).astype(dtype)


def cuda(a, dtype):
    return kiln.tensor(a, dtype=getattr(kiln, dtype), device="cuda")


def numpy_of(t):
    if t.dtype == kiln.bfloat16:
        t = t.float()
    return t.cpu().numpy()


SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = a * x[i] + y[i];
}
"""


# --- RawKernel ---------------------------------------------------------------------------------

def test_raw_kernel_saxpy_matches_numpy():
    k = kiln.cuda.RawKernel(SAXPY, "saxpy")
    x, y = data(1000, "float32"), data(1000, "float32")
    z = kiln.empty(1000, device="cuda")
    k((4,), (256,), (np.float32(1.5), cuda(x, "float32"), cuda(y, "float32"), z, np.int32(1000)))
    np.testing.assert_allclose(numpy_of(z), 1.5 * x + y, rtol=1e-6)
    assert k.max_threads_per_block >= 256 and k.num_regs > 0
    assert repr(k) == "<kiln.cuda.RawKernel saxpy>"


def test_raw_kernel_reads_views_at_their_offset():
    k = kiln.cuda.RawKernel(SAXPY, "saxpy")
    x = cuda(np.arange(10, dtype=np.float32), "float32")
    z = kiln.zeros(4, device="cuda")
    k(1, 4, (np.float32(1), x[3:7], x[0:4], z, np.int32(4)))  # ints for grid and block too
    np.testing.assert_array_equal(numpy_of(z), [3, 5, 7, 9])


TEMPLATE_ADD = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
template <typename T>
__global__ void add(const T* x, const T* y, T* z, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) z[i] = T(float(x[i]) + float(y[i]));
}
"""


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bool"])
def test_raw_module_templates_match_kiln_add_for_every_dtype(dtype):
    mod = kiln.cuda.RawModule(code=TEMPLATE_ADD,
                              name_expressions=[f"add<{CTYPES[dtype]}>"])
    k = mod.get_function(f"add<{CTYPES[dtype]}>")
    x, y = cuda(data(300, dtype), dtype), cuda(data(300, dtype), dtype)
    z = kiln.empty_like(x)
    k((2,), (256,), (x, y, z, 300))
    np.testing.assert_array_equal(numpy_of(z), numpy_of(x + y))


def test_raw_module_extern_c_functions_and_unknown_names():
    mod = kiln.cuda.RawModule(code=SAXPY + 'extern "C" __global__ void noop() {}')
    mod.get_function("noop")((1,), (1,), ())
    with pytest.raises(RuntimeError, match="has no kernel 'missing'"):
        mod.get_function("missing")
    tmpl = kiln.cuda.RawModule(code=TEMPLATE_ADD, name_expressions=["add<float>"])
    with pytest.raises(ValueError, match="not one of name_expressions"):
        tmpl.get_function("add<double>")


def test_raw_module_loads_a_cubin_file(tmp_path):
    major, minor = kiln.cuda.get_device_capability()
    image, _, _ = _kernel_cache.compile_with_cache(SAXPY, (), 10 * major + minor)
    path = tmp_path / "saxpy.cubin"
    path.write_bytes(image)
    k = kiln.cuda.RawModule(path=str(path)).get_function("saxpy")
    z = kiln.empty(3, device="cuda")
    ones = kiln.ones(3, device="cuda")
    k(1, 3, (np.float32(2), ones, ones, z, np.int32(3)))
    np.testing.assert_array_equal(numpy_of(z), [3, 3, 3])


def test_python_numbers_follow_cupy_types():
    src = r"""
    extern "C" __global__ void store(long long i, double f, bool b, double* out) {
      out[0] = (double)i; out[1] = f; out[2] = b ? 1.0 : 0.0;
    }"""
    out = kiln.zeros(3, dtype=kiln.float64, device="cuda")
    kiln.cuda.RawKernel(src, "store")(1, 1, (2 ** 40, 0.25, True, out))
    np.testing.assert_array_equal(numpy_of(out), [2.0 ** 40, 0.25, 1.0])


def test_launch_goes_to_the_current_stream():
    k = kiln.cuda.RawKernel(SAXPY, "saxpy")
    n = 1 << 20
    x = kiln.ones(n, device="cuda")
    z = kiln.zeros(n, device="cuda")
    s = kiln.cuda.Stream()
    s.wait_stream(kiln.cuda.current_stream())
    with kiln.cuda.stream(s):
        k((n // 256,), (256,), (np.float32(2), x, x, z, np.int32(n)))
        total = z.sum()  # same stream: sees the kernel's result
    s.synchronize()
    assert total.item() == 3 * n
    k((n // 256,), (256,), (np.float32(1), x, x, z, np.int32(n)), stream=s)
    s.synchronize()
    assert numpy_of(z)[0] == 2


def test_dynamic_shared_memory_above_48k_is_allowed_up_to_the_device_limit():
    src = r"""
    extern "C" __global__ void smem(float* out, int n) {
      extern __shared__ float buf[];
      for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = (float)i;
      __syncthreads();
      if (threadIdx.x == 0) out[0] = buf[n - 1];
    }"""
    k = kiln.cuda.RawKernel(src, "smem")
    out = kiln.zeros(1, device="cuda")
    n = 96 * 1024 // 4
    k(1, 128, (out, np.int32(n)), shared_mem=96 * 1024)
    assert numpy_of(out)[0] == n - 1
    with pytest.raises(ValueError, match=r"\[RawKernel smem\] shared_mem=1073741824 bytes is "
                                         r"more than cuda:0's limit"):
        k(1, 128, (out, np.int32(1)), shared_mem=1 << 30)


# --- argument and configuration errors ---------------------------------------------------------

@pytest.mark.parametrize("args, exc, match", [
    (lambda x, z: (np.float32(1), x, x, z), TypeError,
     r"\[RawKernel saxpy\] the kernel takes 5 arguments, got 4"),
    (lambda x, z: (1.0, x, x, z, np.int32(4)), TypeError,
     r"argument 0 is a Python float \(double\) \(8 bytes\) but the kernel's parameter 0 takes 4"),
    (lambda x, z: (np.float32(1), x, x, z, 4), TypeError,
     r"argument 4 is a Python int \(long long\)"),
    (lambda x, z: (np.float32(1), x.cpu(), x, z, np.int32(4)), ValueError,
     r"argument 1 is a CPU tensor"),
    (lambda x, z: (np.float32(1), "x", x, z, np.int32(4)), TypeError,
     r"argument 1 of type str cannot be passed"),
    (lambda x, z: (np.float32(1), np.zeros(4), x, z, np.int32(4)), TypeError,
     r"argument 1 of type numpy.ndarray is not a scalar"),
    (lambda x, z: (np.float32(1), x, x, z, 2 ** 70), TypeError, r"does not fit in long long"),
])
def test_bad_arguments_raise_before_the_launch(args, exc, match):
    k = kiln.cuda.RawKernel(SAXPY, "saxpy")
    x = kiln.ones(4, device="cuda")
    z = kiln.zeros(4, device="cuda")
    with pytest.raises(exc, match=match):
        k(1, 4, args(x, z))
    kiln.cuda.synchronize()
    assert numpy_of(z).tolist() == [0, 0, 0, 0]  # nothing ran


@pytest.mark.parametrize("grid, block, exc, match", [
    ((0,), (32,), ValueError, r"grid.x must be in \[1, 2147483647\], got 0"),
    ((1, 70000), (32,), ValueError, r"grid.y must be in \[1, 65535\], got 70000"),
    ((1,), (2048,), ValueError, r"block.x must be in \[1, 1024\], got 2048"),
    ((1,), (32, 32, 2), ValueError, r"a block of 32x32x2 = 2048 threads is more than"),
    ((1,), (1, 1, 1, 1), ValueError, r"block must have 1 to 3 dimensions, got 4"),
    ((1.5,), (32,), TypeError, r"grid must hold ints, got float"),
    ("1", (32,), TypeError, r"grid must be an int or a tuple"),
])
def test_bad_launch_configurations_raise(grid, block, exc, match):
    k = kiln.cuda.RawKernel(SAXPY, "saxpy")
    x = kiln.ones(4, device="cuda")
    with pytest.raises(exc, match=r"\[RawKernel saxpy\] " + match):
        k(grid, block, (np.float32(1), x, x, x, np.int32(4)))


def test_compile_error_raises_with_nvrtc_log():
    k = kiln.cuda.RawKernel('extern "C" __global__ void bad(float* x) {\n  x[0] = nope;\n}',
                            "bad")
    with pytest.raises(kiln.cuda.CompileException, match=r"(?s)bad\.cu\(2\): error.*line 2: "
                                                         r"x\[0\] = nope;"):
        k(1, 1, (kiln.zeros(1, device="cuda"),))


def test_wrong_kernel_name_says_what_to_check():
    k = kiln.cuda.RawKernel(SAXPY, "saxpi")
    with pytest.raises(RuntimeError, match=r"has no kernel 'saxpi'.*extern \"C\""):
        k(1, 1, ())


# --- ElementwiseKernel -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_generic_kernel_matches_kiln_for_every_dtype(dtype):
    op = "z = x == y" if dtype == "bool" else "z = T(float(x) * 2.0f + float(y))"
    k = kiln.cuda.ElementwiseKernel("T x, T y", "T z", op, "axpy2")
    x, y = cuda(data((3, 5), dtype), dtype), cuda(data((3, 5), dtype), dtype)
    z = k(x, y)
    assert z.dtype == x.dtype and tuple(z.shape) == (3, 5)
    want = (x == y) if dtype == "bool" else (x * 2 + y)
    np.testing.assert_array_equal(numpy_of(z), numpy_of(want))


def test_elementwise_broadcasts_noncontiguous_operands_and_scalars():
    k = kiln.cuda.ElementwiseKernel("T a, T x, T y", "T z", "z = a * x + y", "saxpy_ew")
    xn = data((4, 3), "float64")
    yn = data((4,), "float64")
    x = cuda(xn, "float64").t()  # [3, 4], transposed strides
    y = cuda(yn, "float64")
    z = k(2.0, x, y)
    np.testing.assert_allclose(numpy_of(z), 2.0 * xn.T + yn)
    col = cuda(data((3, 1), "float64"), "float64")
    z2 = k(np.float64(0.5), col, y)  # [3, 1] with [4]: [3, 4]
    np.testing.assert_allclose(numpy_of(z2), 0.5 * numpy_of(col) + yn)


def test_elementwise_typed_params_cast_inputs_and_fill_given_outputs():
    k = kiln.cuda.ElementwiseKernel("float32 x, int32 k", "float64 y", "y = x * k", "scale")
    x = cuda(np.arange(6), "int64")
    out = kiln.zeros((6,), dtype=kiln.float64, device="cuda")
    r = k(x, 3, out)
    assert r is out
    np.testing.assert_array_equal(numpy_of(out), np.arange(6) * 3.0)
    with pytest.raises(TypeError, match=r"output 'y' is float32 but the parameter is float64"):
        k(x, 3, kiln.zeros(6, device="cuda"))
    with pytest.raises(ValueError, match=r"output 'y' has shape \[5\] but the inputs broadcast"):
        k(x, 3, kiln.zeros(5, dtype=kiln.float64, device="cuda"))


def test_elementwise_raw_params_index_and_size():
    k = kiln.cuda.ElementwiseKernel("raw T x", "T y", "y = x[_ind.size() - i - 1]", "reverse")
    x = cuda(np.arange(7, dtype=np.float32), "float32")
    y = kiln.empty(7, device="cuda")
    k(x, y)
    np.testing.assert_array_equal(numpy_of(y), np.arange(7)[::-1])
    iota = kiln.cuda.ElementwiseKernel("", "raw int64 y", "y[i] = i * i", "squares")
    out = kiln.zeros(5, dtype=kiln.int64, device="cuda")
    iota(out, size=5)
    np.testing.assert_array_equal(numpy_of(out), np.arange(5) ** 2)
    with pytest.raises(ValueError, match="the loop size is undecided"):
        iota(out)


def test_elementwise_multiple_outputs_and_empty_inputs():
    k = kiln.cuda.ElementwiseKernel("T x", "T lo, T hi", "lo = x - 1; hi = x + 1", "bounds")
    lo, hi = k(cuda(np.array([1.0, 2.0], dtype=np.float32), "float32"))
    np.testing.assert_array_equal(numpy_of(lo), [0, 1])
    np.testing.assert_array_equal(numpy_of(hi), [2, 3])
    lo, hi = k(kiln.empty((0, 3), device="cuda"))
    assert tuple(lo.shape) == (0, 3)


def test_elementwise_errors_name_the_kernel_and_argument():
    k = kiln.cuda.ElementwiseKernel("T x, T y", "T z", "z = x + y", "addk")
    f32 = kiln.ones(3, device="cuda")
    with pytest.raises(TypeError, match=r"\[ElementwiseKernel addk\] type placeholder T is "
                                        r"float32 but argument 'y' \(tensor\) is float64"):
        k(f32, kiln.ones(3, dtype=kiln.float64, device="cuda"))
    with pytest.raises(TypeError, match="takes 2 inputs"):
        k(f32)
    with pytest.raises(ValueError, match="do not broadcast"):
        k(f32, kiln.ones(4, device="cuda"))
    with pytest.raises(ValueError, match="argument 'y' is a CPU tensor"):
        k(f32, kiln.ones(3))
    bad = kiln.cuda.ElementwiseKernel("T x", "T y", "y = x +* 1", "syntax")
    with pytest.raises(kiln.cuda.CompileException, match=r"syntax\.cu\(\d+\): error"):
        bad(f32)


def _flat_variants(k):
    """(vec, index32) of the flat kernels an ElementwiseKernel compiled (nd == 0)."""
    return {(key[3], key[4]) for key in k._kernels if key[2] == 0}


@pytest.mark.parametrize("dtype, vec", [("float32", 4), ("float16", 8), ("bfloat16", 8),
                                        ("int8", 16), ("float64", 2), ("bool", 16)])
def test_flat_path_vectorizes_and_handles_the_tail(dtype, vec):
    op = "z = x != y" if dtype == "bool" else "z = T(float(x) + float(y))"
    k = kiln.cuda.ElementwiseKernel("T x, T y", "T z", op, "flat_add")
    n = 3 * 256 * vec + 5  # full packs, then a tail of 5
    x, y = cuda(data(n, dtype), dtype), cuda(data(n, dtype), dtype)
    for _ in range(2):  # the second call takes the planned path
        z = k(x, y)
        want = (x != y) if dtype == "bool" else (x + y)
        np.testing.assert_array_equal(numpy_of(z), numpy_of(want))
    assert _flat_variants(k) == {(vec, True)}
    assert len(k._plans) == 1


def test_flat_path_falls_back_to_scalar_access_for_misaligned_views():
    k = kiln.cuda.ElementwiseKernel("T x", "T z", "z = x * 2", "twice")
    base = cuda(np.arange(1030, dtype=np.float32), "float32")
    for _ in range(2):
        z = k(base[1:1025])  # 4 bytes past a 16-byte boundary
        np.testing.assert_array_equal(numpy_of(z), np.arange(1, 1025) * 2)
    assert _flat_variants(k) == {(1, True)}


def test_outputs_that_are_read_or_written_conditionally_keep_their_values():
    acc = kiln.cuda.ElementwiseKernel("T x", "T z", "z += x", "accumulate")
    clip = kiln.cuda.ElementwiseKernel("T x", "T z", "if (x > 0) z = x", "positive")
    xn = data(1027, "float32")
    x = cuda(xn, "float32")
    for _ in range(2):
        z = cuda(np.ones(1027, dtype=np.float32), "float32")
        acc(x, z)
        np.testing.assert_array_equal(numpy_of(z), xn + 1)
        z = cuda(np.full(1027, -7, dtype=np.float32), "float32")
        clip(x, z)
        np.testing.assert_array_equal(numpy_of(z), np.where(xn > 0, xn, -7))


def test_planned_calls_still_broadcast_and_name_bad_arguments():
    k = kiln.cuda.ElementwiseKernel("T x, T y", "T z", "z = x - y", "sub_ew")
    x = cuda(data((4, 5), "float32"), "float32")
    k(x, x)  # planned
    row = cuda(data(5, "float32"), "float32")
    np.testing.assert_array_equal(numpy_of(k(x, row)), numpy_of(x - row))  # broadcast
    np.testing.assert_array_equal(numpy_of(k(x.t().contiguous().t(), x)), 0)  # strided
    with pytest.raises(ValueError, match=r"\[ElementwiseKernel sub_ew\] argument 'y' is a CPU"):
        k(x, x.cpu())


def test_flat_path_past_32_bit_indices():
    free, _ = kiln.cuda.mem_get_info()
    n = 2 ** 31 - 2 ** 27  # with a full grid of 16-element packs the index passes 2^31
    if free < 3 * n:
        pytest.skip("needs 6 GB of free GPU memory")
    k = kiln.cuda.ElementwiseKernel("int8 x", "int8 z", "z = x + 1", "inc8")
    x = kiln.zeros(n, dtype=kiln.int8, device="cuda")
    z = k(x)
    assert _flat_variants(k) == {(16, False)}
    assert z[:5].cpu().tolist() == [1] * 5 and z[-5:].cpu().tolist() == [1] * 5
    assert z.sum().item() == n  # integer sums accumulate in int64
    del x, z


# --- ReductionKernel ---------------------------------------------------------------------------

L2NORM = ("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), ((0, 2), False),
                                            (-1, False), ((), False)])
def test_reduction_l2norm_matches_numpy(dtype, axis, keepdims):
    k = kiln.cuda.ReductionKernel(*L2NORM)
    xn = data((5, 6, 7), dtype)
    got = k(cuda(xn, dtype), axis=axis, keepdims=keepdims)
    want = np.sqrt((xn.astype(np.float64) ** 2).sum(axis=axis, keepdims=keepdims))
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(numpy_of(got), want, rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduction_sum_matches_kiln_for_every_dtype(dtype):
    halves = dtype in ("float16", "bfloat16")
    out_t = "float32" if halves else ("int64" if dtype in ("bool", "uint8", "int8", "int16")
                                      else dtype)
    k = kiln.cuda.ReductionKernel("T x", f"{out_t} y", f"({CTYPES[out_t]})x", "a + b",
                                  "y = a", "0", "total")
    xn = data((33, 300), dtype)
    x = cuda(xn, dtype)
    got = k(x, axis=1)
    want = x.to(getattr(kiln, out_t)).sum(1)
    tol = 1e-2 if halves else 1e-6
    np.testing.assert_allclose(numpy_of(got), numpy_of(want), rtol=tol, atol=tol)


def test_reduction_reads_transposed_and_broadcast_inputs_in_place():
    k = kiln.cuda.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "dot")
    xn, wn = data((8, 50), "float64"), data((50,), "float64")
    x = cuda(xn.T.copy(), "float64").t()  # [8, 50], column-major
    got = k(x, cuda(wn, "float64"), axis=1)
    np.testing.assert_allclose(numpy_of(got), xn @ wn)
    got0 = k(x, 2.0, axis=0)  # a Python number as the weight
    np.testing.assert_allclose(numpy_of(got0), 2 * xn.sum(0))


def test_reduction_max_with_identity_reduce_type_out_and_empty():
    k = kiln.cuda.ReductionKernel("T x", "float32 y", "x", "max(a, b)", "y = a", "-1.0e30f",
                                  "maxk", reduce_type="float32")
    xn = data((4, 9), "float32")
    out = kiln.empty(4, device="cuda")
    assert k(cuda(xn, "float32"), out=out, axis=1) is out
    np.testing.assert_array_equal(numpy_of(out), xn.max(1))
    empty = k(kiln.empty((3, 0), device="cuda"), axis=1)
    np.testing.assert_allclose(numpy_of(empty), [-1e30] * 3, rtol=1e-6)
    with pytest.raises(IndexError, match=r"\[ReductionKernel maxk\] axis 2 is out of range"):
        k(cuda(xn, "float32"), axis=2)
    with pytest.raises(ValueError, match=r"out has shape \[4\] but the result has shape \[9\]"):
        k(cuda(xn, "float32"), out=out, axis=0)


def test_repeated_reductions_take_their_plan_with_new_data_and_scalars():
    k = kiln.cuda.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "wsum")
    for scale in (1.0, 2.5, -3.0):  # the second and third calls are planned
        xn = data((7, 33), "float64")
        got = k(cuda(xn, "float64"), scale, axis=1)
        np.testing.assert_allclose(numpy_of(got), scale * xn.sum(1))
    assert len(k._plans) == 1
    out = kiln.empty(7, dtype=kiln.float64, device="cuda")
    assert k(cuda(xn, "float64"), 1.0, out, axis=1) is out
    np.testing.assert_allclose(numpy_of(out), xn.sum(1))


# --- disk cache across processes ---------------------------------------------------------------

_SCRIPT = """
import json, time
import numpy as np
import kiln
from kiln.cuda import _kernel_cache
k = kiln.cuda.RawKernel(r'''%s''', "saxpy")
x = kiln.ones(8, device="cuda")
t0 = time.perf_counter()
k.compile()
seconds = time.perf_counter() - t0
k(1, 8, (np.float32(2), x, x, x, np.int32(8)))
print(json.dumps({"seconds": seconds, "stats": _kernel_cache.stats, "x": x.cpu().tolist()}))
""" % SAXPY


def test_second_process_compiles_nothing(private_cache):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               KILN_KERNEL_CACHE_DIR=str(private_cache))
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                             env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert runs[0]["stats"]["compiles"] == 1
    assert runs[1]["stats"] == {"compiles": 0, "disk_hits": 1, "memory_hits": 0}
    assert runs[0]["x"] == runs[1]["x"] == [3.0] * 8
    assert runs[1]["seconds"] < runs[0]["seconds"]
    print(f"compile + load {runs[0]['seconds'] * 1e3:.1f} ms; "
          f"disk hit + load {runs[1]['seconds'] * 1e3:.1f} ms")


# --- autograd and the example ------------------------------------------------------------------

def test_fused_silu_function_passes_gradcheck():
    import custom_kernel
    x = kiln.tensor(RNG.standard_normal((4, 5)), dtype=kiln.float64, device="cuda",
                    requires_grad=True)
    assert kiln.autograd.gradcheck(custom_kernel.fused_silu, (x,))
    y = custom_kernel.fused_silu(x)
    xn = numpy_of(x.detach())
    np.testing.assert_allclose(numpy_of(y.detach()), xn / (1 + np.exp(-xn)), rtol=1e-12)
    assert y.grad_fn is not None


def test_fused_silu_trains_in_float32():
    import custom_kernel
    x = kiln.tensor(RNG.standard_normal(1000).astype(np.float32), device="cuda",
                    requires_grad=True)
    custom_kernel.fused_silu(x).sum().backward()
    xn = numpy_of(x.detach())
    s = 1 / (1 + np.exp(-xn))
    np.testing.assert_allclose(numpy_of(x.grad), s + xn * s * (1 - s), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="float32 or float64"):
        custom_kernel.fused_silu(x.detach().half())


def test_example_runs_and_reports_three_timings():
    import custom_kernel
    times = custom_kernel.main(n=1 << 20)
    assert set(times) == {"RawKernel", "ElementwiseKernel", "built-in a * x + y"}
    assert all(t > 0 for t in times.values())
