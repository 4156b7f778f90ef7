"""Optimizer step times, kiln vs PyTorch on the same machine (the Training API issue's targets):

  * MLP 784-512-10 (batch-128 training's parameters), Adam step: kiln <= 0.5x PyTorch (CPU,
    and CUDA when present).
  * Adam over 124M parameters in 150 tensors on CUDA: kiln <= PyTorch's fused=True.

    PYTHONPATH=python python3 benchmarks/optim.py
"""

import numpy as np

import kiln
from timing import per_call_us

try:
    import torch
except ImportError:
    torch = None


def mlp_shapes():
    return [(512, 784), (512,), (10, 512), (10,)]


def gpt_like_shapes():
    # 150 tensors, ~124M values: a 50257 x 768 embedding plus 149 smaller ones.
    shapes = [(50257, 768), (1024, 768)]
    per_block = [(768,), (768,), (2304, 768), (2304,), (768, 768), (768,), (768,), (768,),
                 (3072, 768), (3072,), (768, 3072), (768,)]
    while len(shapes) + len(per_block) <= 148:
        shapes += per_block
    shapes += [(768,)] * (150 - len(shapes))
    return shapes


def make(mod, shapes, device, **kw):
    rng = np.random.default_rng(0)
    params = []
    for s in shapes:
        p = mod.tensor(rng.standard_normal(s).astype(np.float32) * 0.02, device=device)
        p.requires_grad_(True)
        p.grad = mod.tensor(rng.standard_normal(s).astype(np.float32) * 0.01, device=device)
        params.append(p)
    return mod.optim.Adam(params, lr=1e-3, **kw)


def step_us(mod, opt, device, iters):
    sync = mod.cuda.synchronize if device == "cuda" else None
    # The clock stops after a device sync: a step's time includes the GPU's work.
    return per_call_us(opt.step, iters, repeats=5, sync=sync, warmup=5, include_device=True)


def report(label, k, t):
    ratio = f"{k / t:.2f}x" if t else "-"
    print(f"{label:<48} kiln {k:10.1f} us   torch {t if t else float('nan'):10.1f} us   {ratio}")


def main():
    devices = ["cpu"] + (["cuda"] if kiln.cuda.is_available() else [])
    for device in devices:
        k = step_us(kiln, make(kiln, mlp_shapes(), device), device, 200)
        t = step_us(torch, make(torch, mlp_shapes(), device), device, 200) if torch else None
        report(f"Adam step, MLP 784-512-10 ({device})", k, t)
    if "cuda" in devices:
        shapes = gpt_like_shapes()
        n = sum(int(np.prod(s)) for s in shapes)
        k = step_us(kiln, make(kiln, shapes, "cuda"), "cuda", 20)
        t = (step_us(torch, make(torch, shapes, "cuda", fused=True), "cuda", 20)
             if torch else None)
        report(f"Adam step, {n / 1e6:.0f}M params in {len(shapes)} tensors (cuda, torch fused)",
               k, t)


if __name__ == "__main__":
    main()
