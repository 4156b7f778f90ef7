"""No host synchronization on the op path (DESIGN.md decision 6): training steps run under
kiln.cuda.set_sync_debug_mode("error"), index bounds are checked on the GPU and a bad index
raises IndexError at the next synchronization (Note [Deferred index errors], ops/index.cpp),
and the sync debug mode flags the calls that wait for the GPU (Note [Sync debug mode],
cuda/runtime.cpp). The mode's API and the CPU's eager index errors run everywhere; the rest
skips without a GPU."""

import contextlib
import math
import warnings

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from helpers import RNG, requires_gpu


@contextlib.contextmanager
def sync_debug_mode(mode):
    kiln.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        kiln.cuda.set_sync_debug_mode("default")


# --- the mode's API (no GPU needed) ---------------------------------------------------------

@pytest.mark.parametrize("mode, value", [("default", 0), ("warn", 1), ("error", 2),
                                         (0, 0), (1, 1), (2, 2)])
def test_set_sync_debug_mode_takes_names_and_numbers(mode, value):
    with sync_debug_mode(mode):
        assert kiln.cuda.get_sync_debug_mode() == value
    assert kiln.cuda.get_sync_debug_mode() == 0


@pytest.mark.parametrize("bad, message", [
    ("loud", r"expected one of `default`, `warn`, `error`, got 'loud'"),
    ("Error", r"expected one of `default`, `warn`, `error`"),
    (3, r"expected one of 0,1,2, got 3"),
    (-1, r"expected one of 0,1,2, got -1"),
    (1.0, r"expected a str or an int, got float"),
    (None, r"expected a str or an int, got NoneType"),
    (True, r"expected a str or an int, got bool"),
])
def test_set_sync_debug_mode_refuses_other_values(bad, message):
    kiln.cuda.set_sync_debug_mode("warn")
    try:
        with pytest.raises(RuntimeError, match=r"\[cuda.set_sync_debug_mode\] .*" + message):
            kiln.cuda.set_sync_debug_mode(bad)
        assert kiln.cuda.get_sync_debug_mode() == 1  # unchanged by the refused call
    finally:
        kiln.cuda.set_sync_debug_mode(0)


# The CPU keeps checking indices eagerly, with the messages the deferred errors reuse.
CPU_INDEX_ERRORS = [
    ("embedding", lambda: F.embedding(kiln.tensor([1, 5]), kiln.ones(5, 2)), IndexError,
     r"\[embedding\] index 5 is out of bounds for 5 rows of weight \(num_embeddings\)$"),
    ("cross_entropy", lambda: F.cross_entropy(kiln.ones(2, 3), kiln.tensor([0, 3])), IndexError,
     r"\[cross_entropy\] Target 3 is out of bounds for 3 classes$"),
    ("nll_loss", lambda: F.nll_loss(kiln.ones(2, 3), kiln.tensor([-2, 0])), IndexError,
     r"\[nll_loss\] Target -2 is out of bounds for 3 classes$"),
    ("index_select", lambda: kiln.ones(3, 2).index_select(0, kiln.tensor([0, 3])), IndexError,
     r"\[index_select\] index out of range in self: index 3 for dimension 0 with size 3$"),
    ("index", lambda: kiln.ones(3, 2)[kiln.tensor([-4])], IndexError,
     r"\[index\] index -4 is out of bounds for dimension 0 with size 3$"),
    ("gather", lambda: kiln.ones(3, 2).gather(1, kiln.tensor([[0], [2]])), RuntimeError,
     r"\[gather\] index 2 is out of bounds for dimension 1 with size 2$"),
    ("scatter", lambda: kiln.zeros(3).scatter(0, kiln.tensor([4]), kiln.ones(1)), RuntimeError,
     r"\[scatter\] index 4 is out of bounds for dimension 0 with size 3$"),
    ("take", lambda: kiln.ones(2, 2).take(kiln.tensor([4])), IndexError,
     r"\[take\] out of range: tried to access index 4 on a tensor of 4 elements$"),
]


@pytest.mark.parametrize("name, fn, error, message", CPU_INDEX_ERRORS,
                         ids=[c[0] for c in CPU_INDEX_ERRORS])
