"""kiln.nn.utils.rnn (PackedSequence, pack/pad helpers) against NumPy, and RNN/LSTM/GRU on
packed input against running each sequence alone. PyTorch comparisons are in
test_vs_torch_nn_extras.py."""

import numpy as np
import pytest

import kiln
import kiln.nn as nn
from helpers import assert_close, rand
from kiln.nn.utils.rnn import (
    PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence,
    unpack_sequence, unpad_sequence,
)


def T(a, **kw):
    return kiln.tensor(np.asarray(a), **kw)


LENGTHS = [3, 5, 1, 4]


def seqs(lengths=LENGTHS, features=2):
    return [rand(n, features) for n in lengths]


def np_pad(arrays, value=0.0, left=False):
    steps = max(len(a) for a in arrays)
    out = np.full((steps, len(arrays)) + arrays[0].shape[1:], value)
    for b, a in enumerate(arrays):
        if left:
            out[steps - len(a):, b] = a
        else:
            out[:len(a), b] = a
    return out


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence(batch_first, side):
    arrays = seqs()
    ref = np_pad(arrays, -1.5, side == "left")
    if batch_first:
        ref = ref.swapaxes(0, 1)
    out = pad_sequence([T(a) for a in arrays], batch_first, -1.5, side)
    assert_close(out, ref)
    with pytest.raises(ValueError, match=r"\[pad_sequence\]"):
        pad_sequence([T(a) for a in arrays], padding_side="middle")
    with pytest.raises(RuntimeError, match=r"\[pad_sequence\]"):
        pad_sequence([])
    with pytest.raises(RuntimeError, match=r"\[pad_sequence\]"):
        pad_sequence([T(rand(2, 3)), T(rand(2, 2))])


def np_pack(arrays):
    order = sorted(range(len(arrays)), key=lambda b: -len(arrays[b]))
    ordered = [arrays[b] for b in order]
    sizes = [sum(1 for a in ordered if len(a) > t) for t in range(len(ordered[0]))]
    data = np.concatenate([np.stack([a[t] for a in ordered[:n]]) for t, n in enumerate(sizes)])
    return data, sizes, order


@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_unsorted_round_trip(batch_first):
    arrays = seqs()
    data, sizes, order = np_pack(arrays)
    padded = np_pad(arrays)
    if batch_first:
        padded = padded.swapaxes(0, 1)
    packed = pack_padded_sequence(T(padded), T(LENGTHS), batch_first, enforce_sorted=False)
    assert isinstance(packed, PackedSequence)
    assert_close(packed.data, data)
    assert packed.batch_sizes.tolist() == sizes and packed.batch_sizes.dtype == kiln.int64
    assert packed.sorted_indices.tolist() == order
    assert packed.unsorted_indices.tolist() == list(np.argsort(order))
    out, lengths = pad_packed_sequence(packed, batch_first, padding_value=7.0, total_length=6)
    ref = np_pad(arrays, 7.0)
    ref = np.concatenate([ref, np.full((1,) + ref.shape[1:], 7.0)])
    assert_close(out, ref.swapaxes(0, 1) if batch_first else ref)
    assert lengths.tolist() == LENGTHS and lengths.device.type == "cpu"
    for got, want in zip(unpack_sequence(packed), arrays):
        assert_close(got, want)
    for got, want in zip(unpad_sequence(out, lengths, batch_first), arrays):
        assert_close(got, want)


def test_pack_sequence_sorted_and_gradients():
    arrays = seqs([4, 3, 3, 1])
    leaves = [T(a, requires_grad=True) for a in arrays]
    packed = pack_sequence(leaves)
    assert packed.sorted_indices is None and packed.unsorted_indices is None
    data, sizes, _ = np_pack(arrays)
    assert_close(packed.data, data)
    weights = rand(*data.shape)
    (packed.data * T(weights)).sum().backward()
    offsets = np.cumsum([0] + sizes)
    for b, leaf in enumerate(leaves):
        want = np.stack([weights[offsets[t] + b] for t in range(len(arrays[b]))])
        assert_close(leaf.grad, want)


