"""The models kiln.export is tested on (tests/python/test_export*.py, test_cuda_export.py):
each builder returns (model in eval mode, sample args, dynamic_shapes, inputs at other sizes).
Sample sizes differ from every fixed size of the models (Note [Symbolic sizes])."""

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import kiln
import kiln.nn as nn
from kiln.export import Dim

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name):
    spec = importlib.util.spec_from_file_location(f"_export_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _randn(rng, *shape):
    return kiln.from_numpy(rng.standard_normal(shape).astype(np.float32))


def mlp(rng):
    """examples/train_digits.py's model."""
    kiln.manual_seed(0)
    model = _example("train_digits").make_model(48).eval()
    batch = Dim("batch", min=1, max=4096)
    return (model, (_randn(rng, 7, 64),), {"input": {0: batch}},
            [(_randn(rng, n, 64),) for n in (1, 2, 33)])


def cnn(rng):
    """examples/train_cnn.py's model (conv, batch norm with non-trivial running stats, relu,
    max pool, adaptive average pool, flatten, dropout, linear)."""
    kiln.manual_seed(0)
    model = _example("train_cnn").make_model()
    with kiln.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(_randn(rng, m.num_features) * 0.1)
                m.running_var.copy_(kiln.from_numpy(
                    rng.uniform(0.5, 2.0, m.num_features).astype(np.float32)))
    model.eval()
    batch = Dim("batch", min=1, max=256)
    return (model, (_randn(rng, 6, 1, 20, 20),), {"input": {0: batch}},
            [(_randn(rng, n, 1, 20, 20),) for n in (1, 5)])


def encoder(rng):
    """nn.TransformerEncoderLayer, batch first, dynamic batch and sequence length."""
    kiln.manual_seed(0)
    model = nn.TransformerEncoderLayer(24, 4, dim_feedforward=40, dropout=0.1,
                                       batch_first=True).eval()
    dims = {"src": {0: Dim("batch", min=1, max=64), 1: Dim("seq", min=1, max=512)}}
    return (model, (_randn(rng, 3, 11, 24),), dims,
            [(_randn(rng, b, t, 24),) for b, t in ((1, 1), (2, 5), (5, 17))])


@dataclass
class GPTConfig:
    vocab_size: int = 29
    block_size: int = 50
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16
    dropout: float = 0.0


def gpt(rng):
    """examples/train_gpt.py's build_gpt, small; returns (logits, None)."""
    kiln.manual_seed(0)
    cfg = GPTConfig()
    model = _example("train_gpt").build_gpt(kiln, cfg).eval()

    def tokens(b, t):
        return kiln.from_numpy(rng.integers(0, cfg.vocab_size, (b, t)).astype(np.int64))

    dims = {"idx": {0: Dim("batch", min=1, max=64), 1: Dim("seq", min=1, max=cfg.block_size)}}
    return model, (tokens(3, 11),), dims, [(tokens(b, t),) for b, t in ((1, 1), (2, 7), (4, 50))]


MODELS = {"mlp": mlp, "cnn": cnn, "encoder": encoder, "gpt": gpt}


def first(out):
    """The tensor of a model output (GPT returns (logits, None))."""
    return out[0] if isinstance(out, tuple) else out