def test_cpu_index_errors_are_raised_by_the_op(name, fn, error, message):
    with pytest.raises(error, match=message):
        fn()


# --- training steps under "error" ---------------------------------------------------------

def train(make_model, batch, device, make_opt, steps=3):
    """Losses (floats) and final parameters (NumPy) of `steps` steps on `device`; on CUDA the
    steps run under set_sync_debug_mode("error"). The model is built on the CPU from seed 0,
    so both devices start from the same parameters."""
    kiln.manual_seed(0)
    model = make_model().to(device)
    opt = make_opt(model.parameters())
    inputs, target = (t.to(device) for t in batch)
    losses = []
    with sync_debug_mode("error" if device == "cuda" else "default"):
        for _ in range(steps):
            loss = F.cross_entropy(model(inputs), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    return ([loss.item() for loss in losses],
            [p.detach().cpu().double().numpy() for p in model.parameters()])


def check_step_matches_cpu(make_model, batch, make_opt, rtol=1e-4, atol=1e-5):
    cpu_losses, cpu_params = train(make_model, batch, "cpu", make_opt)
    gpu_losses, gpu_params = train(make_model, batch, "cuda", make_opt)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=rtol, atol=atol)
    assert cpu_losses[-1] < cpu_losses[0]  # the steps trained something
    for g, c in zip(gpu_params, cpu_params):
        np.testing.assert_allclose(g, c, rtol=rtol * 10, atol=atol * 10)


class TokenClassifier(nn.Module):
    def __init__(self, vocab=40, width=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, width, padding_idx=0)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.emb(tokens)).reshape(-1, self.head.out_features)


class TinyLM(nn.Module):
    """Token and position embeddings, one causal softmax-attention block written with
    matmuls, layer_norm and a vocabulary head."""

    def __init__(self, vocab=32, width=16, context=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(kiln.arange(t, device=idx.device))
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(x.shape[-1]))
        causal = kiln.triu(kiln.ones(t, t, dtype=kiln.bool, device=idx.device), diagonal=1)
        att = F.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        x = x + self.proj(att @ v)
        return self.head(self.ln2(x)).reshape(b * t, -1)


@requires_gpu
def test_embedding_cross_entropy_step_runs_without_host_syncs():
    tokens = kiln.tensor(RNG.integers(0, 40, size=(8, 6)))
    target = kiln.tensor(RNG.integers(0, 40, size=48))
    target[::7] = -100  # ignored targets take the kernels' ignore path
    check_step_matches_cpu(TokenClassifier, (tokens, target),
                           lambda p: kiln.optim.SGD(p, lr=0.5, momentum=0.9))


@requires_gpu
def test_mlp_adam_step_runs_without_host_syncs():
    x = kiln.tensor(RNG.normal(size=(32, 20)).astype(np.float32))
    y = kiln.tensor(RNG.integers(0, 5, size=32))
    check_step_matches_cpu(lambda: nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)),
                           (x, y), lambda p: kiln.optim.Adam(p, lr=1e-2))


@requires_gpu
def test_cnn_step_runs_without_host_syncs():
    x = kiln.tensor(RNG.normal(size=(4, 3, 8, 8)).astype(np.float32))
    y = kiln.tensor(RNG.integers(0, 10, size=4))

    def cnn():
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))

    # cuDNN may use TF32 for the convolutions: a looser match.
    check_step_matches_cpu(cnn, (x, y), lambda p: kiln.optim.SGD(p, lr=0.05, momentum=0.9),
                           rtol=2e-2, atol=2e-3)


@requires_gpu
def test_transformer_step_runs_without_host_syncs():
    idx = kiln.tensor(RNG.integers(0, 32, size=(4, 8)))
    target = kiln.tensor(RNG.integers(0, 32, size=32))
    check_step_matches_cpu(TinyLM, (idx, target), lambda p: kiln.optim.Adam(p, lr=1e-2),
                           rtol=1e-3, atol=1e-4)


