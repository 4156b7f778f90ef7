"""The GPU architectures kiln's CUDA kernels were compiled for (CMake's CUDA_ARCHITECTURES),
for kiln.cuda.get_arch_list() and the doctor's architecture check."""

import re

from kiln import _C


def parse_cuda_architectures(arch_list):
    """CMake's CUDA_ARCHITECTURES as kiln's build info spells it ("80,90-real", "90a") ->
    [(major, minor, suffix, sass, ptx)]: sass when the build holds machine code for it, ptx when
    it holds PTX. None for keywords whose arches are not known here (native, all, all-major)."""
    out = []
    for item in filter(None, arch_list.split(",")):
        m = re.fullmatch(r"(\d+)(\d)([af]?)(?:-(real|virtual))?", item.strip())
        if not m:
            return None
        kind = m.group(4)
        out.append((int(m.group(1)), int(m.group(2)), m.group(3), kind != "virtual",
                    kind != "real"))
    return out


def get_arch_list():
    """["sm_90", "compute_90"]: machine code and PTX kiln holds; [] without a usable GPU."""
    if not _C._cuda_is_available():
        return []
    archs = parse_cuda_architectures(_C._build_info()["cuda_architectures"]) or []
    out = []
    for major, minor, suffix, sass, ptx in archs:
        if sass:
            out.append(f"sm_{major}{minor}{suffix}")
        if ptx:
            out.append(f"compute_{major}{minor}{suffix}")
    return out


def get_gencode_flags():
    """get_arch_list() as nvcc -gencode flags."""
    flags = []
    for arch in get_arch_list():
        kind, number = arch.split("_")
        flags.append(f"-gencode compute=compute_{number},code={kind}_{number}")
    return " ".join(flags)
