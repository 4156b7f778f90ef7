"""The transformer workloads, kiln and PyTorch side by side on the GPU (issue 13), printed as
one table (kiln, PyTorch, kiln/PyTorch; every unit is lower-is-better):

  * F.scaled_dot_product_attention forward + backward, bf16 and fp32, causal and full:
    time and peak memory beyond the inputs;
  * F.linear forward + backward with bias, bf16, at GPT-2 small's shapes (qkv, MLP up, MLP
    down): time and the kernels launched per call (Note [Fused linear]);
  * training steps of the GPT of examples/train_gpt.py (build_gpt: fused qkv Linear, split /
    view / transpose, scaled_dot_product_attention, GELU MLP, tied lm_head), fused AdamW,
    bf16 autocast or fp32, zero_grad(set_to_none=True): GPT-2 small and a 6x6x384 GPT;
    time, peak memory and the CUDA kernels (and copies) launched per step, counted by
    PyTorch's profiler, which records every kernel in the process whichever library
    launched it.

Times come from CUDA events recorded between back-to-back calls (no synchronization between
them, so a sample is one call's span on the device timeline, idle gaps the host leaves
included), after warm-up; the median of --iters samples is reported.

    PYTHONPATH=python python3 benchmarks/transformer.py [--only sdpa linear gpt2 small] [--iters N]
    PYTHONPATH=python python3 benchmarks/transformer.py --smoke    # tiny shapes on the CPU

Without PyTorch installed (or with --no-torch) only kiln runs and the PyTorch column is n/a.
"""

import argparse
import gc
import os
import statistics
import sys
import time

import numpy as np

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
from train_gpt import GPTConfig, adamw, build_gpt  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

MiB = 2**20
SDPA_SHAPES = [(64, 6, 256, 64), (16, 12, 1024, 64), (8, 16, 2048, 128)]
SMOKE_SDPA_SHAPES = [(2, 2, 16, 8)]
# (rows, in_features, out_features) of GPT-2 small's Linear layers at batch 8 x T 1024.
LINEAR_SHAPES = [(8192, 768, 2304), (8192, 768, 3072), (8192, 3072, 768)]
SMOKE_LINEAR_SHAPES = [(64, 32, 48)]


def gpt_workloads(smoke):
    """{part: [(cfg, batch, bf16)]}: GPT-2 small and the 6x6x384 character-level GPT."""
    if smoke:
        tiny = dict(block_size=16, n_layer=2, n_head=2, n_embd=32)
        return {"gpt2": [(GPTConfig(vocab_size=101, **tiny), 2, True)],
                "small": [(GPTConfig(vocab_size=65, dropout=0.2, **tiny), 4, True),
                          (GPTConfig(vocab_size=65, dropout=0.2, **tiny), 4, False)]}
    gpt2 = GPTConfig(vocab_size=50304, block_size=1024, n_layer=12, n_head=12, n_embd=768)
    small = dict(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384)
    return {"gpt2": [(gpt2, 8, True)],
            "small": [(GPTConfig(dropout=0.2, **small), 64, True),
                      (GPTConfig(dropout=0.0, **small), 64, True),
                      (GPTConfig(dropout=0.2, **small), 64, False),
                      (GPTConfig(dropout=0.0, **small), 64, False)]}


def times_ms(mod, device, fn, iters, warmup):
    """Median milliseconds per call of `fn` (see the module docstring)."""
    for _ in range(warmup):
        fn()
    if device != "cuda":
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)
    mod.cuda.synchronize()
    events = [mod.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    events[0].record()
    for event in events[1:]:
        fn()
        event.record()
    events[-1].synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(events, events[1:]))


def peak_mib(mod, device, fn, beyond_current):
    """Peak MiB allocated while `fn` runs once: all of it, or only what `fn` adds beyond the
    memory held when it starts. None off the GPU (no allocator statistics there)."""
    if device != "cuda":
        return None
    mod.cuda.synchronize()
    base = mod.cuda.memory_allocated() if beyond_current else 0
    mod.cuda.reset_peak_memory_stats()
    fn()
    mod.cuda.synchronize()
    return (mod.cuda.max_memory_allocated() - base) / MiB


