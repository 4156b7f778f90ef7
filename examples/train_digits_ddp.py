"""The digits MLP of train_digits.py trained data-parallel, one process per device, the way a
PyTorch user writes it: launched by torchrun's counterpart,

    python -m kiln.distributed.run --nproc-per-node 2 examples/train_digits_ddp.py

each rank joins the default process group (NCCL on GPUs, Gloo on the CPU), reads its share of
the data through a DistributedSampler, and DistributedDataParallel averages the gradients, so
every rank ends with the same weights. Rank 0 reports the test accuracy and saves the model.
"""

import argparse
import os
import time

import kiln
import kiln.distributed as dist
import kiln.nn.functional as F
from kiln.nn.parallel import DistributedDataParallel as DDP
from kiln.utils.data import DataLoader
from kiln.utils.data.distributed import DistributedSampler
from train_digits import digits_datasets, make_model, predict


def join():
    """Joins the launcher's process group; returns this rank's device."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    # One GPU per rank when there are enough of them; otherwise every rank on the CPU.
    use_cuda = kiln.cuda.is_available() and kiln.cuda.device_count() >= world_size
    if use_cuda:
        kiln.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if use_cuda else "gloo")
    return kiln.device("cuda", local_rank) if use_cuda else kiln.device("cpu")


def same_weights_everywhere(model):
    """True when every rank holds exactly rank 0's parameters."""
    flat = kiln.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    mismatch = (flat != reference).any().to(kiln.int32)
    dist.all_reduce(mismatch, op=dist.ReduceOp.MAX)
    return mismatch.item() == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--out", default="out", help="folder for rank 0's checkpoint")
    args = parser.parse_args()

    device = join()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    kiln.manual_seed(0)  # the same initial weights on every rank (DDP broadcasts rank 0's too)
    train_set, test_set = digits_datasets(seed=0)
    sampler = DistributedSampler(train_set, shuffle=True, seed=0)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    model = DDP(make_model(args.hidden).to(device))
    optimizer = kiln.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = kiln.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    if rank == 0:
        print(f"training a 64-{args.hidden}-10 MLP data-parallel on {world_size} ranks "
              f"({device.type}, {dist.get_backend()}), {len(sampler)} digits per rank")

    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        scheduler.step()
    elapsed = time.perf_counter() - start

    in_sync = same_weights_everywhere(model.module)
    if rank == 0:
        predictions = predict(model.module, test_set, device)
        accuracy = (predictions == test_set.tensors[1]).float().mean().item()
        print(f"trained in {elapsed:.1f} s; test accuracy: {accuracy:.4f}; "
              f"weights identical on every rank: {in_sync}")
        os.makedirs(args.out, exist_ok=True)
        checkpoint = os.path.join(args.out, "digits_mlp_ddp.safetensors")
        kiln.save(model.module.state_dict(), checkpoint)
        print(f"checkpoint: {checkpoint}")
    dist.destroy_process_group()
    if not in_sync:
        raise SystemExit(f"rank {rank}: the replicas' weights diverged")


if __name__ == "__main__":
    main()
