"""``python -m kiln.doctor``: checks that this kiln install can do what it was built for, one line
per check (OK / WARN / FAIL / SKIP), with what to do for every line that is not OK.

Note [Doctor checks]
Each check is a small function of plain inputs (versions, capabilities, environment values) that
returns a Check, so tests can feed it a GPU or a driver this machine does not have; run_checks()
gathers the real inputs and calls them. Only the last checks touch the device (a tiny kernel, a
pinned copy), and only when a GPU is visible. The exit status is 1 when any check FAILs: a WARN
marks something that works but costs speed or features (no cuDNN, no Gloo, oversubscribed
threads), SKIP a check that does not apply here (no GPU visible).
"""

import argparse
import dataclasses
import json
import os
import sys

from kiln import _extension_check
from kiln.cuda._arch import parse_cuda_architectures

OK, WARN, FAIL, SKIP = "OK", "WARN", "FAIL", "SKIP"


@dataclasses.dataclass
class Check:
    name: str
    status: str
    detail: str
    hint: str = ""  # what to do; set for every status but OK and SKIP


def _version(code):
    """CUDA's encoding: 12080 -> "12.8"."""
    return f"{code // 1000}.{code % 1000 // 10}"


# --- the checks -----------------------------------------------------------------------------


def check_extension(package_dir, loaded_path=None, import_error=None, suffixes=None):
    """kiln._C imports and is an extension for this Python (kiln/_extension_check.py)."""
    ok, detail, hint = _extension_check.check_extension(package_dir, loaded_path, import_error,
                                                        suffixes)
    return Check("extension", OK if ok else FAIL, detail, hint)


def check_same_build(lib_facts, ext_facts, lib_path, ext_path):
    """libkiln and kiln._C come from one build: same CMake facts, libkiln next to _C."""
    differ = [f"{k}: libkiln {lib_facts.get(k)!r}, _C {v!r}" for k, v in ext_facts.items()
              if lib_facts.get(k) != v]
    rebuild = "rebuild both from one tree (cmake -S . -B build && ninja -C build) or reinstall kiln"
    if differ:
        return Check("same build", FAIL,
                     "kiln._C and libkiln come from different builds (" + "; ".join(differ) + ")",
                     rebuild)
    ext_dir = os.path.dirname(os.path.realpath(ext_path))
    if lib_path and os.path.dirname(os.path.realpath(lib_path)) != ext_dir:
        return Check("same build", WARN,
                     f"libkiln was loaded from {lib_path}, not from kiln._C's folder {ext_dir}",
                     "an installed copy or LD_LIBRARY_PATH shadows the libkiln built with this "
                     "kiln._C: remove it or " + rebuild)
    return Check("same build", OK,
                 f"libkiln and kiln._C from build {lib_facts.get('git_version', '?')}")


def check_cuda_driver(built, runtime, driver, device_count, visible=None, gpu_present=False):
    """A driver is installed, supports the CUDA runtime kiln was built with, and shows GPUs.

    runtime/driver use CUDA's encoding (13000 = 13.0; driver 0 = none installed); visible is
    CUDA_VISIBLE_DEVICES (None when unset); gpu_present says an NVIDIA GPU exists on the machine.
    """
    if not built:
        if gpu_present:
            return Check("cuda driver", WARN, "an NVIDIA GPU is present but kiln was built "
                         "without CUDA", "install the CUDA toolkit (nvcc) and rebuild with "
                         "-DKILN_CUDA=ON")
        return Check("cuda driver", SKIP, "CPU-only build of kiln and no GPU visible")
    if driver == 0:
        return Check("cuda driver", WARN, "no GPU visible: no NVIDIA driver found (kiln runs on "
                     "the CPU)", "install the NVIDIA driver to use a GPU")
    if driver // 1000 < runtime // 1000:
        return Check("cuda driver", FAIL,
                     f"the driver supports CUDA {_version(driver)} but kiln was built with CUDA "
                     f"{_version(runtime)}",
                     f"update the NVIDIA driver to one for CUDA {_version(runtime)} or rebuild "
                     f"kiln with a CUDA {_version(driver)} toolkit")
    if device_count == 0:
        where = ("" if visible is None else f" (CUDA_VISIBLE_DEVICES={visible!r})")
        return Check("cuda driver", WARN, f"no GPU visible{where}",
                     "unset or fix CUDA_VISIBLE_DEVICES" if visible is not None
                     else "check that the GPU is not held by another container (nvidia-smi)")
    if driver < runtime:
        return Check("cuda driver", WARN,
                     f"the driver supports CUDA {_version(driver)}, older than kiln's runtime "
                     f"{_version(runtime)}: it runs through minor-version compatibility, but "
                     "newer PTX cannot be JIT-compiled",
                     f"update the NVIDIA driver to one for CUDA {_version(runtime)}")
    return Check("cuda driver", OK, f"driver supports CUDA {_version(driver)}, kiln uses runtime "
                 f"{_version(runtime)}, {device_count} GPU(s) visible")