def device_launches_per_step(mod, step, steps=3):
    """(kernels, memory copies and sets) per call of `step`, from PyTorch's profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        mod.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    copies = sum(1 for n in names if n.startswith(("Memcpy", "Memset")))
    return (len(names) - copies) / steps, copies / steps


def top_kernels(mod, step, count=12, steps=3):
    """The `count` CUDA kernels (and copies) with the most device time per call of `step`:
    [(name, ms per step, launches per step)], from PyTorch's profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        mod.cuda.synchronize()
    totals = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        ms, n = totals.get(e.name, (0.0, 0))
        totals[e.name] = (ms + e.time_range.elapsed_us() / 1e3, n + 1)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])[:count]
    all_ms = sum(ms for ms, _ in totals.values())
    all_n = sum(n for _, n in totals.values())
    return ([("(device time of every kernel and copy)", all_ms / steps, all_n / steps)]
            + [(name, ms / steps, n / steps) for name, (ms, n) in ranked])


def sdpa_case(mod, device, shape, dtype_name, causal):
    """A closure running attention forward + backward on random bf16/fp32 q, k, v."""
    mod.manual_seed(0)
    dtype = getattr(mod, dtype_name)
    q, k, v, grad = (mod.randn(*shape, device=device).to(dtype) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    F = mod.nn.functional

    def run():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.backward(grad)
        q.grad = k.grad = v.grad = None

    return run


def linear_case(mod, device, shape):
    """A closure running F.linear forward + backward (input, weight and bias gradients), bf16."""
    mod.manual_seed(0)
    rows, k, n = shape
    x, w, b, grad = (mod.randn(*s, device=device).to(mod.bfloat16)
                     for s in ((rows, k), (n, k), (n,), (rows, n)))
    for t in (x, w, b):
        t.requires_grad_(True)
    F = mod.nn.functional

    def run():
        F.linear(x, w, b).backward(grad)
        x.grad = w.grad = b.grad = None

    return run


def gpt_step(mod, device, cfg, batch, bf16):
    """One training step of build_gpt(cfg) on a fixed random batch, fused AdamW."""
    mod.manual_seed(0)
    model = build_gpt(mod, cfg).to(device)
    optimizer = adamw(mod, model, lr=3e-4, weight_decay=0.1, fused=True)
    rng = np.random.default_rng(0)
    x, y = (mod.from_numpy(rng.integers(0, cfg.vocab_size, (batch, cfg.block_size)))
            .to(device) for _ in range(2))

    def step():
        with mod.autocast(device, dtype=mod.bfloat16, enabled=bf16):
            _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def release(mod, device):
    gc.collect()
    if device == "cuda":
        mod.cuda.synchronize()
        mod.cuda.empty_cache()


def measure_sdpa(mod, device, shape, dtype_name, causal, iters, warmup):
    run = sdpa_case(mod, device, shape, dtype_name, causal)
    ms = times_ms(mod, device, run, iters, warmup)
    return {"ms": ms, "MiB": peak_mib(mod, device, run, beyond_current=True)}


def measure_linear(mod, device, shape, iters, warmup):
    run = linear_case(mod, device, shape)
    out = {"ms": times_ms(mod, device, run, iters, warmup)}
    if device == "cuda" and torch is not None:
        out["kernels"], _ = device_launches_per_step(mod, run)
    return out


def measure_gpt(mod, device, cfg, batch, bf16, iters, warmup, profile=0):
    step = gpt_step(mod, device, cfg, batch, bf16)
    out = {"ms": times_ms(mod, device, step, iters, warmup),
           "MiB": peak_mib(mod, device, step, beyond_current=False)}
    if device == "cuda" and torch is not None:
        out["kernels"], out["copies"] = device_launches_per_step(mod, step)
        if profile:
            out["profile"] = top_kernels(mod, step, count=profile)
    return out


def workloads(args, device):
    """(label, {unit: row name}, fn(mod)) for every part selected."""
    parts = set(args.only or ["sdpa", "linear", "gpt2", "small"])
    warmup = 1 if args.smoke else 5
    on_gpu = device == "cuda"  # memory and kernel counts only there
    out = []
    if "sdpa" in parts:
        for dtype_name in ("bfloat16", "float32"):
            for shape in SMOKE_SDPA_SHAPES if args.smoke else SDPA_SHAPES:
                for causal in (True, False):
                    label = (f"SDPA fwd+bwd {'bf16' if dtype_name == 'bfloat16' else 'fp32'} "
                             f"{'causal' if causal else 'full'} {'x'.join(map(str, shape))}")
                    units = {"ms": "ms", "MiB": "MiB beyond inputs"} if on_gpu else {"ms": "ms"}
                    out.append((label, units,
                                lambda mod, s=shape, d=dtype_name, c=causal:
                                measure_sdpa(mod, device, s, d, c, args.iters, warmup)))
    if "linear" in parts:
        for shape in SMOKE_LINEAR_SHAPES if args.smoke else LINEAR_SHAPES:
            label = f"linear fwd+bwd bf16 [{shape[0]},{shape[1]}]x[{shape[2]},{shape[1]}]+bias"
            units = {"ms": "ms", "kernels": "kernels"} if on_gpu else {"ms": "ms"}
            out.append((label, units, lambda mod, s=shape:
                        measure_linear(mod, device, s, args.iters, warmup)))
    for part, cases in gpt_workloads(args.smoke).items():
        if part not in parts:
            continue
        for cfg, batch, bf16 in cases:
            label = (f"GPT {cfg.n_layer}x{cfg.n_head}x{cfg.n_embd} T{cfg.block_size} b{batch} "
                     f"V{cfg.vocab_size} p{cfg.dropout:g} {'bf16' if bf16 else 'fp32'} step")
            units = ({"ms": "ms", "MiB": "peak MiB", "kernels": "kernels",
                      "copies": "copies+sets"} if on_gpu else {"ms": "ms"})
            out.append((label, units, lambda mod, c=cfg, b=batch, h=bf16:
                        measure_gpt(mod, device, c, b, h, args.iters, warmup, args.profile)))
    return out


def fmt(value):
    if value is None:
        return "n/a"
    return f"{value:.0f}" if value >= 1000 else f"{value:.3g}"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=["sdpa", "linear", "gpt2", "small"],
                        help="parts to run (default: all)")
    parser.add_argument("--iters", type=int, default=None,
                        help="timed iterations per workload (default 30; 2 with --smoke)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny shapes on the CPU, to check that the script runs")
    parser.add_argument("--no-torch", action="store_true", help="run kiln only")
    parser.add_argument("--profile", type=int, nargs="?", const=12, default=0, metavar="N",
                        help="after each GPT step, the N kernels with the most device time "
                             "(default 12)")
    args = parser.parse_args()
    args.iters = args.iters or (2 if args.smoke else 30)

    global torch
    if args.no_torch:
        torch = None
    if args.smoke:
        device = "cpu"
    elif kiln.cuda.is_available():
        device = "cuda"
    else:
        raise SystemExit("benchmarks/transformer.py needs a CUDA device (or --smoke for the CPU)")
    libs = [kiln] + ([torch] if torch is not None else [])
    print(f"device: {device}; kiln {kiln.__version__}; "
          + (f"torch {torch.__version__}" if torch is not None else "torch: n/a"))

    errors = []
    print(f"{'workload':58s}{'unit':>18s}{'kiln':>9s}{'torch':>9s}{'ratio':>7s}", flush=True)
    for label, units, measure in workloads(args, device):
        results = {}
        for mod in libs:
            try:
                results[mod.__name__] = measure(mod)
            except Exception as e:  # one failing workload should not hide the others' numbers
                errors.append(f"{mod.__name__}, {label}: {type(e).__name__}: {e}")
                results[mod.__name__] = {}
            release(mod, device)
        k, t = results.get("kiln", {}), results.get("torch", {})
        for key, unit in units.items():
            kv, tv = k.get(key), t.get(key)
            ratio = f"{kv / tv:7.2f}" if kv is not None and tv else "      -"
            print(f"{label:58s}{unit:>18s}{fmt(kv):>9s}{fmt(tv):>9s}{ratio}", flush=True)
        for name, res in results.items():
            for kernel, ms, n in res.get("profile", []):
                print(f"    {name:5s} {ms:8.3f} ms {n:6.1f}x  {kernel[:110]}")
    print("ratio: kiln / torch (< 1: kiln faster or smaller)")
    if errors:
        print("\nerrors:\n  " + "\n  ".join(errors))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
