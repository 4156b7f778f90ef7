"""Python -> C++: models exported and saved in Python run in examples/cpp/run_exported (the C++
runtime, no Python in the process) with outputs equal to eager Python within 1e-5, and 8 threads
running one loaded program compute what one thread does. ctest runs this file with
KILN_RUN_EXPORTED pointing at the binary; without it the build tree's binary is used, and the
tests skip when there is none."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln
from export_models import MODELS, first
from helpers import requires_gpu

REPO = Path(__file__).resolve().parents[2]


def _binary():
    path = os.environ.get("KILN_RUN_EXPORTED")
    if path:
        return Path(path)
    build = Path(os.environ.get("BUILD_DIR", REPO / "build"))
    return (build if build.is_absolute() else REPO / build) / "run_exported"


BINARY = _binary()
pytestmark = pytest.mark.skipif(not BINARY.exists(), reason=f"{BINARY} is not built")


def run_cpp(model_path, inputs, tmp_path, *extra):
    in_path, out_path = tmp_path / "inputs.safetensors", tmp_path / "outputs.safetensors"
    kiln.save(inputs, in_path)
    proc = subprocess.run([str(BINARY), str(model_path), str(in_path), "--out", str(out_path),
                           *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return kiln.load(out_path), proc.stdout


def export_case(name, tmp_path):
    model, args, dims, others = MODELS[name](np.random.default_rng(0))
    ep = kiln.export.export(model, args, dynamic_shapes=dims)
    path = tmp_path / f"{name}.kiln"
    kiln.export.save(ep, path)
    return model, ep, path, [args] + others


@pytest.mark.parametrize("name", list(MODELS))
def test_cpp_runtime_matches_eager_python(name, tmp_path):
    model, ep, path, cases = export_case(name, tmp_path)
    names = [e["name"] for e in ep.graph.data["inputs"]]
    for args in cases:
        outs, stdout = run_cpp(path, dict(zip(names, args)), tmp_path)
        with kiln.no_grad():
            expected = first(model(*args))
        np.testing.assert_allclose(outs["output0"].numpy(), expected.numpy(), rtol=1e-5,
                                   atol=1e-5)
        assert "latency:" in stdout


@pytest.mark.parametrize("name", ["mlp", "encoder", "gpt"])
def test_cpp_runtime_runs_autocast_regions_in_bf16(name, tmp_path):
    model, args, dims, others = MODELS[name](np.random.default_rng(0))
    with kiln.autocast("cpu"):
        ep = kiln.export.export(model, args, dynamic_shapes=dims)
    path = tmp_path / f"{name}.kiln"
    kiln.export.save(ep, path)
    names = [e["name"] for e in ep.graph.data["inputs"]]
    for a in [args] + others:
        outs, _ = run_cpp(path, dict(zip(names, a)), tmp_path, "--threads", "4")
        with kiln.no_grad(), kiln.autocast("cpu"):
            expected = first(model(*a))
        assert outs["output0"].dtype == expected.dtype
        np.testing.assert_array_equal(outs["output0"].float().numpy(),
                                      expected.float().numpy())


@pytest.mark.parametrize("name", ["mlp", "gpt"])
def test_eight_threads_share_one_program(name, tmp_path):
    _, ep, path, cases = export_case(name, tmp_path)
    names = [e["name"] for e in ep.graph.data["inputs"]]
    _, stdout = run_cpp(path, dict(zip(names, cases[0])), tmp_path, "--threads", "8",
                        "--repeat", "5")
    assert "8 threads x 5 runs: same outputs" in stdout


def test_cpp_errors_are_messages_not_crashes(tmp_path):
    _, ep, path, cases = export_case("mlp", tmp_path)
    in_path = tmp_path / "inputs.safetensors"
    kiln.save({"input": kiln.randn(5000, 64)}, in_path)
    proc = subprocess.run([str(BINARY), str(path), str(in_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert "dim 0 (batch) is 5000, outside the exported range [1, 4096]" in proc.stderr
    bad = tmp_path / "bad.kiln"
    bad.write_bytes(path.read_bytes()[:100])
    proc = subprocess.run([str(BINARY), str(bad), str(in_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and "[load_safetensors]" in proc.stderr


@requires_gpu
@pytest.mark.parametrize("name", list(MODELS))
def test_cpp_runtime_on_cuda(name, tmp_path):
    model, ep, path, cases = export_case(name, tmp_path)
    names = [e["name"] for e in ep.graph.data["inputs"]]
    outs, _ = run_cpp(path, dict(zip(names, cases[0])), tmp_path, "--device", "cuda:0",
                      "--threads", "8", "--repeat", "3")
    with kiln.no_grad():
        expected = first(model(*cases[0]))
    np.testing.assert_allclose(outs["output0"].numpy(), expected.numpy(), rtol=1e-4, atol=1e-4)