@requires_gpu
def test_small_host_to_device_copies_are_not_flagged_but_large_pageable_ones_are():
    with sync_debug_mode("error"):
        small = kiln.tensor([1.0, 2.0, 3.0]).cuda()  # staged through pinned memory
        pinned = kiln.zeros(5_000_000).pin_memory().cuda()
        with pytest.raises(RuntimeError, match=r"\[copy_\] called a synchronizing CUDA operation"):
            kiln.zeros(5_000_000).cuda()  # 20 MB of pageable memory
    assert small.tolist() == [1.0, 2.0, 3.0]
    assert pinned.sum().item() == 0.0


# --- deferred index errors ----------------------------------------------------------------

def cuda_long(values):
    return kiln.tensor(values, dtype=kiln.int64).cuda()


W = np.arange(10.0).reshape(5, 2)

# (name, op producing a result from an out-of-range index, message, the result's expected
# values: elements whose index was good are computed, the bad ones skipped or zero)
DEFERRED = [
    ("embedding", lambda: F.embedding(cuda_long([1, 7, 4]), kiln.tensor(W).cuda()),
     r"\[embedding\] index 7 is out of bounds for 5 rows of weight \(num_embeddings\)",
     [[2.0, 3.0], [0.0, 0.0], [8.0, 9.0]]),
    ("embedding_int32",
     lambda: F.embedding(kiln.tensor([-1, 0], dtype=kiln.int32).cuda(), kiln.tensor(W).cuda()),
     r"\[embedding\] index -1 is out of bounds for 5 rows", [[0.0, 0.0], [0.0, 1.0]]),
    ("cross_entropy", lambda: F.cross_entropy(kiln.zeros(3, 4).cuda(), cuda_long([0, 9, 1]),
                                              reduction="none"),
     r"\[cross_entropy\] Target 9 is out of bounds for 4 classes",
     [math.log(4), 0.0, math.log(4)]),
    ("cross_entropy_weighted",
     lambda: F.cross_entropy(kiln.zeros(3, 4).cuda(), cuda_long([0, -5, 1]),
                             weight=kiln.ones(4).cuda(), reduction="none"),
     r"\[cross_entropy\] Target -5 is out of bounds for 4 classes",
     [math.log(4), 0.0, math.log(4)]),
    ("nll_loss", lambda: F.nll_loss(kiln.tensor(W).reshape(2, 5).cuda(), cuda_long([2, 5]),
                                    reduction="none"),
     r"\[nll_loss\] Target 5 is out of bounds for 5 classes", [-2.0, 0.0]),
    ("index_select", lambda: kiln.tensor(W).cuda().index_select(0, cuda_long([4, 5])),
     r"\[index_select\] index out of range in self: index 5 for dimension 0 with size 5",
     [[8.0, 9.0], [0.0, 0.0]]),
    ("index", lambda: kiln.tensor(W).cuda()[cuda_long([-6, -1])],
     r"\[index\] index -6 is out of bounds for dimension 0 with size 5",
     [[0.0, 0.0], [8.0, 9.0]]),
    ("gather", lambda: kiln.tensor(W).cuda().gather(1, cuda_long([[1], [2], [0], [1], [0]])),
     r"\[gather\] index 2 is out of bounds for dimension 1 with size 2",
     [[1.0], [0.0], [4.0], [7.0], [8.0]]),
    ("scatter", lambda: kiln.zeros(4).cuda().scatter(0, cuda_long([1, 4]), kiln.ones(2).cuda()),
     r"\[scatter\] index 4 is out of bounds for dimension 0 with size 4", [0.0, 1.0, 0.0, 0.0]),
    ("index_add", lambda: kiln.zeros(3).cuda().index_add(0, cuda_long([3, 0]),
                                                         kiln.ones(2).cuda()),
     r"\[index_add\] index out of range in self: index 3 for dimension 0 with size 3",
     [1.0, 0.0, 0.0]),
    ("take", lambda: kiln.tensor(W).cuda().take(cuda_long([9, 10])),
     r"\[take\] out of range: tried to access index 10 on a tensor of 10 elements", [9.0, 0.0]),
]


