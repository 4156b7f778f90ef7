"""One rank of a DistributedDataParallel test (tests/python/test_ddp.py starts one process per
rank): python ddp_worker.py SCENARIO BACKEND RANK WORLD_SIZE PORT. Prints one JSON line."""

import datetime
import json
import os
import sys

import numpy as np

import kiln
import kiln.distributed as dist
import kiln.nn as nn
from kiln.nn.parallel import DistributedDataParallel as DDP

BATCH = 4  # per rank
STEPS = 3


def _mlp(seed):
    kiln.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 6), nn.Tanh(),
                         nn.Linear(6, 3)).double()


def _global_batch(step, world_size, micro=0):
    rng = np.random.default_rng(100 * step + micro)
    return (rng.standard_normal((world_size * BATCH, 5)),
            rng.standard_normal((world_size * BATCH, 3)))


def _loss(model, x, y):
    return ((model(x) - y) ** 2).mean()


def _params(model):
    return [p.detach().cpu().tolist() for p in model.parameters()]


class Setup:
    def __init__(self, backend, rank, world_size):
        self.rank, self.world_size = rank, world_size
        self.device = kiln.device("cuda", rank) if backend == "nccl" else kiln.device("cpu")
        if backend == "nccl":
            kiln.cuda.set_device(rank)

    def ddp(self, model, **kwargs):
        model = model.to(self.device)
        ids = [self.rank] if self.device.type == "cuda" else None
        return DDP(model, device_ids=ids, **kwargs)

    def local(self, array):
        """This rank's slice of a global batch, on this rank's device."""
        part = array[self.rank * BATCH:(self.rank + 1) * BATCH]
        return kiln.tensor(part).to(self.device)


def train(s, **ddp_kwargs):
    """STEPS of SGD on different data per rank (models start from different seeds: DDP
    broadcasts rank 0's), and the same steps in this process on the concatenated batches."""
    ddp = s.ddp(_mlp(seed=s.rank), bucket_cap_mb=150 / 2**20, **ddp_kwargs)
    opt = kiln.optim.SGD(ddp.parameters(), lr=0.2)
    ref = _mlp(seed=0)
    opt_ref = kiln.optim.SGD(ref.parameters(), lr=0.2)
    for step in range(STEPS):
        x, y = _global_batch(step, s.world_size)
        opt.zero_grad()
        _loss(ddp, s.local(x), s.local(y)).backward()
        opt.step()
        opt_ref.zero_grad()
        _loss(ref, kiln.tensor(x), kiln.tensor(y)).backward()
        opt_ref.step()
    return {"params": _params(ddp.module), "reference": _params(ref),
            "buckets": len(ddp._buckets)}


def view_no_sync(s):
    """gradient_as_bucket_view, two micro-batches per step, the first under no_sync()."""
    ddp = s.ddp(_mlp(seed=s.rank), bucket_cap_mb=150 / 2**20, gradient_as_bucket_view=True)
    opt = kiln.optim.SGD(ddp.parameters(), lr=0.2)
    ref = _mlp(seed=0)
    opt_ref = kiln.optim.SGD(ref.parameters(), lr=0.2)
    for step in range(STEPS):
        opt.zero_grad(set_to_none=step % 2 == 0)
        opt_ref.zero_grad()
        for micro in range(2):
            x, y = _global_batch(step, s.world_size, micro)
            if micro == 0:
                with ddp.no_sync():
                    _loss(ddp, s.local(x), s.local(y)).backward()
            else:
                _loss(ddp, s.local(x), s.local(y)).backward()
            _loss(ref, kiln.tensor(x), kiln.tensor(y)).backward()
        opt.step()
        opt_ref.step()
    return {"params": _params(ddp.module), "reference": _params(ref)}


class _Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 4)  # used on rank 0 only
        self.spare = nn.Linear(4, 2)  # used nowhere

    def forward(self, x, use_head):
        out = self.body(x)
        return self.head(out) if use_head else out


