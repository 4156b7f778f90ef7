"""Trains an MLP on scikit-learn's bundled 8x8 digits (no download), written
the way a PyTorch user writes it: kiln.nn, kiln.optim, a DataLoader, a
checkpoint at the end. `make train` runs this on the best device.
"""

import argparse
import os
import time

import numpy as np
from sklearn.datasets import load_digits

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from kiln.utils.data import DataLoader, TensorDataset

try:
    from tqdm import tqdm
except ImportError:  # the progress bar is optional
    tqdm = None


def best_device():
    return "cuda" if kiln.cuda.is_available() else "cpu"


def make_model(hidden):
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def digits_datasets(seed):
    digits = load_digits()
    features = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(features))
    n_train = int(0.8 * len(features))
    train, test = order[:n_train], order[n_train:]
    return (TensorDataset(kiln.from_numpy(features[train]), kiln.from_numpy(labels[train])),
            TensorDataset(kiln.from_numpy(features[test]), kiln.from_numpy(labels[test])))


@kiln.no_grad()
def predict(model, dataset, device):
    model.eval()
    x, _ = dataset.tensors
    return model(x.to(device)).argmax(dim=1).cpu()


def save_loss_curve(losses, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(np.arange(1, len(losses) + 1), losses)
    ax.set_xlabel("epoch")
    ax.set_ylabel("train loss")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def start_profiler(device, out):
    """A profiler over a few training steps (skipping the first, which warms up)."""
    from kiln.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)

    def report(prof):
        sort_by = "cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
        print(prof.key_averages().table(sort_by=sort_by, row_limit=15))
        os.makedirs(out, exist_ok=True)
        path = prof.export_chrome_trace(os.path.join(out, "digits_trace.json"))
        print(f"profiler trace: {path}")

    prof = profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                   on_trace_ready=report, record_shapes=True)
    prof.start()
    return prof


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--device", default=best_device())
    parser.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off",
                        help="mixed precision: bfloat16 autocast, or float16 autocast with a "
                             "GradScaler")
    parser.add_argument("--out", default="out", help="folder for the checkpoint and the plot")
    parser.add_argument("--profile", action="store_true",
                        help="profile steps 2-4 of the first epoch: print the op table and "
                             "write <out>/digits_trace.json (chrome://tracing, Perfetto)")
    args = parser.parse_args()

    kiln.manual_seed(0)
    device = kiln.device(args.device)
    train_set, test_set = digits_datasets(seed=0)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                        generator=kiln.Generator().manual_seed(0),
                        pin_memory=device.type == "cuda")
    model = make_model(args.hidden).to(device)
    optimizer = kiln.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = kiln.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    amp_dtype = {"off": None, "bf16": kiln.bfloat16, "fp16": kiln.float16}[args.amp]
    # float16 needs loss scaling so small gradients do not flush to zero; bfloat16 does not.
    scaler = kiln.amp.GradScaler(device.type, enabled=args.amp == "fp16")

    print(f"training a 64-{args.hidden}-10 MLP on {len(train_set)} digits on {device}"
          + ("" if amp_dtype is None else f" with {args.amp} autocast"))
    start = time.perf_counter()
    epochs = range(args.epochs)
    bar = tqdm(epochs, unit="epoch") if tqdm else None
    losses = []
    prof = start_profiler(device, args.out) if args.profile else None
    for epoch in bar if bar is not None else epochs:
        model.train()
        total = kiln.zeros((), device=device)
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad()
            with kiln.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            total += loss.detach()
            if prof is not None:
                prof.step()
        if prof is not None:
            prof.stop()
            prof = None
        scheduler.step()
        losses.append(total.item() / len(loader))
        if bar is not None:
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
        elif epoch % 5 == 4 or epoch == 0:
            print(f"epoch {epoch + 1:3d}  train loss {losses[-1]:.4f}")
    elapsed = time.perf_counter() - start

    predictions = predict(model, test_set, device)
    accuracy = (predictions == test_set.tensors[1]).float().mean().item()

    os.makedirs(args.out, exist_ok=True)
    checkpoint = os.path.join(args.out, "digits_mlp.safetensors")
    kiln.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
               "scaler": scaler.state_dict(), "epochs": args.epochs,
               "test_accuracy": accuracy}, checkpoint)
    restored = make_model(args.hidden)
    restored.load_state_dict(kiln.load(checkpoint, map_location="cpu")["model"])
    same = bool((predict(restored, test_set, "cpu") == predictions).all().item())
    print(f"checkpoint: {checkpoint} (reloaded model predicts identically: {same})")
    plot = save_loss_curve(losses, os.path.join(args.out, "digits_loss.png"))
    if plot:
        print(f"loss curve: {plot}")
    # The result comes last, so it ends `make train`'s output (after the build log).
    print(f"trained in {elapsed:.1f} s; test accuracy: {accuracy:.4f}")
    if not same:
        raise SystemExit("the reloaded checkpoint predicts differently")


if __name__ == "__main__":
    main()
