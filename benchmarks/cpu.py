"""The CPU backend against PyTorch's CPU build, side by side in one run (issue 19): every row of
the issue's table, kiln's and PyTorch's numbers, their ratio and the issue's target, as a
markdown table.

    PYTHONPATH=python:/work/torch-site python3 benchmarks/cpu.py [--quick] [--threads N]
        [--only GEMM,linear]

Both frameworks run the same programs on the same data with the same thread count, and are
interleaved (kiln, torch, kiln, torch, ...) so that load from other processes on a shared
machine hits both alike; each number is the median over the repeats. Without PyTorch the
torch column is empty. --quick drops the 4096^2 GEMM, runs ResNet-18 at 112x112 instead of
224x224 and takes fewer repeats: a smoke test, not a measurement.
"""

import argparse
import os
import platform
import statistics
import time

import numpy as np

import kiln

try:
    import torch
except ImportError:
    torch = None

FRAMEWORKS = [m for m in (kiln, torch) if m is not None]


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median_seconds(makers, repeats, warmup):
    """{key: median seconds of one call}. makers[key]() builds a closure (its setup is not
    timed); the keys are the modules, or any labels. The calls alternate between the closures,
    repeat by repeat."""
    fns = {key: make() for key, make in makers.items()}
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples = {key: [] for key in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            samples[key].append(timed(fn))
    return {key: statistics.median(s) for key, s in samples.items()}


def rng_tensor(mod, shape, scale=1.0, seed=0, requires_grad=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * scale
    t = mod.from_numpy(a.copy())
    return t.requires_grad_(True) if requires_grad else t


# --- The rows' programs; each takes the module (kiln or torch) and returns a closure. --------


def gemm(n):
    def make(mod):
        a, b = rng_tensor(mod, (n, n), seed=1), rng_tensor(mod, (n, n), seed=2)
        return lambda: mod.mm(a, b)

    return make


def conv_fwd_bwd(batch, cin, cout, size, kernel, stride, padding):
    def make(mod):
        x = rng_tensor(mod, (batch, cin, size, size), requires_grad=True)
        w = rng_tensor(mod, (cout, cin, kernel, kernel), 0.05, seed=1, requires_grad=True)
        out = (size + 2 * padding - kernel) // stride + 1
        gy = rng_tensor(mod, (batch, cout, out, out), seed=2)
        conv2d = mod.nn.functional.conv2d

        def step():
            y = conv2d(x, w, None, stride, padding)
            mod.autograd.grad([y], [x, w], [gy])

        return step

    return make


def linear_fwd_bwd(shape, out_features):
    """F.linear forward + backward (input, weight and bias gradients) on an input of `shape`."""
    def make(mod):
        x = rng_tensor(mod, shape, requires_grad=True)
        w = rng_tensor(mod, (out_features, shape[-1]), 0.05, seed=1, requires_grad=True)
        b = rng_tensor(mod, (out_features,), seed=2, requires_grad=True)
        gy = rng_tensor(mod, tuple(shape[:-1]) + (out_features,), seed=3)

        def step():
            y = mod.nn.functional.linear(x, w, b)
            mod.autograd.grad([y], [x, w, b], [gy])

        return step

    return make


def lstm_fwd_bwd(seq, batch, features, hidden):
    def make(mod):
        mod.manual_seed(0)
        lstm = mod.nn.LSTM(features, hidden)
        x = rng_tensor(mod, (seq, batch, features), requires_grad=True)

        def step():
            out, _ = lstm(x)
            out.sum().backward()

        return step

    return make


def softmax(shape):
    def make(mod):
        x = rng_tensor(mod, shape)
        return lambda: mod.softmax(x, -1)

    return make


def layer_norm(shape):
    def make(mod):
        x = rng_tensor(mod, shape)
        w, b = rng_tensor(mod, shape[-1:], seed=1), rng_tensor(mod, shape[-1:], seed=2)
        return lambda: mod.nn.functional.layer_norm(x, shape[-1:], w, b)

    return make


def add(n):
    def make(mod):
        a, b = rng_tensor(mod, (n,), seed=1), rng_tensor(mod, (n,), seed=2)
        return lambda: a + b

    return make


# --- Whole training steps. ---------------------------------------------------------------------


def mnist_cnn(mod):
    """PyTorch's MNIST example network (its first conv's output is the issue's 32x26x26)."""
    nn = mod.nn
    return nn.Sequential(nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                         nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))


def resnet18(mod, classes=1000):
    """torchvision's ResNet-18, written out on the module's layers."""
    nn = mod.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return self.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def classifier_step(build, input_shape, classes):
    def make(mod):
        mod.manual_seed(0)
        model = build(mod)
        model.train()
        opt = mod.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = rng_tensor(mod, input_shape)
        labels = np.random.default_rng(1).integers(0, classes, size=input_shape[0])
        y = mod.from_numpy(labels.astype(np.int64))

        def step():
            opt.zero_grad()
            mod.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

        return step

    return make


def lstm_lm_step(vocab=10000, features=200, hidden=200, layers=2, bptt=35, batch=20):
    """PyTorch's word_language_model (LSTM, its default sizes): embedding, a 2-layer LSTM, the
    decoder over the vocabulary, gradient clipping and SGD."""
    def make(mod):
        nn = mod.nn
        mod.manual_seed(0)
        emb, rnn = nn.Embedding(vocab, features), nn.LSTM(features, hidden, layers, dropout=0.2)
        decoder, drop = nn.Linear(hidden, vocab), nn.Dropout(0.2)
        params = [*emb.parameters(), *rnn.parameters(), *decoder.parameters()]
        opt = mod.optim.SGD(params, lr=20.0)
        tokens = np.random.default_rng(1).integers(0, vocab, size=(bptt + 1, batch))
        data, target = mod.from_numpy(tokens[:-1].copy()), mod.from_numpy(tokens[1:].copy())

        def step():
            opt.zero_grad()
            out, _ = rnn(drop(emb(data)))
            logits = decoder(drop(out))
            loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(params, 0.25)
            opt.step()

        return step

    return make


# --- The table. ---------------------------------------------------------------------------------

# Each row: (name, program, unit, work, target). The unit says how a time becomes the number in
# the table: "ms" (lower is better; the ratio is kiln's time / torch's), "GFLOP/s" or "GB/s"
# (higher is better; the ratio is kiln's rate / torch's) with `work` FLOPs or bytes per call.
# The target is the issue's, on the ratio.


def rows(quick):
    out = []
    for n in (256, 1024) if quick else (256, 1024, 4096):
        out.append((f"GEMM {n}^2 fp32", gemm(n), "GFLOP/s", 2 * n ** 3, ">= 0.9"))
    convs = [  # (name, batch, cin, cout, size, kernel, stride, padding)
        ("MNIST-CNN conv1 1->32 @28", 16, 1, 32, 28, 3, 1, 0),
        ("MNIST-CNN conv2 32->64 @26", 16, 32, 64, 26, 3, 1, 0),
        ("ResNet-18 stem 3->64 7x7 s2 @224", 16, 3, 64, 224, 7, 2, 3),
        ("ResNet-18 64->64 @56", 16, 64, 64, 56, 3, 1, 1),
        ("ResNet-18 128->128 @28", 16, 128, 128, 28, 3, 1, 1),
        ("ResNet-18 256->256 @14", 16, 256, 256, 14, 3, 1, 1),
        ("ResNet-18 512->512 @7", 16, 512, 512, 7, 3, 1, 1),
        ("ResNet-18 64->128 s2 @56", 16, 64, 128, 56, 3, 2, 1),
    ]
    for name, *shape in convs:
        out.append((f"conv2d fwd+bwd {name}, batch 16", conv_fwd_bwd(*shape), "ms", None,
                    "<= 1.2"))
    out.append(("F.linear fwd+bwd 2-D 700x200 -> 10000", linear_fwd_bwd((700, 200), 10000), "ms",
                None, None))
    out.append(("F.linear fwd+bwd 3-D 35x20x200 -> 10000", linear_fwd_bwd((35, 20, 200), 10000),
                "ms", None, None))
    out.append(("LSTM layer fwd+bwd 200->200, seq 35, batch 20", lstm_fwd_bwd(35, 20, 200, 200),
                "ms", None, None))
    out.append(("softmax 4096x1024", softmax((4096, 1024)), "ms", None, None))
    out.append(("layer_norm 4096x1024", layer_norm((4096, 1024)), "ms", None, None))
    out.append(("add 2^24 fp32", add(1 << 24), "GB/s", 3 * 4 * (1 << 24), ">= 1.0"))
    out.append(("train step MNIST CNN, batch 64",
                classifier_step(mnist_cnn, (64, 1, 28, 28), 10), "ms", None, "<= 1.2"))
    size = 112 if quick else 224
    out.append((f"train step ResNet-18, batch 16, {size}x{size}",
                classifier_step(resnet18, (16, 3, size, size), 1000), "ms", None, "<= 1.2"))
    out.append(("train step 2-layer LSTM LM (bptt 35, batch 20, vocab 10k)", lstm_lm_step(), "ms",
                None, "<= 1.2"))
    return out


def repeats_for(seconds, quick):
    """Enough repeats for a stable median without spending minutes on the slow rows."""
    budget = 1.0 if quick else 6.0
    return max(3, min(30 if not quick else 5, int(budget / max(seconds, 1e-6))))


def measure(program, quick):
    makers = {mod: (lambda mod=mod: program(mod)) for mod in FRAMEWORKS}
    # One probe call per framework sizes the repeats.
    probe = max(timed(program(mod)) for mod in FRAMEWORKS)
    return median_seconds(makers, repeats_for(probe, quick), warmup=1 if probe > 0.5 else 3)


def fmt(v):
    return "—" if v is None else (f"{v:.1f}" if v >= 10 else f"{v:.3g}")


def met(ratio, target):
    if ratio is None or target is None:
        return ""
    op, bound = target.split()
    ok = ratio >= float(bound) if op == ">=" else ratio <= float(bound)
    return "yes" if ok else "**no**"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows and repeats (smoke test)")
    parser.add_argument("--threads", type=int, default=kiln.get_num_threads(),
                        help="threads for both frameworks (default: kiln's)")
    parser.add_argument("--only", default="",
                        help="comma-separated words: run only the rows whose name has one")
    args = parser.parse_args()
    only = [w for w in args.only.split(",") if w]
    for mod in FRAMEWORKS:
        mod.set_num_threads(args.threads)

    libs = kiln.__config__.cpu_libraries() if hasattr(kiln.__config__, "cpu_libraries") else None
    print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; threads {args.threads}; "
          f"kiln {kiln.__version__}{f' ({libs})' if libs else ''}; "
          f"torch {torch.__version__ if torch else 'absent'}\n")
    print("| measured | kiln | torch | unit | kiln/torch | target | met |")
    print("|---|---:|---:|---|---:|---|---|")
    for name, program, unit, work, target in rows(args.quick):
        if only and not any(w in name for w in only):
            continue
        secs = measure(program, args.quick)
        if unit == "ms":
            vals = {mod: s * 1e3 for mod, s in secs.items()}
        else:
            vals = {mod: work / s / 1e9 for mod, s in secs.items()}
        k, t = vals[kiln], vals.get(torch)
        ratio = None if t is None else k / t
        print(f"| {name} | {fmt(k)} | {fmt(t)} | {unit} | {fmt(ratio)} | {target or ''} | "
              f"{met(ratio, target)} |", flush=True)
    if only and not any(w in "F.linear 3-D / 2-D" for w in only):
        return
    # The same data as 2-D and as 3-D, interleaved call by call so that load hits both alike.
    two_three = median_seconds({"2-D": lambda: linear_fwd_bwd((700, 200), 10000)(kiln),
                                "3-D": lambda: linear_fwd_bwd((35, 20, 200), 10000)(kiln)},
                               repeats=5 if args.quick else 15, warmup=2)
    ratio = two_three["3-D"] / two_three["2-D"]
    print(f"| F.linear fwd+bwd 3-D / 2-D time (kiln, interleaved) | {ratio:.2f} | | ratio | | "
          f"<= 1.1 | {met(ratio, '<= 1.1')} |")

if __name__ == "__main__":
    main()
