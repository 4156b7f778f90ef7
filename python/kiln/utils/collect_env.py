"""``python -m kiln.utils.collect_env``: the facts to paste into a bug report (kiln's counterpart
of torch.utils.collect_env).

Every fact is collected on its own and reads "not found" when it cannot be had, so a broken
install still gets a report. Nothing is compiled and each external program gets a
short timeout, so the report takes well under two seconds.
"""

import collections
import os
import platform
import re
import subprocess
import sys

NOT_FOUND = "not found"

# Variables that change what kiln, CUDA, NCCL, Gloo or OpenMP do at run time.
_ENV_PREFIXES = ("KILN_", "NCCL_", "CUDA_", "GLOO_", "OMP_", "TORCHELASTIC_")
_ENV_NAMES = ("LD_LIBRARY_PATH", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE",
              "LOCAL_WORLD_SIZE", "NVIDIA_VISIBLE_DEVICES")


def _run(args, first_line=True):
    """A program's output (its first line by default), or None when it is missing, fails or
    hangs."""
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=1.0)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    if not first_line:
        return out.stdout
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return lines[0].strip() if lines else None


def _fact(fn):
    """fn()'s value; NOT_FOUND for None or any error (a missing piece never stops the report)."""
    try:
        value = fn()
    except Exception:  # noqa: BLE001  (the report names the fact as not found instead)
        return NOT_FOUND
    return NOT_FOUND if value is None or value == "" else value


def loaded_library(name):
    """The path of the shared library `name` ("libcudnn") this process mapped, or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if path.startswith("/") and os.path.basename(path).startswith(name + ".so"):
                    return path
    except OSError:
        pass
    return None


def _os_name():
    try:
        info = platform.freedesktop_os_release()
        name = info.get("PRETTY_NAME") or info.get("NAME")
    except (AttributeError, OSError):
        name = platform.system() + " " + platform.release()
    return f"{name} ({platform.machine()})"


def _nvcc():
    """The toolkit's nvcc release, from PATH or CUDA_HOME (where CMake also looks)."""
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    for nvcc in ("nvcc", os.path.join(home, "bin", "nvcc")):
        m = re.search(r"release (\S+?),", _run([nvcc, "--version"], first_line=False) or "")
        if m:
            return m.group(1)
    return None


def _libc():
    lib, ver = platform.libc_ver()
    return f"{lib}-{ver}" if lib else None


def _build_info():
    from kiln import _C
    return _C._build_info()


def _kiln_version():
    b = _build_info()
    return f"{b['version']} (git {b['git_version']})"


def _cuda_built():
    return _build_info()["cuda_version"] or "None"


def _cuda_archs():
    return _build_info()["cuda_architectures"] or "None"


def _version_from_code(code):
    """CUDA's encoding: 12080 -> "12.8"."""
    return f"{code // 1000}.{code % 1000 // 10}" if code else None


def _cuda_runtime():
    from kiln import _C
    return _version_from_code(_C._cuda_runtime_version())


def _cuda_available():
    import kiln
    return str(kiln.cuda.is_available())


def _gpus():
    import kiln
    count = kiln.cuda.device_count()
    if count == 0:
        return "No CUDA GPUs visible"
    rows = []
    for i in range(count):
        p = kiln.cuda.get_device_properties(i)
        rows.append(f"GPU {i}: {p.name} (sm_{p.major}{p.minor}, "
                    f"{p.total_memory / 2**30:.0f} GiB)")
    return "\n" + "\n".join(rows)


def _driver():
    from kiln import _C
    supports = _version_from_code(_C._cuda_driver_version())
    version = None
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module\s+(\S+)", f.read())
            version = m.group(1) if m else None
    except OSError:
        pass
    if version is None and supports is None:
        return None
    return f"{version or 'unknown'} (supports CUDA {supports or 'unknown'})"


def _cudnn():
    import kiln
    v = kiln.backends.cudnn.version()
    if v is None:
        return None
    path = loaded_library("libcudnn")
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}" + (f" ({path})" if path else "")


def _nccl():
    import kiln
    major, minor, patch = kiln.cuda.nccl.version()
    path = loaded_library("libnccl")
    return f"{major}.{minor}.{patch}" + (f" ({path})" if path else "")


def _gloo():
    b = _build_info()
    return f"True ({b['gloo_version']})" if b["gloo"] == "ON" else "False"


def _cpu():
    model = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return f"{model or platform.processor() or 'unknown'}, {os.cpu_count()} cores ({usable} usable)"


def _numpy():
    import numpy
    return numpy.__version__


def _config():
    import kiln
    return "\n" + kiln.__config__.show().rstrip()


# Python packages a kiln bug report may hinge on (PyTorch for the comparison tests and benchmarks,
# NVIDIA's wheels for the libraries kiln may pick up instead of the system's).
_PACKAGES = ("numpy", "pybind11", "torch", "safetensors", "scikit-learn", "pytest",
             "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu13")


def relevant_packages():
    from importlib import metadata
    found = {}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except Exception:  # noqa: BLE001  (not installed, or broken metadata)
            continue
    return found


def relevant_env():
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


def get_env_info():
    """The report's facts as an ordered dict of label -> text."""
    return collections.OrderedDict([
        ("kiln version", _fact(_kiln_version)),
        ("Is debug build", _fact(lambda: str(_build_info()["build_type"] == "Debug"))),
        ("CUDA used to build kiln", _fact(_cuda_built)),
        ("CUDA architectures kiln was built for", _fact(_cuda_archs)),
        ("", ""),
        ("OS", _fact(_os_name)),
        ("GCC version", _fact(lambda: _run(["gcc", "--version"]))),
        ("Clang version", _fact(lambda: _run(["clang", "--version"]))),
        ("CMake version", _fact(lambda: _run(["cmake", "--version"]))),
        ("nvcc version", _fact(_nvcc)),
        ("Libc version", _fact(_libc)),
        (" ", ""),
        ("Python version", f"{platform.python_version()} ({sys.maxsize.bit_length() + 1}-bit "
                           "runtime)"),
        ("Python platform", _fact(platform.platform)),
        ("NumPy version", _fact(_numpy)),
        ("CPU", _fact(_cpu)),
        ("  ", ""),
        ("Is CUDA available", _fact(_cuda_available)),
        ("CUDA runtime version", _fact(_cuda_runtime)),
        ("GPU models and configuration", _fact(_gpus)),
        ("Nvidia driver version", _fact(_driver)),
        ("cuDNN version", _fact(_cudnn)),
        ("NCCL version", _fact(_nccl)),
        ("Gloo available", _fact(_gloo)),
        ("   ", ""),
        ("kiln build configuration", _fact(_config)),
    ])


def get_pretty_env_info():
    lines = []
    for label, value in get_env_info().items():
        if not label.strip():
            lines.append("")
        else:  # multi-line values (GPU list, build configuration) start on their own line
            lines.append(f"{label}:{'' if value.startswith(chr(10)) else ' '}{value}")
    packages = _fact(relevant_packages)
    lines.append("")
    lines.append("Versions of relevant libraries:")
    if isinstance(packages, dict):
        lines.extend(f"  {name}=={version}" for name, version in packages.items())
    else:
        lines.append(f"  {packages}")
    env = relevant_env()
    lines.append("")
    lines.append("Relevant environment variables:" + ("" if env else " none set"))
    lines.extend(f"  {k}={v}" for k, v in env.items())
    return "\n".join(lines) + "\n"


def main():
    print("Collecting environment information...")
    print(get_pretty_env_info(), end="")


if __name__ == "__main__":
    main()