def _runs_on(archs, major, minor):
    for a_major, a_minor, suffix, sass, ptx in archs:
        if suffix == "a":  # arch-specific code runs on exactly that GPU
            if (a_major, a_minor) == (major, minor):
                return True
            continue
        # Machine code runs on later GPUs of its major version; PTX is JIT-compiled for any later.
        if sass and a_major == major and a_minor <= minor:
            return True
        if ptx and (a_major, a_minor) <= (major, minor):
            return True
    return False


def check_gpu_architectures(arch_list, capabilities):
    """Every visible GPU's compute capability is one kiln's CUDA kernels were compiled for.

    capabilities: [(major, minor)] per visible GPU.
    """
    if not capabilities:
        return Check("gpu architectures", SKIP, "no GPU visible")
    archs = parse_cuda_architectures(arch_list)
    if archs is None:
        return Check("gpu architectures", WARN, f"kiln was built for CUDA architectures "
                     f"{arch_list!r}, which cannot be checked here",
                     "rebuild with numeric -DCMAKE_CUDA_ARCHITECTURES (e.g. 90) to make the "
                     "build checkable")
    built = ", ".join(f"sm_{a[0]}{a[1]}{a[2]}" for a in archs)
    for i, (major, minor) in enumerate(capabilities):
        if not _runs_on(archs, major, minor):
            cc = f"{major}{minor}"
            keep = ";".join([f"{a[0]}{a[1]}{a[2]}" for a in archs] + [cc])
            return Check("gpu architectures", FAIL,
                         f"kiln was built for {built} but GPU {i} is sm_{cc}",
                         f"rebuild with -DCMAKE_CUDA_ARCHITECTURES={cc} (or \"{keep}\" to keep "
                         "the others)")
    return Check("gpu architectures", OK, f"built for {built}; GPUs are " +
                 ", ".join(f"sm_{a}{b}" for a, b in capabilities))


def check_gpu_kernel(device_count, missing_kernels=()):
    """A tiny CUDA kernel runs on every visible GPU and matches the CPU. missing_kernels: the
    kernel families kiln's CUDA backend lacks (kiln.cuda.is_available() is False while any is)."""
    import kiln
    if missing_kernels:
        return Check("gpu kernel", FAIL, "kiln's CUDA backend lacks kernels for " +
                     ", ".join(missing_kernels), "rebuild kiln from a complete source tree "
                     "(every file in cuda/ must compile in)")
    x = kiln.arange(1000, dtype=kiln.float32)
    want = (x * 2 + 1).sum().item()
    for i in range(device_count):
        try:
            got = (x.to(f"cuda:{i}") * 2 + 1).sum().item()
        except Exception as e:  # noqa: BLE001  (any failure is the finding)
            return Check("gpu kernel", FAIL, f"a CUDA kernel failed on GPU {i}: {e}",
                         "see the gpu architectures and cuda driver lines above")
        if got != want:
            return Check("gpu kernel", FAIL, f"(x * 2 + 1).sum() gave {got} on GPU {i}, {want} "
                         "on the CPU", "the GPU computes wrong results: check it with "
                         "nvidia-smi -q and report python -m kiln.utils.collect_env's output")
    return Check("gpu kernel", OK, f"(x * 2 + 1).sum() on {device_count} GPU(s) matches the CPU")


