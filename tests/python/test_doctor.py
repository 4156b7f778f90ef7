"""kiln.utils.collect_env, python -m kiln.doctor, kiln.__config__, kiln.version and
kiln.cuda.nccl. The doctor's checks are called with made-up inputs (a GPU or driver this machine
lacks) and run for real through subprocesses."""

import json
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import kiln
import kiln.distributed
from kiln.utils import collect_env, doctor
from helpers import gpu_count, requires_gpu

PYTHON_DIR = pathlib.Path(kiln.__file__).resolve().parent.parent
STATUSES = {"OK", "WARN", "FAIL", "SKIP"}
CUDA_CHECKS = {"cuda driver", "gpu architectures", "gpu kernel", "pinned memory"}


def run_module(module, *args, env=None):
    full_env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR), OMP_NUM_THREADS="1", **(env or {}))
    full_env.pop("LOCAL_WORLD_SIZE", None)
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          env=full_env, timeout=60)


# --- collect_env ---------------------------------------------------------------------------


def test_collect_env_prints_the_key_lines():
    out = run_module("kiln.utils.collect_env", env={"KILN_DOCTOR_PROBE": "7"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"kiln version: {kiln.__version__} (git " in text
    assert f"NumPy version: {np.__version__}" in text
    v = sys.version_info
    assert f"Python version: {v.major}.{v.minor}.{v.micro}" in text
    assert f"Is CUDA available: {kiln.cuda.is_available()}" in text
    assert f"CUDA used to build kiln: {kiln.version.cuda}" in text
    assert f"Gloo available: {kiln.distributed.is_gloo_available()}" in text
    for label in ("OS:", "GCC version:", "CMake version:", "GPU models and configuration:",
                  "Nvidia driver version:", "cuDNN version:", "NCCL version:",
                  "kiln build configuration:", "Relevant environment variables:"):
        assert label in text
    assert "  KILN_DOCTOR_PROBE=7" in text
    assert f"Versions of relevant libraries:\n  numpy=={np.__version__}" in text


def test_collect_env_is_fast():
    kiln.cuda.device_count()  # the driver's own start-up is not the report's cost
    start = time.perf_counter()
    collect_env.get_pretty_env_info()
    assert time.perf_counter() - start < 2.0


def test_collect_env_says_not_found_for_a_missing_piece(monkeypatch):
    def broken():
        raise ImportError("No module named 'numpy'")

    monkeypatch.setattr(collect_env, "_numpy", broken)
    assert collect_env.get_env_info()["NumPy version"] == collect_env.NOT_FOUND
    assert collect_env._run(["kiln-no-such-program-xyz", "--version"]) is None
    assert "NumPy version: not found" in collect_env.get_pretty_env_info()


# --- the doctor as a program ---------------------------------------------------------------


def test_doctor_without_gpu_exits_0_and_skips_cuda_checks():
    # No GPU visible here, nor on the GPU machine with CUDA_VISIBLE_DEVICES="".
    out = run_module("kiln.doctor", env={"CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stdout + out.stderr
    lines = {m.group(2): m.group(1) for m in
             re.finditer(r"^\[\s*(\w+)\] ([a-z ]+):", out.stdout, re.MULTILINE)}
    assert lines["cuda driver"] in ("WARN", "SKIP")
    assert "no GPU visible" in out.stdout
    for name in CUDA_CHECKS - {"cuda driver"}:
        assert lines[name] == "SKIP"
    assert lines["extension"] == lines["same build"] == lines["omp threads"] == "OK"
    assert lines["gloo"] == ("OK" if kiln.distributed.is_gloo_available() else "WARN")
    assert lines["nccl"] == ("OK" if kiln.distributed.is_nccl_available() else "SKIP")
    assert "FAIL" not in lines.values()


def test_doctor_json_parses():
    out = run_module("kiln.doctor", "--json")
    checks = json.loads(out.stdout)
    assert out.returncode == (1 if any(c["status"] == "FAIL" for c in checks) else 0)
    assert {c["name"] for c in checks} >= CUDA_CHECKS | {"extension", "same build", "cudnn",
                                                         "nccl", "gloo", "omp threads"}
    for c in checks:
        assert set(c) == {"name", "status", "detail", "hint"}
        assert c["status"] in STATUSES
        if c["status"] in ("WARN", "FAIL"):
            assert c["hint"]


def test_doctor_exit_status_is_1_on_a_fail(monkeypatch, capsys):
    checks = [doctor.Check("a", "OK", "fine"), doctor.Check("b", "WARN", "meh", "do x")]
    monkeypatch.setattr(doctor, "run_checks", lambda: checks)
    assert doctor.main([]) == 0
    checks.append(doctor.Check("c", "FAIL", "broken", "do y"))
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] c: broken\n       -> do y" in out
    assert "3 checks: 1 failed, 1 warning" in out


# --- the checks, fed inputs ----------------------------------------------------------------


def test_arch_mismatch_fails_with_the_rebuild_hint():
    c = doctor.check_gpu_architectures("90", [(8, 0)])
    assert c.status == "FAIL"
    assert c.detail == "kiln was built for sm_90 but GPU 0 is sm_80"
    assert "-DCMAKE_CUDA_ARCHITECTURES=80" in c.hint and '"90;80"' in c.hint
    c = doctor.check_gpu_architectures("90", [(9, 0), (8, 6)])
    assert c.status == "FAIL" and "GPU 1 is sm_86" in c.detail


@pytest.mark.parametrize("archs, cc, status", [
    ("90", (9, 0), "OK"),
    ("80", (8, 6), "OK"),            # sm_80 machine code runs on later minors of major 8
    ("80", (9, 0), "OK"),            # through compute_80 PTX
    ("80-real", (9, 0), "FAIL"),     # machine code only: no PTX to JIT
    ("90-virtual", (10, 0), "OK"),
    ("86", (8, 0), "FAIL"),
    ("90a", (9, 0), "OK"),
    ("90a", (10, 0), "FAIL"),        # arch-specific code runs on exactly that GPU
    ("80,90", (9, 0), "OK"),
    ("native", (9, 0), "WARN"),
])
def test_arch_rules(archs, cc, status):
    assert doctor.check_gpu_architectures(archs, [cc]).status == status


def test_parse_cuda_architectures():
    parse = kiln.cuda._arch.parse_cuda_architectures
    assert parse("80,90-real") == [(8, 0, "", True, True), (9, 0, "", True, False)]
    assert parse("100a-virtual") == [(10, 0, "a", False, True)]
    assert parse("all-major") is None


def test_get_arch_list():
    archs = kiln.cuda.get_arch_list()
    if not kiln.cuda.is_available():
        assert archs == [] and kiln.cuda.get_gencode_flags() == ""
        return
    assert archs and all(re.fullmatch(r"(sm|compute)_\d+[af]?", a) for a in archs)
    assert kiln.cuda.get_gencode_flags().startswith("-gencode compute=compute_")


def test_arch_check_skips_without_gpus():
    assert doctor.check_gpu_architectures("90", []).status == "SKIP"


def test_cuda_driver_check():
    c = doctor.check_cuda_driver(True, 13000, 12020, 1)
    assert c.status == "FAIL" and "CUDA 12.2" in c.detail and "CUDA 13.0" in c.detail
    assert "update the NVIDIA driver" in c.hint
    c = doctor.check_cuda_driver(True, 13010, 13000, 1)
    assert c.status == "WARN" and "minor-version compatibility" in c.detail
    c = doctor.check_cuda_driver(True, 13000, 0, 0)
    assert c.status == "WARN" and "no GPU visible" in c.detail
    c = doctor.check_cuda_driver(True, 13000, 13000, 0, visible="")
    assert c.status == "WARN" and "CUDA_VISIBLE_DEVICES=''" in c.detail
    assert doctor.check_cuda_driver(True, 13000, 13020, 2).status == "OK"
    assert doctor.check_cuda_driver(False, 0, 0, 0).status == "SKIP"
    c = doctor.check_cuda_driver(False, 0, 0, 0, gpu_present=True)
    assert c.status == "WARN" and "-DKILN_CUDA=ON" in c.hint


def test_same_build_check(tmp_path):
    facts = {"version": "0.1.0", "git_version": "abc", "cuda": "ON"}
    ext = str(tmp_path / "_C.so")
    ok = doctor.check_same_build(dict(facts), facts, str(tmp_path / "libkiln.so"), ext)
    assert ok.status == "OK"
    c = doctor.check_same_build(dict(facts, git_version="def"), facts,
                                str(tmp_path / "libkiln.so"), ext)
    assert c.status == "FAIL" and "git_version: libkiln 'def', _C 'abc'" in c.detail
    c = doctor.check_same_build(dict(facts), facts, "/elsewhere/libkiln.so", ext)
    assert c.status == "WARN" and "/elsewhere/libkiln.so" in c.detail


def test_extension_check(tmp_path):
    assert doctor.check_extension(str(tmp_path)).status == "FAIL"
    (tmp_path / "_C.cpython-210-x86_64-linux-gnu.so").write_bytes(b"")
    c = doctor.check_extension(str(tmp_path), suffixes=[".cpython-311-x86_64-linux-gnu.so",
                                                         ".abi3.so", ".so"])
    assert c.status == "FAIL" and "another Python" in c.detail and "Python_EXECUTABLE" in c.hint
    c = doctor.check_extension(str(tmp_path), None, ImportError("undefined symbol: _ZN4kiln3addE"),
                               suffixes=[".cpython-210-x86_64-linux-gnu.so"])
    assert c.status == "FAIL" and "different builds" in c.hint
    assert doctor.check_extension(str(tmp_path), kiln._C.__file__).status == "OK"


def test_import_kiln_explains_a_wrong_python_extension(tmp_path):
    pkg = tmp_path / "kiln"
    pkg.mkdir()
    src = pathlib.Path(kiln.__file__).parent
    for name in ("__init__.py", "_extension_check.py"):
        (pkg / name).write_text((src / name).read_text())
    (pkg / "_C.cpython-210-x86_64-linux-gnu.so").write_bytes(b"")
    out = subprocess.run([sys.executable, "-c", "import kiln"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(tmp_path)), timeout=60)
    assert out.returncode != 0
    assert "ImportError: [import kiln] kiln._C was built for another Python" in out.stderr


def test_omp_threads_check():
    c = doctor.check_omp_threads("abc", 8, 8)
    assert c.status == "WARN" and "OMP_NUM_THREADS='abc'" in c.detail
    c = doctor.check_omp_threads(None, 8, 8, local_world_size=4)
    assert c.status == "WARN" and "4 processes x 8 threads on 8 cores" in c.detail
    assert c.hint == "set OMP_NUM_THREADS=2"
    assert doctor.check_omp_threads("16", 8, 16).status == "WARN"
    assert doctor.check_omp_threads("2", 8, 2, local_world_size=4).status == "OK"


def test_gpu_kernel_check_names_missing_cuda_kernels():
    c = doctor.check_gpu_kernel(1, ["sort", "scan"])
    assert c.status == "FAIL" and "lacks kernels for sort, scan" in c.detail


def test_library_checks():
    assert doctor.check_gloo(True).status == "OK"
    c = doctor.check_gloo(False)
    assert c.status == "WARN" and "CPU collectives" in c.detail and "libgloo-dev" in c.hint
    assert doctor.check_cpu_math(True, True).status == "OK"
    c = doctor.check_cpu_math(False, True)
    assert c.status == "WARN" and "without OpenBLAS:" in c.detail and "GEMM on Eigen" in c.detail
    assert "convolution on oneDNN" in c.detail and "libopenblas-openmp-dev" in c.hint
    assert "float32 GEMM on oneDNN" in c.detail
    assert "float32 GEMM on OpenBLAS" in doctor.check_cpu_math(True, False).detail
    c = doctor.check_cpu_math(False, False)
    assert "OpenBLAS and oneDNN" in c.detail and "im2col" in c.detail
    assert doctor.check_nccl(True, (2, 28, 9), 2).detail == "NCCL 2.28.9"
    assert doctor.check_nccl(False, None, 2).status == "WARN"
    assert doctor.check_nccl(False, None, 1).status == "SKIP"
    assert doctor.check_cudnn(True, 91900).detail == "cuDNN 9.19.0 loads"
    assert doctor.check_cudnn(True, None, gpu_visible=True).status == "WARN"
    assert doctor.check_cudnn(True, None, gpu_visible=False).status == "SKIP"
    assert doctor.check_cudnn(False, None, gpu_visible=True).status == "WARN"


# --- build facts: __config__, version, nccl, cudnn -----------------------------------------


def test_config_show_contains_the_build_facts():
    b = kiln._C._build_info()
    text = kiln.__config__.show()
    assert f"kiln {kiln.__version__} (git {b['git_version']}) built with:" in text
    assert f"Compiler: {b['cxx_compiler']}" in text and "C++ standard: C++17" in text
    assert re.search(r"OpenMP \d{6}", text) and re.search(r"Eigen \d+\.\d+\.\d+", text)
    assert f"Gloo: {'ON' if kiln.distributed.is_gloo_available() else 'OFF'}" in text
    if kiln.cuda.is_built():
        assert f"CUDA runtime {kiln.version.cuda}" in text
        assert re.search(r"CUDA architectures: sm_\d+", text)
        assert f"NCCL: {'ON' if kiln.distributed.is_nccl_available() else 'OFF'}" in text
    else:
        assert "CUDA: OFF" in text


def test_openmp_backend():
    assert kiln.backends.openmp.is_available() == ("OpenMP: OFF" not in kiln.__config__.show())


def test_config_parallel_info():
    text = kiln.__config__.parallel_info()
    assert f"kiln.get_num_threads(): {kiln.get_num_threads()}" in text
    assert "OMP_NUM_THREADS:" in text


def test_extension_and_library_agree_here():
    lib = kiln._C._build_info()
    for key, value in kiln._C._extension_build_info.items():
        assert lib[key] == value, key
    assert os.path.basename(lib["library_path"]).startswith("libkiln")


def test_version_module():
    assert kiln.__version__ == kiln.version.__version__
    pyproject = (pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'version = "{kiln.__version__}"' in pyproject
    if kiln.cuda.is_built():
        assert re.fullmatch(r"\d+\.\d+", kiln.version.cuda)
        major, minor = map(int, kiln.version.cuda.split("."))
        assert kiln._C._cuda_runtime_version() == major * 1000 + minor * 10
    else:
        assert kiln.version.cuda is None
    assert kiln.version.debug is False or kiln._C._build_info()["build_type"] == "Debug"


def test_nccl_version():
    if not kiln.distributed.is_nccl_available():
        with pytest.raises(RuntimeError, match=r"\[nccl.version\]"):
            kiln.cuda.nccl.version()
        return
    v = kiln.cuda.nccl.version()
    assert isinstance(v, tuple) and len(v) == 3 and all(type(x) is int for x in v)
    assert v >= (2, 0, 0)
    assert kiln.cuda.nccl.is_available([kiln.zeros(2)]) is False


def test_cudnn_version():
    v = kiln.backends.cudnn.version()
    if kiln._C._build_info()["cudnn"] == "OFF":
        assert v is None
    elif v is not None:
        assert type(v) is int and v >= 90000
        assert kiln.backends.cudnn.is_available()


# --- on the GPU machine --------------------------------------------------------------------


@requires_gpu
def test_doctor_cuda_checks_pass_on_a_gpu():
    checks = {c.name: c for c in doctor.run_checks()}
    for name in CUDA_CHECKS | {"extension", "same build"}:
        assert checks[name].status == "OK", checks[name]
    # cuDNN may be absent on a GPU machine: that is a WARN (slower convolutions), never a FAIL.
    assert checks["cudnn"].status in ("OK", "WARN"), checks["cudnn"]
    if gpu_count() > 1:
        assert checks["nccl"].status == "OK", checks["nccl"]


@requires_gpu
def test_collect_env_lists_the_gpus():
    text = collect_env.get_pretty_env_info()
    name = kiln.cuda.get_device_name(0)
    assert f"GPU 0: {name} (sm_" in text
    assert "Nvidia driver version: not found" not in text
