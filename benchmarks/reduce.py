"""Reductions, kiln vs PyTorch on the same GPU (issue 3's table; Note [CUDA reductions]).

Run on the GPU machine after kiln is built:
    PYTHONPATH=python python3 benchmarks/reduce.py
    PYTHONPATH=python python3 benchmarks/reduce.py --device cpu --small   # smoke run, no GPU
Each case times `reps` back-to-back calls between two events (CUDA events on the GPU, the host
clock after a sync elsewhere), median over repeats, after warm-up. GB/s counts the bytes the
reduction reads once. The last column is max |kiln - reference| / max |reference|, the
reference being PyTorch's result (NumPy's without PyTorch).
"""

import argparse
import statistics
import time

import numpy as np

import kiln

try:
    import torch
except ImportError:
    torch = None


def case_list(small):
    s = 8 if small else 1  # the smoke run divides the long dims
    return [
        ("sum of 2**28 floats", (2**28 // s**3,), lambda m, x: m.sum(x)),
        ("sum dim 0 of [8192, 4096]", (8192 // s, 4096 // s), lambda m, x: m.sum(x, 0)),
        ("sum dim -1 of [8192, 4096]", (8192 // s, 4096 // s), lambda m, x: m.sum(x, -1)),
        ("sum dims (0,2,3) of [256, 64, 32, 32]", (256 // s, 64, 32, 32),
         lambda m, x: m.sum(x, (0, 2, 3))),
        ("all(isfinite(x)) of 16M floats", (2**24 // s**2,), lambda m, x: m.isfinite(x).all()),
        ("amax of 16M floats", (2**24 // s**2,), lambda m, x: m.amax(x)),
        ("sum dim 0 of [8192, 4096] bf16", (8192 // s, 4096 // s),
         lambda m, x: m.sum(x.to(m.bfloat16), 0)),
    ]


def timer(mod, device):
    def sync():
        if device == "cuda":
            mod.cuda.synchronize()

    def run(fn, reps=20, repeats=9):
        fn()
        sync()
        samples = []
        for _ in range(repeats):
            if device == "cuda":
                start = mod.cuda.Event(enable_timing=True)
                end = mod.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(reps):
                    fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) / reps)
            else:
                t0 = time.perf_counter()
                for _ in range(reps):
                    fn()
                samples.append((time.perf_counter() - t0) * 1e3 / reps)
        return statistics.median(samples)

    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="smaller tensors (smoke run)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    k_time = timer(kiln, args.device)
    t_time = timer(torch, args.device) if torch is not None else None
    head = f"{'case':40s}{'kiln ms':>10s}{'kiln GB/s':>11s}{'torch ms':>10s}{'ratio':>8s}  err"
    print(head)
    print("-" * len(head))
    for name, shape, fn in case_list(args.small):
        a = rng.standard_normal(shape, dtype=np.float32)
        kx = kiln.tensor(a, device=args.device)
        k_ms = k_time(lambda: fn(kiln, kx))
        gbps = a.nbytes / (k_ms * 1e-3) / 1e9
        got = fn(kiln, kx).float().cpu().numpy().astype(np.float64)
        if torch is not None:
            tx = torch.tensor(a, device=args.device)
            t_ms = t_time(lambda: fn(torch, tx))
            ref = fn(torch, tx).float().cpu().numpy().astype(np.float64)
            t_col, ratio = f"{t_ms:10.3f}", f"{k_ms / t_ms:8.2f}"
        else:
            ref = np.asarray(fn(np, a.astype(np.float64)) if "bf16" not in name else got)
            if "isfinite" in name:
                ref = np.isfinite(a).all()
            t_col, ratio = f"{'-':>10s}", f"{'-':>8s}"
        err = np.max(np.abs(got - ref), initial=0.0) / (np.max(np.abs(ref), initial=0.0) + 1e-30)
        print(f"{name:40s}{k_ms:10.3f}{gbps:11.1f}{t_col}{ratio}  {err:.1e}")


if __name__ == "__main__":
    main()