def unused(s):
    model = _Heads().double()
    x = kiln.tensor(np.full((2, 4), 1.0 + s.rank)).to(s.device)
    error = ""
    strict = s.ddp(model)
    try:
        strict(x, s.rank == 0).sum().backward()
    except RuntimeError as e:
        error = str(e)
    del strict
    # One bucket per parameter: the spare's buckets are launched during forward.
    ddp = s.ddp(model, find_unused_parameters=True, bucket_cap_mb=1e-6)
    opt = kiln.optim.SGD(ddp.parameters(), lr=0.1)
    ok = True
    for _ in range(2):
        opt.zero_grad()
        ddp(x, s.rank == 0).sum().backward()
        ok = ok and model.spare.weight.grad is None and model.head.weight.grad is not None
        opt.step()
    return {"error": error, "found_unused_ok": ok, "params": _params(model)}


def broadcast(s):
    kiln.manual_seed(s.rank)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).double()
    model[1].running_mean.add_(kiln.randn(4, dtype=kiln.float64))
    ddp = s.ddp(model)
    same_after_init = _params(model) + [b.cpu().tolist() for b in model.buffers()]
    # Diverge the buffers again: the next forward broadcasts rank 0's.
    model[1].running_var.add_(float(s.rank))
    model.eval()
    with kiln.no_grad():
        ddp(kiln.randn(2, 3, dtype=kiln.float64).to(s.device))
    return {"params": same_after_init,
            "buffers": [b.cpu().tolist() for b in model.buffers()]}


def amp(s):
    """float32 model under bf16 autocast with a GradScaler: DDP reduces the (scaled) float32
    gradients before the scaler unscales them, so every rank steps the same way."""
    kiln.manual_seed(s.rank)
    ddp = s.ddp(nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 4)))
    before = _params(ddp.module)
    opt = kiln.optim.Adam(ddp.parameters(), lr=1e-2)
    scaler = kiln.amp.GradScaler(s.device.type)
    for step in range(STEPS):
        rng = np.random.default_rng(step)
        x = rng.standard_normal((s.world_size * BATCH, 6)).astype(np.float32)
        y = rng.integers(0, 4, s.world_size * BATCH)
        opt.zero_grad()
        with kiln.autocast(device_type=s.device.type, dtype=kiln.bfloat16):
            out = ddp(s.local(x))
            loss = nn.functional.cross_entropy(out, s.local(y))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    after = _params(ddp.module)
    return {"params": after, "changed": after != before}


def subgroup(s):
    """DDP over new_group([1, 2]) of a world of 3: rank 0 stays out; the group's first rank
    (global rank 1) is the one whose parameters everyone starts from."""
    group = dist.new_group([1, 2])
    if s.rank == 0:
        try:
            DDP(_mlp(seed=0), process_group=group)
        except RuntimeError as e:
            return {"params": None, "error": str(e)}
        return {"params": None, "error": ""}
    group_rank = s.rank - 1
    model = _mlp(seed=s.rank).to(s.device)
    ddp = DDP(model, process_group=group, device_ids=[s.rank] if s.device.type == "cuda"
              else None)
    opt = kiln.optim.SGD(ddp.parameters(), lr=0.2)
    ref = _mlp(seed=1)
    opt_ref = kiln.optim.SGD(ref.parameters(), lr=0.2)
    for step in range(STEPS):
        x, y = _global_batch(step, 2)
        part = slice(group_rank * BATCH, (group_rank + 1) * BATCH)
        opt.zero_grad()
        _loss(ddp, kiln.tensor(x[part]).to(s.device), kiln.tensor(y[part]).to(s.device)).backward()
        opt.step()
        opt_ref.zero_grad()
        _loss(ref, kiln.tensor(x), kiln.tensor(y)).backward()
        opt_ref.step()
    return {"params": _params(model), "reference": _params(ref)}


def mismatch(s):
    width = 3 if s.rank == 0 else 4
    try:
        s.ddp(nn.Sequential(nn.Linear(5, width), nn.Linear(width, 2)))
    except RuntimeError as e:
        return {"error": str(e)}
    return {"error": ""}


SCENARIOS = {"train": train, "view_no_sync": view_no_sync, "unused": unused,
             "broadcast": broadcast, "mismatch": mismatch, "amp": amp,
             "subgroup": subgroup}


def main():
    scenario, backend, rank, world_size, port = sys.argv[1:6]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=rank,
                      WORLD_SIZE=world_size)
    if backend == "nccl":
        kiln.cuda.set_device(int(rank))  # one GPU per rank, before NCCL picks the device
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=30))
    try:
        result = SCENARIOS[scenario](Setup(backend, int(rank), int(world_size)))
    finally:
        dist.destroy_process_group()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
