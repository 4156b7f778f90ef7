"""Every workload of docs/benchmarks.md, kiln and PyTorch side by side in one
run on the GPU, printed as one table (kiln, PyTorch, ratio). Each workload's
ratio is arranged so that < 1 means kiln is faster or uses less time; for
throughputs (GB/s, TFLOP/s) the ratio is PyTorch / kiln for the same reason.

    PYTHONPATH=python:benchmarks python3 benchmarks/suite.py [--only NAME ...]
"""

import argparse
import numpy as np

import kiln
import ops
import optim as optim_bench
import training
from timing import per_call_us

try:
    import torch
except ImportError:
    torch = None


def step_ms(mod, step, device, iters=20, repeats=5):
    """Milliseconds per training step, the clock stopped after a device sync."""
    sync = mod.cuda.synchronize if device == "cuda" else None
    return per_call_us(step, iters, repeats=repeats, sync=sync, warmup=3,
                       include_device=True) / 1e3


class Phases:
    """One training step as three calls, so benchmarks/step_phases.py can time
    them apart: forward (to the loss), backward, and the optimizer's part."""

    def __init__(self, forward, backward, update):
        self.forward, self.backward, self.update = forward, backward, update
        self.loss = None

    def step(self):
        self.loss = self.forward()
        self.backward(self.loss)
        self.update()


def wide_mlp(mod, mode, device="cuda", width=4096, batch=8192):
    """Sequential(4 x [Linear(4096,4096), GELU], Linear(4096,1000)), batch 8192, Adam, in
    fp32, bf16 autocast or fp16 autocast + GradScaler."""
    nn = mod.nn
    mod.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(width, width), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(width, 1000)).to(device)
    optimizer = mod.optim.Adam(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    x = mod.tensor(rng.standard_normal((batch, width), dtype=np.float32), device=device)
    y = mod.tensor(rng.integers(0, 1000, batch), device=device)
    scaler = mod.amp.GradScaler(device) if mode == "fp16" else None
    dtype = {"bf16": mod.bfloat16, "fp16": mod.float16}.get(mode)

    def forward():
        optimizer.zero_grad()
        with mod.autocast(device, dtype=dtype or mod.bfloat16, enabled=dtype is not None):
            return nn.functional.cross_entropy(model(x), y)

    def backward(loss):
        (loss if scaler is None else scaler.scale(loss)).backward()

    def update():
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()

    return Phases(forward, backward, update)


def wide_mlp_step(mod, mode):
    return step_ms(mod, wide_mlp(mod, mode).step, "cuda", iters=5, repeats=3)


def cnn(mod, bf16, device="cuda", batch=256):
    """The convolution issue's network, batch 256 on 3x32x32, Adam, TF32 convolutions off."""
    nn = mod.nn
    mod.manual_seed(0)
    mod.backends.cudnn.allow_tf32 = False

    def block(cin, cout, pool):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU()] + ([nn.MaxPool2d(2)] if pool else [])

    model = nn.Sequential(*block(3, 64, False), *block(64, 128, True), *block(128, 256, True),
                          *block(256, 512, False), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(512, 10)).to(device)
    optimizer = mod.optim.Adam(model.parameters())
    rng = np.random.default_rng(0)
    x = mod.tensor(rng.standard_normal((batch, 3, 32, 32), dtype=np.float32), device=device)
    y = mod.tensor(rng.integers(0, 10, batch), device=device)

    def forward():
        optimizer.zero_grad()
        with mod.autocast(device, dtype=mod.bfloat16, enabled=bf16):
            return nn.functional.cross_entropy(model(x), y)

    return Phases(forward, lambda loss: loss.backward(), optimizer.step)


def cnn_step(mod, bf16):
    return step_ms(mod, cnn(mod, bf16).step, "cuda", iters=10, repeats=3)


def gemm_tflops(mod, dtype_name, m=8192):
    dtype = getattr(mod, dtype_name)
    a = mod.randn(m, m, device="cuda").to(dtype)
    b = mod.randn(m, m, device="cuda").to(dtype)
    return 2 * m**3 / (ops.device_ms(mod, lambda: a @ b) * 1e-3) / 1e12


# name -> (unit, higher_is_better, fn(mod))
WORKLOADS = {
    "wide MLP step fp32 (ms)": ("ms", False, lambda mod: wide_mlp_step(mod, "fp32")),
    "wide MLP step bf16 autocast (ms)": ("ms", False, lambda mod: wide_mlp_step(mod, "bf16")),
    "wide MLP step fp16 + GradScaler (ms)": ("ms", False,
                                             lambda mod: wide_mlp_step(mod, "fp16")),
    "GEMM 8192^3 bf16 (TFLOP/s)": ("TFLOP/s", True, lambda mod: gemm_tflops(mod, "bfloat16")),
    "GEMM 8192^3 fp16 (TFLOP/s)": ("TFLOP/s", True, lambda mod: gemm_tflops(mod, "float16")),
    "CNN step fp32 (ms)": ("ms", False, lambda mod: cnn_step(mod, bf16=False)),
    "CNN step bf16 autocast (ms)": ("ms", False, lambda mod: cnn_step(mod, bf16=True)),
    "MLP 784-512-10 Adam step (us)": ("us", False,
                                      lambda mod: training.mlp_step_us(mod, "cuda")),
}


def op_level(mod):
    """benchmarks/ops.py's workloads; throughputs are higher-is-better."""
    return {name: (value, name.endswith("GB/s") or name.endswith("TFLOP/s"))
            for name, value in ops.run(mod).items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", help="substrings of the workload names to run")
    args = parser.parse_args()
    if not kiln.cuda.is_available():
        raise SystemExit("benchmarks/suite.py needs a CUDA device (the GPU machine)")
    wanted = (lambda name: any(s in name for s in args.only)) if args.only else (lambda _: True)

    rows = []
    libs = [kiln] + ([torch] if torch is not None else [])
    results = {lib.__name__: op_level(lib) for lib in libs} if wanted("op") else {}
    for name in (results.get("kiln") or {}):
        k, higher = results["kiln"][name]
        t = results.get("torch", {}).get(name, (None, higher))[0]
        rows.append((name, k, t, higher))
    for name, (_, higher, fn) in WORKLOADS.items():
        if not wanted(name):
            continue
        k = fn(kiln)
        t = fn(torch) if torch is not None else None
        rows.append((name, k, t, higher))
    shapes = optim_bench.gpt_like_shapes()
    if wanted("Adam 124M"):
        k = optim_bench.step_us(kiln, optim_bench.make(kiln, shapes, "cuda"), "cuda", 20)
        t = (optim_bench.step_us(torch, optim_bench.make(torch, shapes, "cuda", fused=True),
                                 "cuda", 20) if torch is not None else None)
        rows.append(("Adam 124M params / 150 tensors (us, torch fused)", k, t, False))

    print(f"{'workload':52s}{'kiln':>12s}{'torch':>12s}{'ratio':>8s}")
    for name, k, t, higher in rows:
        ratio = (t / k if higher else k / t) if t else float("nan")
        print(f"{name:52s}{k:12.2f}{(t if t else float('nan')):12.2f}{ratio:8.2f}")
    print("ratio < 1: kiln faster (time: kiln/torch; throughput: torch/kiln)")


if __name__ == "__main__":
    main()
