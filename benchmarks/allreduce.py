"""All-reduce bandwidth, kiln.distributed vs torch.distributed over NCCL, one process per GPU:
in-place SUM all-reduces of float32 / bfloat16 tensors from 64 KB to 256 MB, timed back to
back (median over repeats, clock stopped after a device sync), reported as NCCL's bus
bandwidth 2 (n - 1) / n * bytes / time. Both frameworks call the same NCCL, so this measures
what each adds on top: the launch path, stream handoffs and allocator bookkeeping.

    python -m kiln.distributed.run --nproc-per-node 2 benchmarks/allreduce.py

Each framework runs in its own child process per rank (as in benchmarks/ddp.py).
"""

import argparse
import importlib.util
import os
import subprocess
import sys

from ddp import Env, join_kiln, join_torch
from timing import per_call_us

SIZES = [64 << 10, 1 << 20, 16 << 20, 256 << 20]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", choices=["kiln", "torch", "both"], default="both")
    p.add_argument("--smoke", action="store_true", help="small tensors on the CPU over Gloo")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.ddp = True  # Env: always join a process group, even at world size 1
    return args


def bus_gb_per_s(mod, dist, env, nbytes, dtype_name):
    dtype = getattr(mod, dtype_name)
    numel = nbytes // (4 if dtype_name == "float32" else 2)
    device = mod.device("cuda", env.local_rank) if env.cuda else mod.device("cpu")
    x = mod.ones(numel, dtype=dtype, device=device)
    iters = max(5, min(200, (256 << 20) // nbytes * 5))
    sync = mod.cuda.synchronize if env.cuda else None
    dist.barrier()
    us = per_call_us(lambda: dist.all_reduce(x), iters, repeats=7, sync=sync, warmup=5,
                     include_device=True)
    n = env.world_size
    return 2 * (n - 1) / n * nbytes / (us * 1e-6) / 1e9, us


def measure(args, env):
    mod, dist = (join_kiln if args.framework == "kiln" else join_torch)(env)
    sizes = [4 << 10, 64 << 10] if args.smoke else SIZES
    for dtype_name in ("float32", "bfloat16"):
        for nbytes in sizes:
            gbs, us = bus_gb_per_s(mod, dist, env, nbytes, dtype_name)
            if env.rank == 0:
                print(f"result {dtype_name} {nbytes} {gbs:.2f} {us:.2f}", flush=True)
    dist.destroy_process_group()


def main():
    args = parse_args()
    env = Env(args)
    if args.framework != "both":
        measure(args, env)
        return
    results = {}
    for name in ("kiln", "torch"):
        if importlib.util.find_spec(name) is None:
            continue
        child = subprocess.run([sys.executable, os.path.abspath(__file__), *sys.argv[1:],
                                "--framework", name, "--child"], stdout=subprocess.PIPE,
                               text=True)
        if child.returncode != 0:
            sys.exit(f"[allreduce benchmark] rank {env.rank}: the {name} run failed "
                     f"(exit status {child.returncode})")
        for line in child.stdout.splitlines():
            if line.startswith("result "):
                _, dtype_name, nbytes, gbs, us = line.split()
                results.setdefault((dtype_name, int(nbytes)), {})[name] = (float(gbs), float(us))
    if env.rank != 0:
        return
    print(f"all-reduce SUM, world {env.world_size}, bus bandwidth GB/s (time per call us)")
    print(f"{'dtype':9s} {'size':>8s} {'kiln':>18s} {'torch':>18s} {'kiln/torch':>10s}")
    for (dtype_name, nbytes), by in results.items():
        cells = [f"{by[f][0]:8.1f} ({by[f][1]:7.1f})" if f in by else f"{'-':>18s}"
                 for f in ("kiln", "torch")]
        ratio = f"{by['kiln'][0] / by['torch'][0]:10.2f}" if len(by) == 2 else ""
        size = f"{nbytes >> 20} MB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KB"
        print(f"{dtype_name:9s} {size:>8s} {cells[0]} {cells[1]} {ratio}", flush=True)


if __name__ == "__main__":
    main()
