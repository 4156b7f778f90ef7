"""The PyTorch training step from the training-API issue, unchanged except for
the import: kiln runs it on the best device and the loss falls over 50 steps."""

import kiln as torch
import kiln.nn as nn
import kiln.optim as optim


def main(steps=50):
    torch.manual_seed(0)
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10)).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters())
    data = torch.randn(100, 784).to(device)
    target = torch.randint(0, 10, (100,)).to(device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    print(f"{device}: loss {losses[0]:.4f} -> {losses[-1]:.4f} over {steps} steps")
    return losses


if __name__ == "__main__":
    main()
