"""Data-parallel training steps, kiln's DistributedDataParallel vs PyTorch's, one process per
GPU: the wide MLP Sequential(4 x [Linear(4096, 4096), GELU], Linear(4096, 1000)), batch 8192
per GPU, bf16 autocast, cross_entropy, Adam. One step is zero_grad, forward, loss, backward
(with the bucketed gradient all-reduce), optimizer step. Time per step is the median over
repeats of (many steps, then a device sync) / steps on rank 0, after a warm-up.

    python -m kiln.distributed.run --nproc-per-node 2 benchmarks/ddp.py [--framework both]
    python -m kiln.distributed.run --nproc-per-node 1 benchmarks/ddp.py   # 1-GPU baseline
    torchrun --nproc-per-node 2 benchmarks/ddp.py --framework torch

Both launchers set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. kiln joins
through kiln.distributed.init_process_group (env://); PyTorch through its own TCPStore on
MASTER_PORT + 1 (the launcher's store on MASTER_PORT speaks kiln's or torchrun's protocol, not
necessarily PyTorch's), so one script serves both frameworks under either launcher. With
world size 1 the model runs without DDP unless --ddp (the scaling baseline; PyTorch measured
6.74 ms/step on one H200 and 7.54 ms on two). --smoke runs a tiny model on the CPU over Gloo.
"""

import argparse
import datetime
import importlib.util
import os
import subprocess
import sys

import numpy as np

from timing import per_call_us


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", choices=["kiln", "torch", "both"], default="both")
    p.add_argument("--batch", type=int, default=8192, help="per GPU")
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--steps", type=int, default=10, help="steps per timed repeat")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--ddp", action="store_true", help="wrap in DDP even at world size 1")
    p.add_argument("--gradient-as-bucket-view", action="store_true")
    p.add_argument("--smoke", action="store_true", help="tiny model on the CPU over Gloo")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args()


class Env:
    def __init__(self, args):
        # Without a launcher: a world of one (env:// needs every variable).
        for name, default in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"),
                              ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500")):
            os.environ.setdefault(name, default)
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.use_ddp = self.world_size > 1 or args.ddp
        self.cuda = not args.smoke


def join_kiln(env):
    import kiln
    import kiln.distributed as dist
    if env.cuda:
        kiln.cuda.set_device(env.local_rank)
    if env.use_ddp and not dist.is_initialized():
        dist.init_process_group("nccl" if env.cuda else "gloo",
                                timeout=datetime.timedelta(seconds=120))
    return kiln, dist


def join_torch(env):
    import torch
    import torch.distributed as dist
    if env.cuda:
        torch.cuda.set_device(env.local_rank)
    if env.use_ddp and not dist.is_initialized():
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1,
                              env.world_size, is_master=env.rank == 0,
                              timeout=datetime.timedelta(seconds=120))
        dist.init_process_group("nccl" if env.cuda else "gloo", store=store, rank=env.rank,
                                world_size=env.world_size)
    return torch, dist


def step_ms(mod, dist, env, args):
    """Milliseconds per data-parallel training step of `mod` (kiln or torch) on this rank."""
    nn = mod.nn
    device = mod.device("cuda", env.local_rank) if env.cuda else mod.device("cpu")
    mod.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(args.width, args.width), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(args.width, 1000)).to(device)
    if env.use_ddp:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[env.local_rank] if env.cuda else None,
            gradient_as_bucket_view=args.gradient_as_bucket_view)
    optimizer = mod.optim.Adam(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(env.rank)
    x = mod.tensor(rng.standard_normal((args.batch, args.width), dtype=np.float32),
                   device=device)
    y = mod.tensor(rng.integers(0, 1000, args.batch), device=device)
    autocast_device = "cuda" if env.cuda else "cpu"

    def step():
        optimizer.zero_grad()
        with mod.autocast(device_type=autocast_device, dtype=mod.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    sync = mod.cuda.synchronize if env.cuda else None
    if env.use_ddp:
        dist.barrier()
    return per_call_us(step, args.steps, repeats=args.repeats, sync=sync, warmup=args.warmup,
                       include_device=True) / 1000.0


def run_each_framework(args, env):
    """--framework both: each framework in its own child of this rank, one after the other,
    so the two never share a process (nor a CUDA context or NCCL library); rank 0 compares."""
    times = {}
    for name in ("kiln", "torch"):
        if importlib.util.find_spec(name) is None:
            if env.rank == 0:
                print(f"{name:5s}  not installed: skipped", flush=True)
            continue
        # argparse keeps the last --framework.
        child = subprocess.run([sys.executable, os.path.abspath(__file__), *sys.argv[1:],
                                "--framework", name, "--child"], stdout=subprocess.PIPE,
                               text=True)
        for line in child.stdout.splitlines():
            if line.startswith("ms/step "):
                times[name] = float(line.split()[1])
            else:
                print(line, flush=True)
        if child.returncode != 0:
            sys.exit(f"[ddp benchmark] rank {env.rank}: the {name} run failed "
                     f"(exit status {child.returncode})")
    if env.rank == 0 and len(times) == 2:
        print(f"kiln/torch  {times['kiln'] / times['torch']:.2f}x", flush=True)


def main():
    args = parse_args()
    if args.smoke:
        args.batch, args.width, args.steps, args.repeats, args.warmup = 16, 32, 2, 3, 1
    env = Env(args)
    if args.framework == "both":
        run_each_framework(args, env)
        return
    mod, dist = (join_kiln if args.framework == "kiln" else join_torch)(env)
    ms = step_ms(mod, dist, env, args)
    if env.rank == 0:
        mode = "DDP" if env.use_ddp else "no DDP"
        device = "GPU" if env.cuda else "CPU (smoke)"
        print(f"{args.framework:5s}  world {env.world_size} x {device}  {mode}  batch/rank "
              f"{args.batch}  width {args.width}  {ms:8.2f} ms/step", flush=True)
        if args.child:
            print(f"ms/step {ms}", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
