"""Embedding kiln in C++ (roadmap capability 8): installs the current build tree into a
temporary prefix, builds examples/cpp/digits_inference and examples/cpp/run_exported against it
with find_package(kiln) (and against libkiln.a when the build has KILN_BUILD_STATIC), checks
that the C++ programs compute what Python computes, that the file digits_inference writes loads
in Python, and that the install holds exactly the public headers (cmake/public_headers.txt).

The build tree is $BUILD_DIR when set, else <repo>/build (the Makefile's default).
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.nn as nn

REPO = Path(kiln.__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "cpp" / "digits_inference"
RUN_EXPORTED = REPO / "examples" / "cpp" / "run_exported"
TIMEOUT = 120  # seconds for each cmake step; a hang fails instead of blocking CI


def _build_dir():
    build = Path(os.environ.get("BUILD_DIR", REPO / "build"))
    return build if build.is_absolute() else REPO / build


def _cached(build, name):
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    return ""


def _run(cmd, **kw):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=TIMEOUT, **kw)
    assert proc.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


# A second outside program: copies a safetensors file through C++ (load, then save with the
# same metadata), so the test sees every dtype cross Python -> C++ -> Python.
COPY_CPP = r"""
#include <iostream>
#include "core/error.h"
#include "runtime/safetensors.h"
int main(int argc, char** argv) {
  try {
    kiln::SafetensorsFile f = kiln::load_safetensors(argv[1]);
    kiln::save_safetensors(argv[2], f.tensors, f.metadata_json);
  } catch (const kiln::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
"""
COPY_CMAKE = """
cmake_minimum_required(VERSION 3.16)
project(safetensors_copy LANGUAGES CXX)
find_package(kiln CONFIG REQUIRED)
add_executable(safetensors_copy main.cpp)
target_link_libraries(safetensors_copy PRIVATE kiln::kiln)
"""


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    """A fresh install of the current build tree: its prefix, and a function that builds an
    outside program against it."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    build = _build_dir()
    if not (build / "CMakeCache.txt").is_file() or not (build / "cmake_install.cmake").is_file():
        pytest.skip(f"no configured kiln build tree at {build} (set BUILD_DIR)")
    compiler = _cached(build, "CMAKE_CXX_COMPILER")
    if not compiler or shutil.which(compiler) is None:
        pytest.skip(f"the C++ compiler of {build} ({compiler or 'none'}) is not available")
    root = tmp_path_factory.mktemp("cpp_embedding")
    prefix = root / "prefix"
    _run([cmake, "--install", build, "--prefix", prefix])
    targets = (prefix / "lib" / "cmake" / "kiln" / "kilnTargets.cmake").read_text()
    # The installed package must not point back into the checkout or the build tree.
    assert str(REPO) not in targets and str(build.resolve()) not in targets
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []

    def build_program(source, name, *cmake_args):
        binary = root / f"{name}{'-'.join(('',) + cmake_args)}-build"
        _run([cmake, "-S", source, "-B", binary, *generator, f"-DCMAKE_PREFIX_PATH={prefix}",
              f"-DCMAKE_CXX_COMPILER={compiler}", "-DCMAKE_BUILD_TYPE=Release", *cmake_args])
        _run([cmake, "--build", binary])
        assert (binary / name).is_file()
        return binary / name

    return prefix, build_program


@pytest.fixture(scope="module")
def installed(install):
    return install[1]


@pytest.fixture(scope="module")
def digits_inference(installed):
    return installed(EXAMPLE, "digits_inference")


@pytest.fixture(scope="module")
def safetensors_copy(installed, tmp_path_factory):
    source = tmp_path_factory.mktemp("copy_src")
    (source / "main.cpp").write_text(COPY_CPP)
    (source / "CMakeLists.txt").write_text(COPY_CMAKE)
    return installed(source, "safetensors_copy")


def _model():
    kiln.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(),
                         nn.Linear(16, 10))


def test_cpp_predicts_like_python(digits_inference, tmp_path):
    model = _model()
    checkpoint = tmp_path / "mlp.safetensors"
    # The layout examples/train_digits.py writes: the state dict nested under "model".
    kiln.save({"model": model.state_dict(), "epochs": 1, "test_accuracy": 0.5}, checkpoint)
    features = np.random.default_rng(0).random((37, 64), dtype=np.float32)
    features_path = tmp_path / "features.f32"
    features.tofile(features_path)
    with kiln.no_grad():
        logits = model(kiln.from_numpy(features)).numpy()
    expected = logits.argmax(axis=1)

    out = tmp_path / "predictions.safetensors"
    stdout = _run([digits_inference, checkpoint, features_path, out])
    rows = [line.split("\t") for line in stdout.strip().splitlines()]
    assert len(rows) == len(features)
    printed_predictions = np.array([int(p) for p, _ in rows])
    printed_logits = np.array([[float(v) for v in ls.split()] for _, ls in rows])
    np.testing.assert_array_equal(printed_predictions, expected)
    np.testing.assert_allclose(printed_logits, logits, rtol=1e-5, atol=1e-5)

    # The file C++ wrote loads in Python, through kiln.load and the safetensors package.
    saved = kiln.load(out)
    assert saved["predictions"].dtype == kiln.int64
    np.testing.assert_array_equal(saved["predictions"].numpy(), expected)
    np.testing.assert_allclose(saved["logits"].numpy(), logits, rtol=1e-5, atol=1e-5)
    st = pytest.importorskip("safetensors.numpy")
    np.testing.assert_array_equal(st.load_file(str(out))["logits"], saved["logits"].numpy())


def test_cpp_names_the_bad_input(digits_inference, tmp_path):
    kiln.save({"model": _model().state_dict()}, tmp_path / "mlp.safetensors")
    (tmp_path / "features.f32").write_bytes(np.zeros(65, np.float32).tobytes())
    proc = subprocess.run([str(digits_inference), str(tmp_path / "mlp.safetensors"),
                           str(tmp_path / "features.f32")], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 1
    assert "not a whole number of rows of 64 float32 values" in proc.stderr

    corrupt = tmp_path / "corrupt.safetensors"
    data = (tmp_path / "mlp.safetensors").read_bytes()
    corrupt.write_bytes(data[:-4])  # the last tensor's range now runs past the end
    proc = subprocess.run([str(digits_inference), str(corrupt), str(tmp_path / "features.f32")],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 1
    assert f"[load_safetensors] {corrupt}: tensor '" in proc.stderr
    assert "run past the data region" in proc.stderr


def test_every_dtype_crosses_python_cpp_python(safetensors_copy, tmp_path):
    g = kiln.Generator().manual_seed(0)
    base = kiln.randn(4, 6, generator=g)
    tensors = {
        "float64": base.double(), "float32": base.t(),  # a transposed view: saved contiguous
        "float16": base.half(), "bfloat16": base.bfloat16(), "int64": (base * 100).long(),
        "int32": (base * 100).int(), "int16": (base * 100).short(), "int8": (base * 10).char(),
        "uint8": (base.abs() * 10).byte(), "bool": base > 0,
        "scalar": kiln.tensor(2.5), "empty": kiln.zeros(0, 3, dtype=kiln.int32),
    }
    saved = {"model": tensors, "epochs": 3, "name": "caf\u00e9 \"q\"", "shape": (4, 6)}
    src, dst = tmp_path / "python.safetensors", tmp_path / "cpp.safetensors"
    kiln.save(saved, src)
    _run([safetensors_copy, src, dst])
    back = kiln.load(dst)
    assert {k: v for k, v in back.items() if k != "model"} == {
        "epochs": 3, "name": "caf\u00e9 \"q\"", "shape": (4, 6)}
    assert list(back["model"]) == list(tensors)
    for key, t in tensors.items():
        got = back["model"][key]
        assert got.dtype == t.dtype and got.shape == t.shape, key
        np.testing.assert_array_equal(got.float().numpy() if key == "bfloat16" else got.numpy(),
                                      t.float().numpy() if key == "bfloat16" else t.numpy())


def test_safetensors_package_files_cross_cpp(safetensors_copy, tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(1)
    arrays = {"f16": rng.standard_normal((3, 2)).astype(np.float16),
              "u8": rng.integers(0, 255, (5,), dtype=np.uint8),
              "b": rng.random((2, 2)) > 0.5, "i64": rng.integers(-9, 9, (), dtype=np.int64)}
    src, dst = tmp_path / "package.safetensors", tmp_path / "cpp.safetensors"
    st.save_file(arrays, str(src), metadata={"format": "np"})
    _run([safetensors_copy, src, dst])
    back = st.load_file(str(dst))
    assert back.keys() == arrays.keys()
    for key, a in arrays.items():
        assert back[key].dtype == a.dtype and back[key].shape == a.shape, key
        np.testing.assert_array_equal(back[key], a)
    from safetensors import safe_open
    with safe_open(str(dst), framework="np") as f:
        assert f.metadata() == {"format": "np"}


def test_install_ships_exactly_the_public_headers(install):
    prefix, _ = install
    listed = {line.split("#")[0].strip()
              for line in (REPO / "cmake" / "public_headers.txt").read_text().splitlines()}
    listed.discard("")
    include = prefix / "include" / "kiln"
    installed_headers = {str(p.relative_to(include)) for p in include.rglob("*") if p.is_file()}
    assert installed_headers == listed
    # Internal headers a program must not reach: the CPU loops, the CUDA internals.
    assert not (include / "ops" / "cpu").exists()
    assert not (include / "cuda" / "internal.h").exists()


def _static_built():
    build = _build_dir()
    return (build / "CMakeCache.txt").is_file() and _cached(build, "KILN_BUILD_STATIC") == "ON"


@pytest.mark.parametrize("link", [
    "shared",
    pytest.param("static", marks=pytest.mark.skipif(
        not _static_built(), reason="the build tree has no KILN_BUILD_STATIC=ON")),
])
def test_run_exported_against_the_install(installed, link, tmp_path):
    export_models = pytest.importorskip("export_models")
    args = ["-DKILN_LINK_STATIC=ON"] if link == "static" else []
    binary = installed(RUN_EXPORTED, "run_exported", *args)
    model, inputs, dims, _ = export_models.MODELS["mlp"](np.random.default_rng(0))
    ep = kiln.export.export(model, inputs, dynamic_shapes=dims)
    path = tmp_path / "mlp.kiln"
    kiln.export.save(ep, path)
    names = [e["name"] for e in ep.graph.data["inputs"]]
    kiln.save(dict(zip(names, inputs)), tmp_path / "in.safetensors")
    _run([binary, path, tmp_path / "in.safetensors", "--out", tmp_path / "out.safetensors"])
    with kiln.no_grad():
        expected = export_models.first(model(*inputs)).numpy()
    np.testing.assert_allclose(kiln.load(tmp_path / "out.safetensors")["output0"].numpy(),
                               expected, rtol=1e-5, atol=1e-5)