def check_pinned_memory():
    """Page-locked host memory can be allocated and copied to the GPU and back."""
    import kiln
    try:
        p = kiln.arange(256, dtype=kiln.float32).pin_memory()
        back = p.to("cuda", non_blocking=True).cpu()
    except Exception as e:  # noqa: BLE001
        return Check("pinned memory", FAIL, f"pinned allocation or copy failed: {e}",
                     "raise the locked-memory limit (ulimit -l) or the container's memory limit")
    if not p.is_pinned() or not bool((back == p).all()):
        return Check("pinned memory", FAIL, "pinned copy did not round-trip",
                     "report the output of python -m kiln.utils.collect_env")
    return Check("pinned memory", OK, "pinned allocation and async copy work")


def check_cudnn(built, version, path=None, gpu_visible=True):
    """cuDNN (dlopened at the first CUDA convolution) loads; version is kiln.backends.cudnn's."""
    if version is not None:
        v = f"{version // 10000}.{version // 100 % 100}.{version % 100}"
        return Check("cudnn", OK, f"cuDNN {v} loads" + (f" ({path})" if path else ""))
    if not gpu_visible:
        return Check("cudnn", SKIP, "no GPU visible" + ("" if built else "; built without cuDNN"))
    if not built:
        return Check("cudnn", WARN, "kiln was built without cuDNN: CUDA convolutions use the "
                     "slower GEMM path", "install cuDNN 9 and rebuild kiln")
    return Check("cudnn", WARN, "libcudnn.so.9 could not be loaded: CUDA convolutions use the "
                 "slower GEMM path", "install cuDNN 9 (pip install nvidia-cudnn-cu12 or the "
                 "Debian package) or add its lib folder to LD_LIBRARY_PATH")


def check_nccl(built, version, gpu_count):
    """NCCL is there for multi-GPU collectives; version is kiln.cuda.nccl.version()'s tuple."""
    if built and version:
        return Check("nccl", OK, "NCCL " + ".".join(map(str, version)))
    if gpu_count > 1:
        return Check("nccl", WARN, f"{gpu_count} GPUs but kiln has no NCCL: the nccl backend of "
                     "kiln.distributed is unavailable", "install NCCL 2 (libnccl-dev) and "
                     "rebuild kiln")
    return Check("nccl", SKIP, "kiln was built without NCCL (needed only with several GPUs)")


def check_gloo(available):
    if available:
        return Check("gloo", OK, "Gloo present: CPU collectives available")
    return Check("gloo", WARN, "kiln was built without Gloo: CPU collectives (the gloo backend of "
                 "kiln.distributed) unavailable", "install Gloo (Debian: libgloo-dev) and rebuild "
                 "kiln")


def check_cpu_math(openblas, dnnl):
    """Which libraries the CPU kernels use (Note [CPU math libraries]); both are optional."""
    missing = [name for name, on in (("OpenBLAS", openblas), ("oneDNN", dnnl)) if not on]
    if not missing:
        return Check("cpu math", OK, "CPU GEMM on oneDNN (float32) and OpenBLAS (float64), CPU "
                     "convolution on oneDNN")
    sgemm = "oneDNN" if dnnl else ("OpenBLAS" if openblas else "Eigen")
    used = f"float32 GEMM on {sgemm}, float64 GEMM on " + (
        "OpenBLAS" if openblas else "Eigen") + ", convolution on " + (
        "oneDNN" if dnnl else "im2col + GEMM")
    return Check("cpu math", WARN, f"kiln was built without {' and '.join(missing)}: CPU {used} "
                 "(slower)", "install libopenblas-openmp-dev and libdnnl-dev (Debian), rebuild kiln")