@requires_gpu
@pytest.mark.parametrize("name, fn, message, expected", DEFERRED, ids=[c[0] for c in DEFERRED])
def test_bad_index_raises_at_the_next_sync_and_the_gpu_stays_usable(name, fn, message,
                                                                    expected):
    # Launching the op waits for nothing: it passes under "error".
    with sync_debug_mode("error"):
        out = fn()
    with pytest.raises(IndexError, match=message + r".*raised at this synchronization"):
        out.sum().item()
    # The record was cleared: the next synchronization is clean, and the bad index's elements
    # were skipped while the good ones were computed.
    kiln.cuda.synchronize()
    np.testing.assert_allclose(np.array(out.tolist()), np.array(expected), rtol=1e-6)
    x = kiln.arange(6.0, device="cuda").reshape(2, 3)
    assert (x @ x.t()).tolist() == [[5.0, 14.0], [14.0, 50.0]]


@requires_gpu
def test_bad_index_surfaces_at_explicit_synchronization_even_in_error_mode():
    # kiln.cuda.synchronize() is not a flagged call; the deferred error still surfaces there.
    with sync_debug_mode("error"):
        F.embedding(cuda_long([3, 11]), kiln.ones(4, 2).cuda())
        with pytest.raises(IndexError, match=r"\[embedding\] index 11 is out of bounds"):
            kiln.cuda.synchronize()
        kiln.cuda.synchronize()


@requires_gpu
def test_bad_index_surfaces_at_stream_and_event_synchronization():
    s = kiln.cuda.Stream()
    with kiln.cuda.stream(s):
        kiln.ones(3).cuda().index_select(0, cuda_long([3]))
        e = s.record_event()
    with pytest.raises(IndexError, match=r"\[index_select\] index out of range in self: index 3"):
        e.synchronize()
    with kiln.cuda.stream(s):
        kiln.ones(3).cuda()[cuda_long([-4])]
    with pytest.raises(IndexError, match=r"\[index\] index -4 is out of bounds"):
        s.synchronize()
    s.synchronize()


@requires_gpu
def test_only_the_first_bad_index_is_reported():
    out = kiln.ones(3).cuda().index_select(0, cuda_long([5, 6, 7]))
    out2 = F.embedding(cuda_long([9]), kiln.ones(2, 2).cuda())
    with pytest.raises(IndexError) as err:
        kiln.cuda.synchronize()
    assert "[index_select]" in str(err.value) and "[embedding]" not in str(err.value)
    kiln.cuda.synchronize()
    assert out.tolist() == [0.0, 0.0, 0.0] and out2.tolist() == [[0.0, 0.0]]


@requires_gpu
def test_bad_embedding_index_gets_no_gradient():
    w = kiln.ones(4, 2).cuda().requires_grad_(True)
    F.embedding(cuda_long([1, 8, 1]), w).sum().backward()
    with pytest.raises(IndexError, match=r"\[embedding\] index 8"):
        kiln.cuda.synchronize()
    assert w.grad.tolist() == [[0.0, 0.0], [2.0, 2.0], [0.0, 0.0], [0.0, 0.0]]


# --- the sync debug mode ------------------------------------------------------------------

@requires_gpu
def test_item_warns_in_warn_mode_and_raises_in_error_mode():
    x = kiln.ones(3, device="cuda").sum()
    with sync_debug_mode("warn"):
        with pytest.warns(UserWarning, match=r"\[copy_\] called a synchronizing CUDA operation"):
            assert x.item() == 3.0
    with sync_debug_mode("error"):
        with pytest.raises(RuntimeError, match=r"\[copy_\] called a synchronizing CUDA operation"):
            x.item()
        with pytest.raises(RuntimeError, match=r"called a synchronizing CUDA operation"):
            x.cpu()
        with pytest.raises(RuntimeError, match=r"called a synchronizing CUDA operation"):
            kiln.nonzero(kiln.ones(3, device="cuda"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.item() == 3.0  # the default mode says nothing


@requires_gpu
def test_which_explicit_synchronizations_are_flagged_matches_pytorch():
    s, e = kiln.cuda.Stream(), kiln.cuda.Event()
    e.record()
    with sync_debug_mode("error"):
        kiln.cuda.synchronize()
        e.synchronize()
        with pytest.raises(RuntimeError,
                           match=r"\[cuda.Stream.synchronize\] called a synchronizing CUDA"):
            s.synchronize()
