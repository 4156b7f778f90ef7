"""scripts/check_layers.py (Note [Layers]): the source tree passes, and a copy of it with one
planted wrong include fails, naming the file, the line and both layers."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check_layers.py"
COPIED = ["core", "autograd", "ops", "cuda", "runtime", "distributed", "python", "examples/cpp",
          "cmake"]


def _check(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def tree(tmp_path):
    """A copy of the sources the script reads (no build outputs, no Python package)."""
    for folder in COPIED:
        shutil.copytree(REPO / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("kiln", "*.so", "__pycache__"))
    return tmp_path


def _plant(root, path, line):
    f = root / path
    f.write_text(f.read_text() + line + "\n")
    return len(f.read_text().splitlines())


def test_source_tree_keeps_its_layers():
    proc = _check(REPO)
    assert proc.returncode == 0, proc.stderr


def test_copy_of_the_tree_passes(tree):
    proc = _check(tree)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("path, header, mine, theirs", [
    ("core/tensor.h", "ops/copy.h", "core", "ops"),  # core calling a front end
    ("cuda/copy.cpp", "ops/creation.h", "cuda", "ops"),  # a backend calling a front end
    ("ops/cpu/copy_kernels.cpp", "cuda/runtime.h", "cpu", "cuda"),  # the CPU seeing CUDA
    ("ops/cpu/copy_kernels.cpp", "autograd/function.h", "cpu", "ops"),
    ("ops/dispatch.h", "ops/elementwise.h", "contract", "ops"),  # the contract seeing ops
    ("ops/binary.cpp", "runtime/program.h", "ops", "runtime"),
    ("runtime/program.cpp", "distributed/store.h", "runtime", "distributed"),
    ("distributed/store.cpp", "python/casters.h", "distributed", "python"),
])
def test_planted_upward_include_fails(tree, path, header, mine, theirs):
    line = _plant(tree, path, f'#include "{header}"')
    proc = _check(tree)
    assert proc.returncode == 1
    assert (f"{path}:{line}: layer '{mine}' includes \"{header}\" of layer '{theirs}'"
            in proc.stderr), proc.stderr
    assert "1 layering error(s)" in proc.stderr


def test_downward_and_sideways_includes_pass(tree):
    _plant(tree, "ops/binary.cpp", '#include "cuda/runtime.h"')  # ops sits above cuda
    _plant(tree, "cuda/copy.cpp", '#include "ops/generator.h"')  # the contract, by file
    _plant(tree, "python/convert.cpp", '#include "runtime/program.h"')
    proc = _check(tree)
    assert proc.returncode == 0, proc.stderr


def test_example_may_include_only_public_headers(tree):
    line = _plant(tree, "examples/cpp/run_exported/main.cpp", '#include "ops/cpu/loops.h"')
    proc = _check(tree)
    assert proc.returncode == 1
    assert f"examples/cpp/run_exported/main.cpp:{line}: the C++ examples may include only " \
           "public headers" in proc.stderr


def test_public_header_must_not_include_a_private_one(tree):
    line = _plant(tree, "core/tensor.h", '#include "core/json.h"')
    proc = _check(tree)
    assert proc.returncode == 1
    assert f"core/tensor.h:{line}: public header includes \"core/json.h\"" in proc.stderr


def test_listed_public_header_must_exist(tree):
    _plant(tree, "cmake/public_headers.txt", "ops/no_such_header.h")
    proc = _check(tree)
    assert proc.returncode == 1
    assert "ops/no_such_header.h does not exist" in proc.stderr


def test_cudnn_convolution_calling_a_front_end_fails(tree):
    # The one upward call the check used to excuse: cuDNN convolution now gets its operands
    # laid out by ops/conv.cpp, and including a front end again is an ordinary error.
    line = _plant(tree, "cuda/cudnn_conv.cpp", '#include "ops/view.h"')
    proc = _check(tree)
    assert proc.returncode == 1
    assert (f"cuda/cudnn_conv.cpp:{line}: layer 'cuda' includes \"ops/view.h\" of layer 'ops'"
            in proc.stderr), proc.stderr


def test_dag_lists_each_layer_with_what_it_may_include():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--print-dag"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0
    dag = dict(line.split(": ") for line in proc.stdout.strip().splitlines())
    assert dag["core"] == "core"
    assert dag["cpu"] == "core contract cpu"
    assert dag["cuda"] == "core contract cuda"
    assert "runtime" not in dag["distributed"].split()