def check_omp_threads(env_value, cores, num_threads, local_world_size=1):
    """OMP_NUM_THREADS (env_value, None when unset) fits the cores this process may use, with
    local_world_size processes per machine (torchrun's LOCAL_WORLD_SIZE)."""
    if env_value is not None and not (env_value.strip().isdigit() and int(env_value) > 0):
        return Check("omp threads", WARN, f"OMP_NUM_THREADS={env_value!r} is not a positive "
                     "integer", f"set OMP_NUM_THREADS to at most {cores}")
    total = num_threads * local_world_size
    if total > cores:
        per = max(1, cores // local_world_size)
        who = (f"{local_world_size} processes x {num_threads} threads" if local_world_size > 1
               else f"{num_threads} threads")
        return Check("omp threads", WARN, f"{who} on {cores} cores: oversubscribed, CPU ops "
                     "slow down", f"set OMP_NUM_THREADS={per}")
    source = "OMP_NUM_THREADS" if env_value is not None else "default"
    return Check("omp threads", OK, f"{num_threads} threads ({source}) on {cores} cores")


# --- gathering the inputs -------------------------------------------------------------------


def _usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _local_world_size():
    """Processes per machine under kiln.distributed.run / torchrun (1 otherwise)."""
    value = os.environ.get("LOCAL_WORLD_SIZE", "")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def _safe(name, fn):
    """fn()'s Check; a check that raises is itself a FAIL naming the error."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return Check(name, FAIL, f"the check raised {type(e).__name__}: {e}",
                     "report the output of python -m kiln.utils.collect_env")


def run_checks():
    import kiln
    import kiln.distributed
    from kiln import _C
    from kiln.utils.collect_env import loaded_library

    lib = _C._build_info()
    built = lib["cuda"] == "ON"
    count = kiln.cuda.device_count()
    visible = count > 0
    checks = [
        _safe("extension", lambda: check_extension(os.path.dirname(_C.__file__), _C.__file__)),
        _safe("same build", lambda: check_same_build(lib, _C._extension_build_info,
                                                     lib["library_path"], _C.__file__)),
        _safe("cuda driver", lambda: check_cuda_driver(
            built, _C._cuda_runtime_version(), _C._cuda_driver_version(), count,
            os.environ.get("CUDA_VISIBLE_DEVICES"), os.path.exists("/proc/driver/nvidia"))),
        _safe("gpu architectures", lambda: check_gpu_architectures(
            lib["cuda_architectures"],
            [kiln.cuda.get_device_capability(i) for i in range(count)])),
    ]
    if visible:
        checks.append(_safe("gpu kernel", lambda: check_gpu_kernel(
            count, _C._cuda_missing_kernels())))
        checks.append(_safe("pinned memory", check_pinned_memory))
    else:
        checks += [Check("gpu kernel", SKIP, "no GPU visible"),
                   Check("pinned memory", SKIP, "no GPU visible")]

    def cudnn():
        version = kiln.backends.cudnn.version() if built else None
        return check_cudnn(lib["cudnn"] == "ON", version, loaded_library("libcudnn"), visible)

    checks.append(_safe("cudnn", cudnn))
    checks.append(_safe("nccl", lambda: check_nccl(
        lib["nccl"] == "ON", kiln.cuda.nccl.version() if lib["nccl"] == "ON" else None, count)))
    checks.append(_safe("gloo", lambda: check_gloo(kiln.distributed.is_gloo_available())))
    checks.append(_safe("cpu math", lambda: check_cpu_math(lib["openblas"] == "ON",
                                                         lib["dnnl"] == "ON")))
    checks.append(_safe("omp threads", lambda: check_omp_threads(
        os.environ.get("OMP_NUM_THREADS"), _usable_cores(), kiln.get_num_threads(),
        _local_world_size())))
    return checks


def format_checks(checks):
    lines = []
    for c in checks:
        lines.append(f"[{c.status:>4}] {c.name}: {c.detail}")
        if c.hint and c.status in (WARN, FAIL):
            lines.append(f"       -> {c.hint}")
    failed = sum(c.status == FAIL for c in checks)
    warned = sum(c.status == WARN for c in checks)
    lines.append(f"{len(checks)} checks: {failed} failed, {warned} "
                 f"warning{'' if warned == 1 else 's'}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kiln.doctor",
                                     description="Check that this kiln install works.")
    parser.add_argument("--json", action="store_true", help="print the checks as a JSON list")
    args = parser.parse_args(argv)
    checks = run_checks()
    if args.json:
        print(json.dumps([dataclasses.asdict(c) for c in checks], indent=2))
    else:
        print(format_checks(checks), end="")
    return 1 if any(c.status == FAIL for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
