"""Inference of exported models (issue 16): the C++ runtime (examples/cpp/run_exported, no
Python in the process) next to kiln's eager Python and PyTorch's eager Python on the same
models with the same weights, at batch 1 (latency: host overhead dominates) and batch 64
(throughput). Printed as one table per device, milliseconds per forward, lower is better:

  * MLP 784-512-512-10 (Linear + ReLU);
  * CNN: examples/train_cnn.py's model (three conv/batch-norm/ReLU blocks, pools, linear)
    on 32x32 single-channel images;
  * transformer encoder: nn.TransformerEncoderLayer(256, 4 heads, 1024 wide, batch first)
    on sequences of 64.

Every side times each forward on its own until its results are ready (a device sync after
each call on the GPU), after warm-up, and reports the median of --iters calls: what a caller
serving one request at a time sees. kiln's eager outputs are checked against the C++
runtime's (within 1e-4) and PyTorch's (same weights, copied through NumPy).

    PYTHONPATH=python python3 benchmarks/export_inference.py [--device cpu cuda] [--iters N]

Without PyTorch (or with --no-torch) its column is n/a; without build/run_exported the C++
column is n/a.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import kiln
from kiln.export import Dim

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

try:
    import torch
except ImportError:
    torch = None

BATCHES = (1, 64)


def mlp(mod):
    nn = mod.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def cnn(mod):
    nn = mod.nn

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(*block(1, 16), nn.MaxPool2d(2), *block(16, 32), nn.MaxPool2d(2),
                         *block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.1), nn.Linear(64, 10))


def encoder(mod):
    return mod.nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.1,
                                          batch_first=True)


# name -> (builder, input shape without the batch, dynamic dims of the input)
MODELS = {
    "mlp": (mlp, (784,), {0: "batch"}),
    "cnn": (cnn, (1, 32, 32), {0: "batch"}),
    "encoder": (encoder, (64, 256), {0: "batch"}),
}


def median_ms(fn, sync, iters, warmup):
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def run_exported_binary():
    build = Path(os.environ.get("BUILD_DIR", REPO / "build"))
    path = (build if build.is_absolute() else REPO / build) / "run_exported"
    return path if path.exists() else None


def cpp_ms(binary, model_path, inputs_path, device, iters):
    """The C++ runtime's median latency (it prints 'latency: X ms median, ...') and its
    outputs."""
    out_path = Path(inputs_path).with_name("outputs.safetensors")
    proc = subprocess.run([str(binary), str(model_path), str(inputs_path), "--device", device,
                           "--repeat", str(iters), "--out", str(out_path)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"run_exported failed:\n{proc.stdout}{proc.stderr}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("latency:"))
    return float(line.split()[1]), kiln.load(out_path)["output0"]


def torch_twin(name, kiln_model, device):
    """PyTorch's model of the same architecture holding kiln's weights."""
    model = MODELS[name][0](torch)
    state = {k: torch.from_numpy(v.cpu().numpy().copy())
             for k, v in kiln_model.state_dict().items()}
    model.load_state_dict(state)
    return model.eval().to(device)


def measure(name, device, iters, workdir, binary, use_torch):
    builder, shape, dims = MODELS[name]
    kiln.manual_seed(0)
    model = builder(kiln).eval()
    rng = np.random.default_rng(0)
    sample = kiln.from_numpy(rng.standard_normal((7, *shape)).astype(np.float32))
    dynamic = {"input" if name != "encoder" else "src":
               {axis: Dim(label, min=1, max=1024) for axis, label in dims.items()}}
    ep = kiln.export.export(model, (sample,), dynamic_shapes=dynamic)
    model_path = Path(workdir) / f"{name}.kiln"
    kiln.export.save(ep, model_path)
    input_name = ep.graph.data["inputs"][0]["name"]

    model = model.to(device)
    twin = torch_twin(name, model, device) if use_torch else None
    sync_kiln = kiln.cuda.synchronize if device == "cuda" else (lambda: None)
    sync_torch = (torch.cuda.synchronize if device == "cuda" else (lambda: None)) if twin \
        else None
    rows = []
    for batch in BATCHES:
        host = rng.standard_normal((batch, *shape)).astype(np.float32)
        x = kiln.from_numpy(host).to(device)
        with kiln.no_grad():
            expected = model(x)
            eager = median_ms(lambda: model(x), sync_kiln, iters, warmup=max(iters // 10, 3))
        cpp = None
        if binary is not None:
            inputs_path = Path(workdir) / f"{name}_{batch}.safetensors"
            kiln.save({input_name: kiln.from_numpy(host)}, inputs_path)
            cpp, out = cpp_ms(binary, model_path, inputs_path, device if device == "cpu"
                              else "cuda:0", iters)
            np.testing.assert_allclose(out.numpy(), expected.cpu().numpy(), rtol=1e-4,
                                       atol=1e-4)
        ref = None
        if twin is not None:
            tx = torch.from_numpy(host).to(device)
            with torch.no_grad():
                np.testing.assert_allclose(twin(tx).cpu().numpy(), expected.cpu().numpy(),
                                           rtol=1e-3, atol=1e-3)
                ref = median_ms(lambda: twin(tx), sync_torch, iters, warmup=max(iters // 10, 3))
        rows.append((name, batch, cpp, eager, ref))
    return rows


def fmt(value):
    return "n/a" if value is None else f"{value:.3f}"


def ratio(a, b):
    return "n/a" if a is None or b is None else f"{a / b:.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", nargs="+", choices=["cpu", "cuda"], default=None)
    parser.add_argument("--only", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    devices = args.device or (["cpu", "cuda"] if kiln.cuda.is_available() else ["cpu"])
    use_torch = torch is not None and not args.no_torch
    binary = run_exported_binary()
    if use_torch:
        torch.set_num_threads(kiln.get_num_threads())
    with tempfile.TemporaryDirectory() as workdir:
        for device in devices:
            print(f"\n{device}: milliseconds per forward (median of {args.iters}), "
                  f"{kiln.get_num_threads()} CPU threads")
            print("| model | batch | C++ runtime | kiln eager | PyTorch eager "
                  "| C++ / PyTorch | C++ / kiln eager |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for name in args.only:
                for row in measure(name, device, args.iters, workdir, binary, use_torch):
                    model, batch, cpp, eager, ref = row
                    print(f"| {model} | {batch} | {fmt(cpp)} | {fmt(eager)} | {fmt(ref)} "
                          f"| {ratio(cpp, ref)} | {ratio(cpp, eager)} |", flush=True)


if __name__ == "__main__":
    main()
