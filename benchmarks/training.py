"""Whole training steps, kiln vs PyTorch side by side on the GPU (the Training
API issue's target): MLP 784-512-10, batch 128, Adam; one step is zero_grad,
forward, cross_entropy, backward, optimizer step. Time per step is the median
over repeats of (many steps, then a device sync) / steps, so it includes the
GPU finishing the work.

    PYTHONPATH=python python3 benchmarks/training.py
"""

import numpy as np

import kiln
from timing import per_call_us

try:
    import torch
except ImportError:
    torch = None


def mlp_step_us(mod, device, iters=300, repeats=7):
    mod.manual_seed(0)
    nn = mod.nn
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10)).to(device)
    optimizer = mod.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = mod.tensor(rng.standard_normal((128, 784), dtype=np.float32), device=device)
    y = mod.tensor(rng.integers(0, 10, 128), device=device)

    def step():
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    sync = mod.cuda.synchronize if device == "cuda" else None
    return per_call_us(step, iters, repeats=repeats, sync=sync, warmup=50, include_device=True)


def main():
    devices = ["cuda"] if kiln.cuda.is_available() else ["cpu"]
    print(f"{'benchmark':46s}{'kiln':>10s}{'torch':>10s}{'kiln/torch':>12s}")
    for device in devices:
        k = mlp_step_us(kiln, device)
        t = mlp_step_us(torch, device) if torch is not None else float("nan")
        print(f"{'MLP 784-512-10 b128 Adam step, ' + device + ' (us)':46s}{k:10.1f}{t:10.1f}"
              f"{k / t:12.2f}")


if __name__ == "__main__":
    main()
