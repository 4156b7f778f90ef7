"""Trains a small CNN on scikit-learn's bundled digits upsampled to 32x32 (or on
synthetic images with --synthetic), on the best device: kiln.nn's Conv2d,
BatchNorm2d and pooling layers written the way a PyTorch user writes them.
"""

import argparse
import time

import numpy as np

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from kiln.utils.data import DataLoader, TensorDataset


def best_device():
    return "cuda" if kiln.cuda.is_available() else "cpu"


def make_model():
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(*block(1, 16), nn.MaxPool2d(2), *block(16, 32), nn.MaxPool2d(2),
                         *block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.1), nn.Linear(64, 10))


def digits_images():
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = kiln.from_numpy((digits.data / 16.0).astype(np.float32)).reshape(-1, 1, 8, 8)
    images = F.interpolate(small, size=(32, 32), mode="bilinear", align_corners=False)
    return images, kiln.from_numpy(digits.target.astype(np.int64))


def synthetic_images(n=2000, seed=0):
    """Ten classes, each a fixed random 8x8 pattern upsampled to 32x32, plus noise."""
    rng = np.random.default_rng(seed)
    patterns = rng.uniform(0, 1, size=(10, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, size=n)
    noisy = patterns[labels] + rng.normal(0, 0.3, size=(n, 1, 8, 8)).astype(np.float32)
    images = F.interpolate(kiln.from_numpy(noisy), scale_factor=4, mode="bilinear")
    return images, kiln.from_numpy(labels.astype(np.int64))


def split(images, labels, seed):
    order = kiln.from_numpy(np.random.default_rng(seed).permutation(len(labels)))
    n_train = int(0.8 * len(labels))
    train, test = order[:n_train], order[n_train:]
    return (TensorDataset(images[train], labels[train]),
            TensorDataset(images[test], labels[test]))


@kiln.no_grad()
def accuracy(model, dataset, device):
    model.eval()
    x, y = dataset.tensors
    return (model(x.to(device)).argmax(dim=1).cpu() == y).float().mean().item()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--device", default=best_device())
    parser.add_argument("--synthetic", action="store_true", help="no scikit-learn needed")
    parser.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off",
                        help="mixed precision: bfloat16 autocast, or float16 autocast with a "
                             "GradScaler")
    args = parser.parse_args(argv)

    kiln.manual_seed(0)
    device = kiln.device(args.device)
    images, labels = synthetic_images() if args.synthetic else digits_images()
    train_set, test_set = split(images, labels, seed=0)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                        generator=kiln.Generator().manual_seed(0))
    model = make_model().to(device)
    optimizer = kiln.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = kiln.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    amp_dtype = {"off": None, "bf16": kiln.bfloat16, "fp16": kiln.float16}[args.amp]
    scaler = kiln.amp.GradScaler(device.type, enabled=args.amp == "fp16")

    what = "synthetic images" if args.synthetic else "digits"
    print(f"training a CNN on {len(train_set)} {what} (1x32x32) on {device}"
          + ("" if amp_dtype is None else f" with {args.amp} autocast"))
    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        total = kiln.zeros((), device=device)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            with kiln.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            total += loss.detach().float()
        scheduler.step()
        print(f"epoch {epoch + 1:3d}  train loss {total.item() / len(loader):.4f}")
    elapsed = time.perf_counter() - start
    acc = accuracy(model, test_set, device)
    print(f"trained in {elapsed:.1f} s; test accuracy: {acc:.4f}")
    return acc


if __name__ == "__main__":
    main()
