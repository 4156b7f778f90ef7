"""Trains a character-level GPT on generated village tales (examples/data/tales.py, no
download), written the way a PyTorch user writes it, then samples text from it. The same
script runs under PyTorch (`--framework torch`) for a side-by-side comparison: the batches
come from a NumPy RNG, so both frameworks see the same data in the same order.

    PYTHONPATH=python python3 examples/train_gpt.py                      # kiln, best device
    PYTHONPATH=python python3 examples/train_gpt.py --framework torch    # the same in PyTorch

The last line printed is `final val loss: X`. benchmarks/transformer.py times the same model
(build_gpt below) against PyTorch.
"""

import argparse
import importlib
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
import tales  # noqa: E402

try:
    from tqdm import tqdm
except ImportError:  # the progress bar is optional
    tqdm = None


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 256
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    dropout: float = 0.0


def build_gpt(torch, cfg):
    """A GPT in the usual style, built from `torch` (kiln or PyTorch): token and position
    embeddings, pre-LayerNorm blocks of causal self-attention (fused qkv projection,
    scaled_dot_product_attention) and a GELU MLP, a final LayerNorm and an lm_head tied to the
    token embedding."""
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_head = cfg.n_head
            self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
            self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
            self.resid_dropout = nn.Dropout(cfg.dropout)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=cfg.dropout if self.training
                                               else 0.0, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
            self.gelu = nn.GELU()
            self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
            self.dropout = nn.Dropout(cfg.dropout)

        def forward(self, x):
            return self.dropout(self.proj(self.gelu(self.fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(cfg.n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(cfg.n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = cfg
            self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
            self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
            self.drop = nn.Dropout(cfg.dropout)
            self.blocks = nn.ModuleList([Block() for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.n_embd)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
            self.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            # Residual projections scaled down so the residual stream's variance does not grow
            # with depth.
            for name, p in self.named_parameters():
                if name.endswith("proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

        @staticmethod
        def _init_weights(module):
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

        def forward(self, idx, targets=None):
            B, T = idx.size()
            pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.blocks:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            if targets is None:
                return logits, None
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0):
            for _ in range(max_new_tokens):
                logits, _ = self(idx[:, -cfg.block_size:])
                probs = F.softmax(logits[:, -1, :].float() / temperature, dim=-1)
                idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
            return idx

    return GPT()


def adamw(torch, model, lr, weight_decay, fused):
    """AdamW with weight decay on the matrices only (not on biases, LayerNorm or gains)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), fused=fused)


class CharData:
    """The text as character ids, split 90/10 into train and validation."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        ids = np.array([self.stoi[c] for c in text], dtype=np.int64)
        n = int(0.9 * len(ids))
        self.train, self.val = ids[:n], ids[n:]

    def encode(self, s):
        return [self.stoi[c] for c in s]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


def batch(split, rng, batch_size, block_size):
    """(x, y) int64 arrays of `batch_size` windows starting at positions drawn from `rng`."""
    starts = rng.integers(0, len(split) - block_size - 1, batch_size)
    offsets = np.arange(block_size)
    return split[starts[:, None] + offsets], split[starts[:, None] + offsets + 1]


def lr_at(step, steps, lr, warmup):
    """Linear warm-up, then a cosine decay to a tenth of `lr`."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=["kiln", "torch"], default="kiln")
    parser.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--n-layer", type=int, default=6)
    parser.add_argument("--n-head", type=int, default=6)
    parser.add_argument("--n-embd", type=int, default=384)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--eval-interval", type=int, default=250)
    parser.add_argument("--eval-batches", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--data", default=None,
                        help="a text file; default: 2M characters of generated tales")
    parser.add_argument("--sample-chars", type=int, default=300)
    args = parser.parse_args()

    torch = importlib.import_module(args.framework)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    on_gpu = device.type == "cuda"

    if args.data:
        with open(args.data, encoding="utf-8") as f:
            text = f.read()
    else:
        text = tales.generate(2_000_000, seed=0)
    data = CharData(text)
    cfg = GPTConfig(vocab_size=len(data.chars), block_size=args.block_size,
                    n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
                    dropout=args.dropout)

    torch.manual_seed(args.seed)
    model = build_gpt(torch, cfg).to(device)
    optimizer = adamw(torch, model, args.lr, args.weight_decay, fused=on_gpu)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{args.framework}: training a {cfg.n_layer}x{cfg.n_head}x{cfg.n_embd} GPT "
          f"({n_params:,} parameters, vocab {cfg.vocab_size}) on {len(data.train)} "
          f"characters on {device}" + (" with bf16 autocast" if on_gpu else ""))

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=on_gpu)

    def to_device(x, y):
        return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)

    # The data order is NumPy's, seeded the same under both frameworks; the validation batches
    # are fixed so that every evaluation scores the same windows.
    train_rng, val_rng = np.random.default_rng(args.seed), np.random.default_rng(args.seed + 1)
    val_batches = [batch(data.val, val_rng, args.batch_size, args.block_size)
                   for _ in range(args.eval_batches)]

    @torch.no_grad()
    def val_loss():
        model.eval()
        total = torch.zeros((), device=device)
        for x, y in val_batches:
            with autocast():
                _, loss = model(*to_device(x, y))
            total += loss.float()
        model.train()
        return total.item() / len(val_batches)

    bar = tqdm(total=args.steps, unit="step") if tqdm else None

    def report(step, loss):
        (bar.write if bar is not None else print)(f"step {step}: val loss {loss:.4f}")

    report(0, val_loss())
    start = time.perf_counter()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        x, y = to_device(*batch(data.train, train_rng, args.batch_size, args.block_size))
        with autocast():
            _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if bar is not None:
            bar.update(1)
            if step % 50 == 0:  # reading the loss waits for the device: not every step
                bar.set_postfix(loss=f"{loss.item():.4f}")
        if (step + 1) % args.eval_interval == 0 and step + 1 < args.steps:
            report(step + 1, val_loss())
    if on_gpu:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if bar is not None:
        bar.close()
    final = val_loss()
    report(args.steps, final)
    print(f"trained {args.steps} steps in {elapsed:.1f} s "
          f"({elapsed / max(args.steps, 1) * 1e3:.1f} ms/step, evaluations included)")

    torch.manual_seed(args.seed)
    context = torch.tensor([data.encode("Once")], dtype=torch.long, device=device)
    model.eval()
    with autocast():
        sample = model.generate(context, args.sample_chars)[0].tolist()
    print("sample:\n" + data.decode(sample))
    print(f"final val loss: {final:.4f}")


if __name__ == "__main__":
    main()
