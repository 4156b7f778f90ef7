"""CUDA graphs, kiln and PyTorch side by side on the GPU (issue 15): a whole training step run
eagerly and replayed as one CUDA graph, printed as one table (kiln, PyTorch, kiln/PyTorch;
milliseconds, lower is better):

  * MLP 784-512-10, batch 128, cross entropy, Adam(capturable=True);
  * the small GPT of benchmarks/transformer.py (examples/train_gpt.py's build_gpt, 6 layers,
    6 heads, 384 wide, T=256, batch 64, dropout 0.2, bf16 autocast, fused AdamW with
    capturable=True), the whole step (forward, backward, optimizer step) captured;
  * the same GPT with its blocks graphed by make_graphed_callables (embedding, head, loss
    and optimizer step eager).

Each graph is captured after three warm-up steps on a side stream, as PyTorch's CUDA-graph
documentation does. Times come from CUDA events between back-to-back calls after warm-up
(benchmarks/transformer.py: times_ms); the median of --iters samples is reported.

    PYTHONPATH=python python3 benchmarks/cuda_graphs.py [--only mlp gpt blocks] [--iters N]

Without PyTorch installed (or with --no-torch) only kiln runs and the PyTorch column is n/a.
"""

import argparse
import os
import sys

import numpy as np

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from train_gpt import GPTConfig, adamw, build_gpt  # noqa: E402
from transformer import fmt, release, times_ms  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

SMALL_GPT = GPTConfig(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384,
                      dropout=0.2)
GPT_BATCH = 64


def graphed(mod, step, warmup=3):
    """A replay function for `step` (a closure over static tensors), captured after `warmup`
    eager calls on a side stream."""
    side = mod.cuda.Stream()
    side.wait_stream(mod.cuda.current_stream())
    with mod.cuda.stream(side):
        for _ in range(warmup):
            step()
    mod.cuda.current_stream().wait_stream(side)
    g = mod.cuda.CUDAGraph()
    with mod.cuda.graph(g):
        step()
    return g.replay


def mlp_step(mod):
    """One Adam step of the 784-512-10 MLP on a fixed random batch of 128."""
    mod.manual_seed(0)
    nn, F = mod.nn, mod.nn.functional
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
    opt = mod.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
    rng = np.random.default_rng(0)
    x = mod.from_numpy(rng.standard_normal((128, 784)).astype(np.float32)).cuda()
    y = mod.from_numpy(rng.integers(0, 10, 128)).cuda()

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def gpt_parts(mod):
    """(model, optimizer, x, y) of the small GPT: fused AdamW with capturable=True."""
    mod.manual_seed(0)
    model = build_gpt(mod, SMALL_GPT).cuda()
    opt = adamw(mod, model, lr=3e-4, weight_decay=0.1, fused=True)
    for group in opt.param_groups:  # before the first step, so the state starts on the GPU
        group["capturable"] = True
    rng = np.random.default_rng(0)
    x, y = (mod.from_numpy(rng.integers(0, SMALL_GPT.vocab_size, (GPT_BATCH,
                                                                  SMALL_GPT.block_size))).cuda()
            for _ in range(2))
    return model, opt, x, y


def gpt_step(mod, model, opt, x, y):
    def step():
        opt.zero_grad(set_to_none=True)
        with mod.autocast("cuda", dtype=mod.bfloat16):
            _, loss = model(x, y)
        loss.backward()
        opt.step()

    return step


def gpt_with_graphed_blocks(mod):
    """The GPT step with every block replaced by make_graphed_callables' version (captured
    under autocast without its weight cache, which a capture cannot keep)."""
    model, opt, x, y = gpt_parts(mod)

    class Autocast(mod.nn.Module):  # autocast inside each graphed block
        def __init__(self, block):
            super().__init__()
            self.block = block

        def forward(self, h):
            with mod.autocast("cuda", dtype=mod.bfloat16, cache_enabled=False):
                return self.block(h).float()

    wrapped = tuple(Autocast(b) for b in model.blocks)
    # One sample per block: each block's static input is read again by its backward graph.
    samples = tuple((mod.randn(GPT_BATCH, SMALL_GPT.block_size, SMALL_GPT.n_embd, device="cuda",
                               requires_grad=True),) for _ in wrapped)
    graphed_blocks = mod.cuda.make_graphed_callables(wrapped, samples)
    for i, b in enumerate(graphed_blocks):
        model.blocks[i] = b
    return gpt_step(mod, model, opt, x, y)


def workloads(parts):
    out = []
    if "mlp" in parts:
        out.append(("MLP 784-512-10 b128 Adam step, eager", lambda mod: mlp_step(mod)))
        out.append(("MLP 784-512-10 b128 Adam step, graph replay",
                    lambda mod: graphed(mod, mlp_step(mod))))
    if "gpt" in parts:
        out.append(("GPT 6x6x384 T256 b64 p0.2 bf16 step, eager",
                    lambda mod: gpt_step(mod, *gpt_parts(mod))))
        out.append(("GPT 6x6x384 T256 b64 p0.2 bf16 step, graph replay",
                    lambda mod: graphed(mod, gpt_step(mod, *gpt_parts(mod)))))
    if "blocks" in parts:
        out.append(("GPT 6x6x384 step, blocks by make_graphed_callables",
                    lambda mod: gpt_with_graphed_blocks(mod)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=["mlp", "gpt", "blocks"])
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    if not kiln.cuda.is_available():
        sys.exit("benchmarks/cuda_graphs.py needs a GPU")
    mods = [("kiln", kiln)]
    if torch is not None and not args.no_torch and torch.cuda.is_available():
        mods.append(("PyTorch", torch))
    print(f"{'workload (ms)':58s} {'kiln':>9s} {'PyTorch':>9s} {'ratio':>7s}")
    for label, make in workloads(set(args.only or ["mlp", "gpt", "blocks"])):
        ms = {}
        for name, mod in mods:
            fn = make(mod)
            ms[name] = times_ms(mod, "cuda", fn, args.iters, args.warmup)
            del fn
            release(mod, "cuda")
        k, t = ms["kiln"], ms.get("PyTorch")
        ratio = f"{k / t:7.2f}" if t else "    n/a"
        print(f"{label:58s} {fmt(k):>9s} {fmt(t) if t else 'n/a':>9s} {ratio}", flush=True)


if __name__ == "__main__":
    main()
