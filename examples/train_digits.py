"""Trains a two-layer MLP on scikit-learn's bundled 8x8 digits (no download),
written the way a PyTorch user writes a loop. `make train` runs this.

Manual SGD under kiln.no_grad() stands in for kiln.optim until the training
API lands.
"""

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits

import kiln
import kiln.nn.functional as F


def best_device():
    return "cuda" if kiln.cuda.is_available() else "cpu"


def init_linear(fan_in, fan_out, device):
    # Kaiming-uniform-like init, as nn.Linear does.
    bound = 1.0 / fan_in**0.5
    w = (kiln.rand(fan_in, fan_out, device=device) * 2 - 1) * bound
    b = (kiln.rand(fan_out, device=device) * 2 - 1) * bound
    return w.requires_grad_(), b.requires_grad_()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--device", default=best_device())
    args = parser.parse_args()

    kiln.manual_seed(0)
    rng = np.random.default_rng(0)
    digits = load_digits()
    features = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = rng.permutation(len(features))
    n_train = int(0.8 * len(features))
    train, test = order[:n_train], order[n_train:]

    device = args.device
    x_train = kiln.tensor(features[train], device=device)
    y_train = kiln.tensor(labels[train], device=device)
    x_test = kiln.tensor(features[test], device=device)
    y_test = kiln.tensor(labels[test], device=device)

    w1, b1 = init_linear(64, args.hidden, device)
    w2, b2 = init_linear(args.hidden, 10, device)
    params = [w1, b1, w2, b2]

    def model(x):
        return F.relu(x @ w1 + b1) @ w2 + b2

    print(f"training a 64-{args.hidden}-10 MLP on {n_train} digits on {device}")
    start = time.perf_counter()
    for epoch in range(args.epochs):
        perm = kiln.tensor(rng.permutation(n_train), device=device)
        total, batches = 0.0, 0
        for i in range(0, n_train, args.batch_size):
            idx = perm[i:i + args.batch_size]
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            for p in params:
                p.grad = None
            loss.backward()
            with kiln.no_grad():
                for p in params:
                    p -= args.lr * p.grad
            total += loss.item()
            batches += 1
        if epoch % 5 == 4 or epoch == 0:
            print(f"epoch {epoch + 1:3d}  train loss {total / batches:.4f}")

    with kiln.no_grad():
        predictions = model(x_test).argmax(dim=1)
        accuracy = (predictions == y_test).float().mean().item()
    print(f"trained in {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
