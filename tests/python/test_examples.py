"""The examples run as documented: the PyTorch snippet with only the import
changed, the digits training that `make train` runs, the character-level GPT, and the
transformer benchmark's smoke mode."""

import json
import os
import re
import subprocess
import sys

import numpy as np
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


def test_digits_example_profiles_a_few_steps(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_digits.py"),
                          "--out", str(tmp_path), "--epochs", "1", "--profile"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Self CPU time total" in out.stdout and "kiln::linear" in out.stdout
    trace = json.loads((tmp_path / "digits_trace.json").read_text())
    steps = {e["name"] for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}


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


# Tiny models gain nothing from threads, and on a loaded 2-core CI machine OpenMP's barriers
# waiting for descheduled threads took the GPT run from 3 s to 37 s (PyTorch's CPU run too).
def _one_thread_env():
    return dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS="1")


def test_gpt_example_lowers_the_validation_loss_and_prints_it_last():
    env = _one_thread_env()
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_gpt.py"),
                          "--steps", "40", "--batch-size", "8", "--block-size", "32",
                          "--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--lr", "1e-2",
                          "--warmup", "5", "--eval-interval", "20", "--eval-batches", "4",
                          "--sample-chars", "40"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    val = [float(v) for v in re.findall(r"^step \d+: val loss ([0-9.]+)$", out.stdout, re.M)]
    assert len(val) == 3  # before training, at step 20, at the end
    assert val[-1] < 0.9 * val[0]
    last = out.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"final val loss: [0-9]+\.[0-9]{4}", last)
    assert float(last.split(": ")[1]) == val[-1]
    sample = out.stdout.split("sample:\n")[1].split("\nfinal val loss")[0]
    assert sample.startswith("Once") and len(sample) == 4 + 40


def test_transformer_benchmark_smoke_mode_times_every_workload_on_the_cpu():
    env = _one_thread_env()
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "transformer.py"),
                          "--smoke"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "device: cpu" in out.stdout
    rows = re.findall(r"^(SDPA fwd\+bwd|GPT) .* ms +([0-9.]+) +(\S+)", out.stdout, re.M)
    assert sum(kind == "SDPA fwd+bwd" for kind, _, _ in rows) == 4  # bf16/fp32 x causal/full
    assert sum(kind == "GPT" for kind, _, _ in rows) == 3
    assert all(float(kiln_ms) > 0 for _, kiln_ms, _ in rows)


# The issue asks for the example's validation loss within 2% of PyTorch's; from the same weights
# and batches the two trainings must follow each other step by step (float32: to rounding).
@pytest.mark.parametrize("device, bf16", [("cpu", False),
                                          pytest.param("cuda", False, marks=requires_gpu),
                                          pytest.param("cuda", True, marks=requires_gpu)])
def test_gpt_example_trains_like_pytorch_from_the_same_weights(device, bf16):
    torch = pytest.importorskip("torch")
    import train_gpt

    data = train_gpt.CharData(train_gpt.tales.generate(20000))
    cfg = train_gpt.GPTConfig(vocab_size=len(data.chars), block_size=32, n_layer=2, n_head=2,
                              n_embd=32)
    kiln.manual_seed(0)
    kiln_model = train_gpt.build_gpt(kiln, cfg)
    torch_model = train_gpt.build_gpt(torch, cfg)
    weights = kiln_model.state_dict()
    with torch.no_grad():
        for name, t in torch_model.state_dict().items():
            t.copy_(torch.from_numpy(weights[name].numpy().copy()))
    runs = []
    for mod, model in ((kiln, kiln_model), (torch, torch_model)):
        model.to(device)
        optimizer = train_gpt.adamw(mod, model, lr=3e-3, weight_decay=0.1,
                                    fused=device == "cuda")
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(10):
            x, y = (mod.from_numpy(a).to(device)
                    for a in train_gpt.batch(data.train, rng, 8, cfg.block_size))
            with mod.autocast(device, dtype=mod.bfloat16, enabled=bf16):
                _, loss = model(x, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
        runs.append(losses)
    kiln_losses, torch_losses = runs
    assert kiln_losses[-1] < kiln_losses[0] - 0.1
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=2e-2 if bf16 else 1e-4)