def test_pack_errors():
    padded = T(np_pad(seqs()))
    with pytest.raises(RuntimeError, match=r"\[pack_padded_sequence\].*enforce_sorted"):
        pack_padded_sequence(padded, LENGTHS)
    with pytest.raises(RuntimeError, match=r"\[pack_padded_sequence\]"):
        pack_padded_sequence(padded, [5, 4, 3], enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"\[pack_padded_sequence\]"):
        pack_padded_sequence(padded, [5, 4, 3, 0])
    with pytest.raises(RuntimeError, match=r"\[pack_padded_sequence\]"):
        pack_padded_sequence(padded, [6, 4, 3, 1])
    packed = pack_padded_sequence(padded, LENGTHS, enforce_sorted=False)
    with pytest.raises(ValueError, match=r"\[pad_packed_sequence\]"):
        pad_packed_sequence(packed, total_length=3)


def test_packed_sequence_to():
    packed = pack_sequence([T(a) for a in seqs([2, 3])], enforce_sorted=False)
    half = packed.to(kiln.float32)
    assert half.data.dtype == kiln.float32 and half.batch_sizes is packed.batch_sizes
    assert packed.double() is packed
    assert not packed.is_cuda


def run_alone(module, arrays, hx):
    """Each sequence through the module on its own (batch of one): outputs and final state."""
    outs, finals = [], []
    for b, a in enumerate(arrays):
        if hx is None:
            h = None
        elif isinstance(hx, tuple):
            h = tuple(s[:, b:b + 1] for s in hx)
        else:
            h = hx[:, b:b + 1]
        out, state = module(T(a)[:, None], h)
        outs.append(out[:, 0])
        finals.append(state)
    return outs, finals


@pytest.mark.parametrize("kind,kwargs", [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("GRU", {"bidirectional": True}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 2}),
])
@pytest.mark.parametrize("with_hx", [False, True])
def test_packed_rnn_matches_each_sequence_alone(kind, kwargs, with_hx):
    module = getattr(nn, kind)(2, 3, **kwargs).double()
    arrays = seqs()
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    hidden = kwargs.get("proj_size") or 3
    hx = None
    if with_hx:
        hx = T(rand(layers, len(arrays), hidden))
        if kind == "LSTM":
            hx = (hx, T(rand(layers, len(arrays), 3)))
    packed = pack_sequence([T(a) for a in arrays], enforce_sorted=False)
    out, state = module(packed, hx)
    assert isinstance(out, PackedSequence)
    assert out.batch_sizes is packed.batch_sizes
    padded, lengths = pad_packed_sequence(out)
    want_out, want_states = run_alone(module, arrays, hx)
    for b, want in enumerate(want_out):
        assert_close(padded[:LENGTHS[b], b], want.detach().numpy())
        assert_close(padded[LENGTHS[b]:, b], np.zeros((5 - LENGTHS[b], padded.shape[-1])))
    parts = state if kind == "LSTM" else (state,)
    for k, part in enumerate(parts):
        for b, want in enumerate(want_states):
            w = want[k] if kind == "LSTM" else want
            assert_close(part[:, b], w[:, 0].detach().numpy())


def test_packed_lstm_batch_first_and_gradients():
    module = nn.LSTM(2, 3, batch_first=True).double()
    arrays = seqs([2, 4, 3])
    leaves = [T(a, requires_grad=True) for a in arrays]
    out, (h, c) = module(pack_sequence(leaves, enforce_sorted=False))
    padded, _ = pad_packed_sequence(out, batch_first=True)
    assert padded.shape == (3, 4, 3)
    (padded.sum() + h.sum()).backward()
    assert all(leaf.grad is not None for leaf in leaves)
    assert module.weight_ih_l0.grad is not None

    def f(x0, x1):
        o, (hn, _) = module(pack_sequence([x0, x1], enforce_sorted=False))
        return o.data.sum() + hn.sum()

    assert kiln.autograd.gradcheck(f, [T(rand(2, 2), requires_grad=True),
                                       T(rand(3, 2), requires_grad=True)])


def test_packed_rnn_errors():
    module = nn.GRU(2, 3).double()
    packed = pack_sequence([T(rand(3, 4))])
    with pytest.raises(RuntimeError, match=r"\[GRU.forward\]"):
        module(packed)
    packed = pack_sequence([T(rand(3, 2)), T(rand(2, 2))])
    with pytest.raises(RuntimeError, match=r"\[GRU.forward\]"):
        module(packed, T(rand(1, 3, 3)))
