"""ResNet-50's 3x3 convolutions, forward + backward (input and weight gradients), kiln vs
PyTorch side by side on the GPU. Each time is the median over repeats of (many steps, then a
device sync) / steps, after a warm-up, so it includes the GPU finishing the work. TF32 is off
in both frameworks unless --tf32 (PyTorch's cuDNN default is on; the comparison wants the same
arithmetic on both sides).

    PYTHONPATH=python python3 benchmarks/conv.py [--tf32] [--dtype float16] [--benchmark]
        [--channels-last] [--composed]

--composed adds a column with kiln's GEMM composition (kiln.backends.cudnn.enabled = False),
the path every CUDA conv took before cuDNN. Without a GPU it runs on the CPU at batch 2 as a
smoke test.
"""

import argparse

import numpy as np

import kiln
from timing import per_call_us

try:
    import torch
except ImportError:
    torch = None

# (name, in channels, out channels, input size, stride); 3x3 kernels, padding 1.
LAYERS = [
    ("64ch@56x56", 64, 64, 56, 1),
    ("128ch@28x28", 128, 128, 28, 1),
    ("256ch@14x14", 256, 256, 14, 1),
    ("512ch@7x7", 512, 512, 7, 1),
    ("128ch@56->28 s2", 128, 128, 56, 2),
    ("256ch@28->14 s2", 256, 256, 28, 2),
    ("512ch@14->7 s2", 512, 512, 14, 2),
]


def set_flags(mod, args, enabled=True):
    mod.backends.cudnn.allow_tf32 = args.tf32
    mod.backends.cuda.matmul.allow_tf32 = args.tf32
    mod.backends.cudnn.benchmark = args.benchmark
    mod.backends.cudnn.enabled = enabled


def step_ms(mod, layer, args, device, batch, enabled=True):
    """Milliseconds per forward + backward of one layer in `mod` (kiln or torch)."""
    _, cin, cout, size, stride = layer
    set_flags(mod, args, enabled)
    dtype = getattr(mod, args.dtype)
    rng = np.random.default_rng(0)
    x = mod.tensor(rng.standard_normal((batch, cin, size, size), dtype=np.float32),
                   dtype=dtype, device=device)
    w = mod.tensor(rng.standard_normal((cout, cin, 3, 3), dtype=np.float32) * 0.05,
                   dtype=dtype, device=device)
    if args.channels_last:
        x = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
        w = w.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    x.requires_grad_(True)
    w.requires_grad_(True)
    out = size // stride
    gy = mod.tensor(rng.standard_normal((batch, cout, out, out), dtype=np.float32),
                    dtype=dtype, device=device)
    if args.channels_last:
        gy = gy.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    conv2d = mod.nn.functional.conv2d

    def step():
        y = conv2d(x, w, None, stride, 1)
        mod.autograd.grad([y], [x, w], [gy])

    sync = mod.cuda.synchronize if device == "cuda" else None
    iters = args.iters if device == "cuda" else 2
    return per_call_us(step, iters, repeats=args.repeats, sync=sync, warmup=args.warmup,
                       include_device=True) / 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tf32", action="store_true", help="allow TF32 in both frameworks")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--benchmark", action="store_true",
                        help="cudnn.benchmark (measured algorithm search) in both")
    parser.add_argument("--channels-last", action="store_true",
                        help="NHWC-dense input, weight and gradient in both")
    parser.add_argument("--composed", action="store_true",
                        help="also time kiln's GEMM composition (cuDNN disabled)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    device = "cuda" if kiln.cuda.is_available() else "cpu"
    batch = args.batch if device == "cuda" else 2
    if device == "cuda" and torch is not None and not torch.cuda.is_available():
        raise SystemExit("torch has no CUDA here: nothing to compare against")
    print(f"conv2d 3x3 forward+backward, batch {batch}, {args.dtype}, {device}, "
          f"tf32={'on' if args.tf32 else 'off'}, benchmark={args.benchmark}, "
          f"channels_last={args.channels_last}, kiln cuDNN "
          f"{kiln.backends.cudnn.version() if kiln.backends.cudnn.is_available() else 'absent'}")
    header = (f"{'layer':18s}{'kiln ms':>10s}{'torch ms':>10s}{'kiln/torch':>12s}"
              f"{'kiln TFLOP/s':>14s}")
    if args.composed:
        header += f"{'composed ms':>13s}"
    print(header)
    for layer in LAYERS:
        name, cin, cout, size, stride = layer
        k = step_ms(kiln, layer, args, device, batch)
        t = step_ms(torch, layer, args, device, batch) if torch is not None else float("nan")
        out = size // stride
        flops = 3 * 2 * batch * cout * out * out * cin * 9  # forward, input grad, weight grad
        row = f"{name:18s}{k:10.3f}{t:10.3f}{k / t:12.2f}{flops / (k * 1e-3) / 1e12:14.1f}"
        if args.composed:
            row += f"{step_ms(kiln, layer, args, device, batch, enabled=False):13.3f}"
        print(row)


if __name__ == "__main__":
    main()
