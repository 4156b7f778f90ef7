"""kiln.__config__: how this kiln was built (``show()``) and how it runs CPU work in parallel
(``parallel_info()``), as torch.__config__. Both return text."""

import os

from kiln import _C

# _OPENMP's value is the date of the OpenMP specification the compiler implements.
_OPENMP_RELEASES = {"201307": "4.0", "201511": "4.5", "201811": "5.0", "202011": "5.1",
                    "202111": "5.2"}


def _openmp(code):
    if code == "OFF":
        return "OpenMP: OFF"
    release = _OPENMP_RELEASES.get(code)
    return f"OpenMP {code}" + (f" (a.k.a. OpenMP {release})" if release else "")


def _cuda_architectures(arch_list):
    """"80,90-real" -> "sm_80, sm_90-real"; CMake's keywords (native, all) stay as they are."""
    return ", ".join(a if not a[:1].isdigit() else f"sm_{a}" for a in arch_list.split(",") if a)


def show():
    """The build configuration: compiler, flags, OpenMP, Eigen, CUDA and its libraries."""
    b = _C._build_info()
    flags = b["cxx_flags"] + (" -march=native" if b["native"] == "ON" else "")
    lines = [
        f"kiln {b['version']} (git {b['git_version']}) built with:",
        f"  - Compiler: {b['cxx_compiler']}",
        f"  - C++ standard: C++{b['cxx_standard']}",
        f"  - Build type: {b['build_type']}",
        f"  - CXX flags: {flags.strip()}",
        f"  - {_openmp(b['openmp'])}",
        f"  - Eigen {b['eigen']}",
    ]
    if b["cuda"] == "ON":
        lines.append(f"  - CUDA runtime {b['cuda_version']}")
        lines.append(f"  - CUDA architectures: {_cuda_architectures(b['cuda_architectures'])}")
        lines.append("  - cuDNN: " + ("ON (opened at the first CUDA convolution)"
                                      if b["cudnn"] == "ON" else "OFF"))
        lines.append("  - NCCL: " + (f"ON ({b['nccl_version']})" if b["nccl"] == "ON" else "OFF"))
    else:
        lines.append("  - CUDA: OFF")
    lines.append("  - Gloo: " + (f"ON ({b['gloo_version']})" if b["gloo"] == "ON" else "OFF"))
    # Note [CPU math libraries]: float32 on oneDNN, else OpenBLAS; float64 on OpenBLAS.
    dnnl, openblas = b["dnnl"] == "ON", b["openblas"] == "ON"
    blas = f"OpenBLAS ({b['openblas_config'].strip()})"
    sgemm = f"oneDNN {b['dnnl_version']}" if dnnl else (blas if openblas else "Eigen")
    lines.append(f"  - CPU GEMM: float32 and half types on {sgemm}, float64 on "
                 f"{blas if openblas else 'Eigen'}")
    lines.append("  - CPU convolution: " + (f"oneDNN {b['dnnl_version']}" if b["dnnl"] == "ON"
                                            else "im2col + GEMM (no oneDNN)"))
    lines.append(f"  - Library: {b['library_path']}")
    return "\n".join(lines) + "\n"


def _usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def parallel_info():
    """The thread settings kiln's CPU kernels run with and the variables that change them."""
    b = _C._build_info()
    lines = [
        "kiln parallel settings:",
        f"  kiln.get_num_threads(): {_C.get_num_threads()}",
        f"  {_openmp(b['openmp'])}",
        f"  CPU cores: {os.cpu_count()} ({_usable_cores()} usable by this process)",
        "  Parallel backend: OpenMP",
        "Environment variables:",
    ]
    for name in ("OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES"):
        lines.append(f"  {name}: {os.environ.get(name, '[not set]')}")
    return "\n".join(lines) + "\n"
