"""CPU loop kernels (elementwise, reductions, copies, softmax/layer_norm, an optimizer step)
side by side with PyTorch's CPU build in one process: median milliseconds, kiln on one thread
(the serial baseline), kiln and PyTorch on the same thread count (all cores by default).
Calls of the three columns are interleaved, so a busy shared machine slows them alike.

    PYTHONPATH=python:/work/torch-site python3 benchmarks/cpu_loops.py [--threads N] [--reps R]
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

N = 1 << 24


def cases(mod, rng):
    """(name, fn) pairs running one library's version of each measured op."""
    f = mod.from_numpy
    a, b = f(rng.standard_normal(N, dtype=np.float32)), f(rng.standard_normal(N, dtype=np.float32))
    m = f(rng.standard_normal((4096, 4096), dtype=np.float32))
    ln_x = f(rng.standard_normal((8192, 1024), dtype=np.float32)).requires_grad_()
    ln_w = f(rng.standard_normal(1024, dtype=np.float32)).requires_grad_()
    ln_b = f(rng.standard_normal(1024, dtype=np.float32)).requires_grad_()
    ln_g = f(rng.standard_normal((8192, 1024), dtype=np.float32))
    nn = mod.nn
    param = nn.Parameter(f(rng.standard_normal(10_000_000, dtype=np.float32)))
    param.grad = f(rng.standard_normal(10_000_000, dtype=np.float32))
    adam = mod.optim.Adam([param], lr=1e-3)

    def layer_norm_step():
        ln_x.grad = ln_w.grad = ln_b.grad = None
        nn.functional.layer_norm(ln_x, (1024,), ln_w, ln_b).backward(ln_g)

    return [
        ("add 2^24", lambda: a + b),
        ("mul 2^24", lambda: a * b),
        ("exp 2^24", lambda: mod.exp(a)),
        ("tanh 2^24", lambda: mod.tanh(a)),
        ("sum 2^24 (all)", lambda: a.sum()),
        ("sum 4096^2 dim 0", lambda: m.sum(0)),
        ("sum 4096^2 dim 1", lambda: m.sum(1)),
        ("argmax 4096^2 dim 1", lambda: m.argmax(1)),
        ("softmax 4096^2 dim -1", lambda: mod.softmax(m, -1)),
        ("layer_norm 8192x1024 fwd+bwd", layer_norm_step),
        ("transpose copy 4096^2", lambda: m.t().contiguous()),
        ("float32 -> float16 2^24", lambda: a.half()),
        ("Adam step 10M", adam.step),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=kiln.get_num_threads())
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    kiln_cases = cases(kiln, rng)
    torch_cases = cases(torch, np.random.default_rng(0)) if torch is not None else None
    if torch is not None:
        torch.set_num_threads(args.threads)
    t = args.threads
    print(f"kiln {kiln.__version__}, PyTorch {torch.__version__ if torch else '(absent)'}; "
          f"median ms of {args.reps} interleaved calls")
    print(f"{'op':30s}{'kiln 1t':>9s}{f'kiln {t}t':>9s}{'speed-up':>9s}{f'torch {t}t':>10s}"
          f"{'kiln/torch':>11s}")
    for i, (name, kfn) in enumerate(kiln_cases):
        tfn = torch_cases[i][1] if torch_cases else None
        runs = [("one", kfn, 1), ("many", kfn, t)] + ([("torch", tfn, t)] if tfn else [])
        samples = {key: [] for key, _, _ in runs}
        for _ in range(args.reps + 1):  # the first round warms up
            for key, fn, threads in runs:
                kiln.set_num_threads(threads)
                t0 = time.perf_counter()
                fn()
                samples[key].append((time.perf_counter() - t0) * 1e3)
        med = {key: statistics.median(v[1:]) for key, v in samples.items()}
        kiln.set_num_threads(t)
        line = f"{name:30s}{med['one']:9.2f}{med['many']:9.2f}{med['one'] / med['many']:9.2f}"
        if "torch" in med:
            line += f"{med['torch']:10.2f}{med['many'] / med['torch']:11.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
