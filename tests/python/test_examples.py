"""The examples run as documented: the PyTorch snippet with only the import
changed, and the digits training that `make train` runs."""

import os
import re
import subprocess
import sys

import pytest

import kiln
from helpers import requires_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import seed_snippet  # noqa: E402


def test_pytorch_snippet_trains_on_the_best_device():
    losses = seed_snippet.main(steps=50)
    assert len(losses) == 50
    assert losses[-1] < 0.5 * losses[0]
    assert all(b <= a * 1.5 for a, b in zip(losses, losses[1:]))  # no blow-up along the way


def test_digits_example_reaches_accuracy_and_reloads_its_checkpoint(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_digits.py"),
                          "--out", str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    device = "cuda" if kiln.cuda.is_available() else "cpu"
    assert f"digits on {device}" in out.stdout
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", out.stdout).group(1))
    assert accuracy >= 0.97
    assert "predicts identically: True" in out.stdout
    state = kiln.load(str(tmp_path / "digits_mlp.safetensors"))
    assert set(state["model"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert state["epochs"] == 30 and state["optimizer"]["param_groups"][0]["lr"] >= 0


# On the GPU, where mixed precision pays; on the CPU the half-precision GEMMs are slower than
# float32 and the run would take most of a CI minute.
@requires_gpu
@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_digits_example_mixed_precision_reaches_fp32_accuracy(tmp_path, amp):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_digits.py"),
                          "--out", str(tmp_path), "--amp", amp], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"with {amp} autocast" in out.stdout
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", out.stdout).group(1))
    assert accuracy >= 0.97
    scaler_state = kiln.load(str(tmp_path / "digits_mlp.safetensors"))["scaler"]
    assert (scaler_state["scale"] > 0) if amp == "fp16" else scaler_state == {}


@requires_gpu
@pytest.mark.parametrize("amp", ["off", "bf16", "fp16"])
def test_cnn_example_reaches_accuracy_in_every_precision(amp):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_cnn.py"),
                          "--amp", amp], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "on cuda" in out.stdout
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", out.stdout).group(1))
    assert accuracy >= 0.97


def _can_run_two_ranks():
    import kiln.distributed as dist
    two_gpus = kiln.cuda.is_available() and kiln.cuda.device_count() >= 2
    return dist.is_nccl_available() if two_gpus else dist.is_gloo_available()


@pytest.mark.skipif(not _can_run_two_ranks(),
                    reason="needs Gloo (CPU) or NCCL with two GPUs for two ranks")
def test_ddp_example_trains_two_ranks_to_single_process_accuracy(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-m", "kiln.distributed.run", "--standalone",
                          "--nproc-per-node", "2",
                          os.path.join(ROOT, "examples", "train_digits_ddp.py"),
                          "--out", str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "data-parallel on 2 ranks" in out.stdout
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", out.stdout).group(1))
    assert accuracy >= 0.97
    assert "weights identical on every rank: True" in out.stdout
    state = kiln.load(str(tmp_path / "digits_mlp_ddp.safetensors"))
    assert set(state) == {"0.weight", "0.bias", "2.weight", "2.bias"}
