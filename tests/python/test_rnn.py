"""Recurrent layers (RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU) and PReLU against NumPy
references written from the textbook equations with each module's own weights; float64
gradchecks; PyTorch's state_dict keys; and, where PyTorch is installed, the same modules in
torch with the same weights (CPU and CUDA)."""

import math
import warnings

import numpy as np
import pytest

import kiln
from kiln import nn
from kiln.nn import functional as F
from helpers import RNG, assert_close, requires_gpu

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


def U(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_step(mode, x, state, w_ih, w_hh, b_ih=None, b_hh=None, w_hr=None):
    """One step on a batch x (N, F); state is h, or (h, c) for LSTM. Returns (h, state)."""
    h = state[0] if mode == "LSTM" else state
    gi = x @ w_ih.T + (0.0 if b_ih is None else b_ih)
    gh = h @ w_hh.T + (0.0 if b_hh is None else b_hh)
    if mode == "RNN_TANH":
        h = np.tanh(gi + gh)
        return h, h
    if mode == "RNN_RELU":
        h = np.maximum(gi + gh, 0.0)
        return h, h
    n_h = w_hh.shape[0] // (3 if mode == "GRU" else 4)
    part = [slice(k * n_h, (k + 1) * n_h) for k in range(4)]
    if mode == "GRU":
        r = sigmoid(gi[:, part[0]] + gh[:, part[0]])
        z = sigmoid(gi[:, part[1]] + gh[:, part[1]])
        n = np.tanh(gi[:, part[2]] + r * gh[:, part[2]])
        h = (1.0 - z) * n + z * h
        return h, h
    g = gi + gh
    i, f, cand, o = (g[:, part[0]], g[:, part[1]], g[:, part[2]], g[:, part[3]])
    c = sigmoid(f) * state[1] + sigmoid(i) * np.tanh(cand)
    h = sigmoid(o) * np.tanh(c)
    if w_hr is not None:
        h = h @ w_hr.T
    return h, (h, c)


def np_weights(module):
    return {k: v.detach().cpu().numpy().astype(np.float64) for k, v in module.state_dict().items()}


def np_cell(module, mode, x, hx=None):
    """The cell's step with its own weights; 1-D inputs get a batch of one."""
    w = np_weights(module)
    batched = x.ndim == 2
    x = x if batched else x[None]
    shape = (x.shape[0], module.hidden_size)
    if hx is None:
        hx = (np.zeros(shape), np.zeros(shape)) if mode == "LSTM" else np.zeros(shape)
    elif not batched:
        hx = tuple(s[None] for s in hx) if mode == "LSTM" else hx[None]
    _, state = np_step(mode, x, hx, w["weight_ih"], w["weight_hh"], w.get("bias_ih"),
                       w.get("bias_hh"))
    if batched:
        return state
    return tuple(s[0] for s in state) if mode == "LSTM" else state[0]


def np_rnn(module, x, hx=None, drop_between_layers=False):
    """PyTorch's documented multi-layer recurrence; drop_between_layers zeroes the inputs of
    layers after the first (dropout with p=1)."""
    mode, w = module.mode, np_weights(module)
    lstm = mode == "LSTM"
    dirs = 2 if module.bidirectional else 1
    real_hidden = module.proj_size or module.hidden_size
    batched = x.ndim == 3
    if not batched:
        x = x[:, None]
        hx = None if hx is None else tuple(s[:, None] for s in (hx if lstm else (hx,)))
    elif module.batch_first:
        x = x.swapaxes(0, 1)
    if batched and hx is not None and not lstm:
        hx = (hx,)
    steps, batch = x.shape[:2]
    stacked = module.num_layers * dirs
    if hx is None:
        hx = (np.zeros((stacked, batch, real_hidden)), np.zeros((stacked, batch,
                                                                 module.hidden_size)))
    h_n, c_n = [], []
    layer_in = x
    for layer in range(module.num_layers):
        if layer > 0 and drop_between_layers:
            layer_in = np.zeros_like(layer_in)
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            k = layer * dirs + d
            state = (hx[0][k], hx[1][k]) if lstm else hx[0][k]
            out = np.zeros((steps, batch, real_hidden))
            for t in (range(steps - 1, -1, -1) if d else range(steps)):
                out[t], state = np_step(mode, layer_in[t], state, w["weight_ih" + sfx],
                                        w["weight_hh" + sfx], w.get("bias_ih" + sfx),
                                        w.get("bias_hh" + sfx), w.get("weight_hr" + sfx))
            outs.append(out)
            h_n.append(state[0] if lstm else state)
            if lstm:
                c_n.append(state[1])
        layer_in = np.concatenate(outs, axis=2)
    out, h_n, c_n = layer_in, np.stack(h_n), np.stack(c_n) if lstm else None
    if not batched:
        out, h_n, c_n = out[:, 0], h_n[:, 0], c_n[:, 0] if lstm else None
    elif module.batch_first:
        out = out.swapaxes(0, 1)
    return out, ((h_n, c_n) if lstm else h_n)


CELLS = [
    ("RNN_TANH", lambda **kw: nn.RNNCell(3, 4, **kw)),
    ("RNN_RELU", lambda **kw: nn.RNNCell(3, 4, nonlinearity="relu", **kw)),
    ("LSTM", lambda **kw: nn.LSTMCell(3, 4, **kw)),
    ("GRU", lambda **kw: nn.GRUCell(3, 4, **kw)),
]


def states(mode, *shape):
    return (U(*shape), U(*shape)) if mode == "LSTM" else U(*shape)


def to_kiln(state, device="cpu", dtype=kiln.float64):
    if isinstance(state, tuple):
        return tuple(to_kiln(s, device, dtype) for s in state)
    return None if state is None else kiln.tensor(state, dtype=dtype, device=device)


def check(got, want, dtype=kiln.float64):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, e in zip(got, want):
            check(g, e, dtype)
    else:
        assert_close(got.cpu(), want, dtype)


@pytest.mark.parametrize("mode,build", CELLS, ids=[c[0] for c in CELLS])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_hx", [True, False])
def test_cell_matches_numpy(mode, build, bias, batched, with_hx):
    cell = build(bias=bias, dtype=kiln.float64)
    lead = (5,) if batched else ()
    x = U(*lead, 3)
    hx = states(mode, *lead, 4) if with_hx else None
    out = cell(kiln.tensor(x), to_kiln(hx))
    check(out, np_cell(cell, mode, x, hx))


@pytest.mark.parametrize("mode,build", CELLS, ids=[c[0] for c in CELLS])
def test_cell_float32_and_noncontiguous(mode, build):
    cell = build()
    x = U(3, 5).astype(np.float32)
    hx = states(mode, 5, 4)
    k_hx = to_kiln(hx, dtype=kiln.float32)
    out = cell(kiln.tensor(x).t(), k_hx)
    check(out, np_cell(cell, mode, x.T.astype(np.float64), hx), kiln.float32)


def test_cell_parameters_shapes_and_init():
    for cls, gates in [(nn.RNNCell, 1), (nn.LSTMCell, 4), (nn.GRUCell, 3)]:
        cell = cls(5, 16)
        assert [(n, tuple(p.shape)) for n, p in cell.named_parameters()] == [
            ("weight_ih", (gates * 16, 5)), ("weight_hh", (gates * 16, 16)),
            ("bias_ih", (gates * 16,)), ("bias_hh", (gates * 16,))]
        bound = 1 / math.sqrt(16)
        for name, p in cell.named_parameters():
            v = p.detach().numpy()
            assert v.dtype == np.float32
            assert np.abs(v).max() <= bound and np.abs(v).max() > 0.8 * bound, name
            assert v.min() < -0.5 * bound and v.max() > 0.5 * bound, name
        assert list(cls(5, 16, bias=False).state_dict()) == ["weight_ih", "weight_hh"]
        assert cls(5, 16, bias=False).bias_ih is None
    assert repr(nn.RNNCell(2, 3, nonlinearity="relu", bias=False)) == (
        "RNNCell(2, 3, bias=False, nonlinearity=relu)")
    assert repr(nn.LSTMCell(2, 3)) == "LSTMCell(2, 3)"


@pytest.mark.parametrize("mode,build", CELLS, ids=[c[0] for c in CELLS])
def test_cell_gradcheck(mode, build):
    cell = build(dtype=kiln.float64)
    cell.weight_ih.data = kiln.tensor(U(*cell.weight_ih.shape))  # larger than init: sharper test
    x = kiln.tensor(U(2, 3), requires_grad=True)
    hx = to_kiln(states(mode, 2, 4))
    hx = tuple(s.requires_grad_(True) for s in hx) if mode == "LSTM" else hx.requires_grad_(True)
    flat_hx = list(hx) if mode == "LSTM" else [hx]

    def fn(x, *rest):
        state = tuple(rest[:2]) if mode == "LSTM" else rest[0]
        return cell(x, state)

    assert kiln.autograd.gradcheck(fn, [x, *flat_hx, *cell.parameters()])


def test_cell_errors():
    cell = nn.LSTMCell(3, 4)
    with pytest.raises(RuntimeError, match=r"\[LSTMCell\.forward\] .*input of size \[2, 5\]"):
        cell(kiln.randn(2, 5))
    with pytest.raises(ValueError, match=r"\[LSTMCell\.forward\] Expected input to be 1D or 2D"):
        cell(kiln.randn(1, 2, 3))
    with pytest.raises(RuntimeError, match=r"\[LSTMCell\.forward\] Expected hx\[1\] size "
                                           r"\[2, 4\], got \[3, 4\]"):
        cell(kiln.randn(2, 3), (kiln.randn(2, 4), kiln.randn(3, 4)))
    with pytest.raises(ValueError, match=r"\[LSTMCell\.forward\] input must have the type "
                                         r"kiln.float32, got type kiln.float64"):
        cell(kiln.randn(2, 3, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"\[GRUCell\.forward\] Expected hx size \[3\], "
                                           r"got \[1, 3\]"):
        nn.GRUCell(2, 3)(kiln.randn(2), kiln.randn(1, 3))
    with pytest.raises(ValueError, match=r"\[RNNCell\] Unknown nonlinearity 'gelu'"):
        nn.RNNCell(2, 3, nonlinearity="gelu")


# (module class, mode, constructor kwargs)
CONFIGS = [
    (nn.RNN, "RNN_TANH", {}),
    (nn.RNN, "RNN_RELU", dict(nonlinearity="relu", num_layers=2, bidirectional=True)),
    (nn.RNN, "RNN_TANH", dict(num_layers=2, batch_first=True, bias=False)),
    (nn.LSTM, "LSTM", {}),
    (nn.LSTM, "LSTM", dict(num_layers=2, bidirectional=True)),
    (nn.LSTM, "LSTM", dict(num_layers=3, batch_first=True)),
    (nn.LSTM, "LSTM", dict(bidirectional=True, batch_first=True, bias=False)),
    (nn.LSTM, "LSTM", dict(num_layers=2, bidirectional=True, proj_size=2)),
    (nn.GRU, "GRU", {}),
    (nn.GRU, "GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
    (nn.GRU, "GRU", dict(num_layers=2, bias=False)),
]
CONFIG_IDS = [f"{c[1]}-" + "-".join(f"{k}={v}" for k, v in c[2].items()) for c in CONFIGS]


def initial_states(module, batch):
    stacked = module.num_layers * (2 if module.bidirectional else 1)
    lead = (stacked,) + batch
    h = U(*lead, module.proj_size or module.hidden_size)
    return (h, U(*lead, module.hidden_size)) if module.mode == "LSTM" else h


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls,mode,kwargs", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_hx", [True, False])
def test_rnn_matches_numpy(device, cls, mode, kwargs, batched, with_hx):
    module = cls(3, 4, dtype=kiln.float64, **kwargs).to(device)
    assert module.mode == mode
    shape = ((2, 5) if module.batch_first else (5, 2)) if batched else (5,)
    x = U(*shape, 3)
    hx = initial_states(module, (2,) if batched else ()) if with_hx else None
    out = module(kiln.tensor(x, device=device), to_kiln(hx, device))
    check(out, np_rnn(module, x, hx))
    assert out[0].device.type == device


def test_rnn_float32():
    module = nn.GRU(3, 4, num_layers=2, bidirectional=True)
    x = U(6, 2, 3).astype(np.float32)
    out, h_n = module(kiln.tensor(x))
    assert out.dtype == kiln.float32 and h_n.dtype == kiln.float32
    check((out, h_n), np_rnn(module, x.astype(np.float64)), kiln.float32)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_two_layer_bidirectional_gradcheck(cls):
    module = cls(2, 2, num_layers=2, bidirectional=True, dtype=kiln.float64)
    x = kiln.tensor(U(3, 1, 2), requires_grad=True)
    h0 = to_kiln(initial_states(module, (1,)))
    flat = list(h0) if cls is nn.LSTM else [h0]
    for s in flat:
        s.requires_grad_(True)

    def fn(x, *rest):
        out, h_n = module(x, tuple(rest[:2]) if cls is nn.LSTM else rest[0])
        return (out, *h_n) if cls is nn.LSTM else (out, h_n)

    assert kiln.autograd.gradcheck(fn, [x, *flat, *module.parameters()])


def test_lstm_projection_gradcheck():
    module = nn.LSTM(2, 3, proj_size=2, dtype=kiln.float64)
    x = kiln.tensor(U(2, 1, 2), requires_grad=True)
    assert kiln.autograd.gradcheck(lambda x, *_: module(x)[0], [x, *module.parameters()])


def test_state_dict_keys_match_pytorch():
    assert list(nn.LSTM(3, 4, num_layers=2, bidirectional=True).state_dict()) == [
        "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
        "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
        "bias_hh_l0_reverse",
        "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1",
        "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse",
        "bias_hh_l1_reverse"]
    assert list(nn.GRU(3, 4, num_layers=2, bias=False).state_dict()) == [
        "weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"]
    assert list(nn.RNN(3, 4, bidirectional=True).state_dict()) == [
        "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
        "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
        "bias_hh_l0_reverse"]
    proj = nn.LSTM(3, 4, bidirectional=True, proj_size=2)
    assert [(k, tuple(v.shape)) for k, v in proj.state_dict().items()] == [
        ("weight_ih_l0", (16, 3)), ("weight_hh_l0", (16, 2)), ("bias_ih_l0", (16,)),
        ("bias_hh_l0", (16,)), ("weight_hr_l0", (2, 4)),
        ("weight_ih_l0_reverse", (16, 3)), ("weight_hh_l0_reverse", (16, 2)),
        ("bias_ih_l0_reverse", (16,)), ("bias_hh_l0_reverse", (16,)),
        ("weight_hr_l0_reverse", (2, 4))]
    gru = nn.GRU(3, 5, num_layers=2, bidirectional=True)
    assert tuple(gru.weight_ih_l1.shape) == (15, 10)
    assert tuple(gru.weight_hh_l1_reverse.shape) == (15, 5)
    assert len(gru.all_weights) == 4 and gru.all_weights[3][0] is gru.weight_ih_l1_reverse
    assert not hasattr(nn.GRU(3, 5, bias=False), "bias_ih_l0")


def test_rnn_init_and_state_dict_round_trip():
    module = nn.LSTM(3, 9, num_layers=2)
    bound = 1 / 3
    for name, p in module.named_parameters():
        v = p.detach().numpy()
        assert np.abs(v).max() <= bound and v.min() < -0.5 * bound and v.max() > 0.5 * bound
    other = nn.LSTM(3, 9, num_layers=2)
    other.load_state_dict(module.state_dict())
    x = kiln.randn(4, 2, 3)
    assert np.array_equal(other(x)[0].detach().numpy(), module(x)[0].detach().numpy())
    assert repr(nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2)) == (
        "LSTM(3, 4, proj_size=2, num_layers=2, bidirectional=True)")
    assert repr(nn.GRU(3, 4, bias=False, batch_first=True, dropout=0.5, num_layers=2)) == (
        "GRU(3, 4, num_layers=2, bias=False, batch_first=True, dropout=0.5)")


def test_dropout_only_between_layers_and_only_in_training():
    module = nn.LSTM(3, 4, num_layers=2, dropout=1.0, dtype=kiln.float64)
    x = U(5, 2, 3)
    out_train = module(kiln.tensor(x))
    check(out_train, np_rnn(module, x, drop_between_layers=True))
    # The last layer's output is not dropped.
    assert np.abs(out_train[0].detach().numpy()).min() > 0
    module.eval()
    check(module(kiln.tensor(x)), np_rnn(module, x))
    half = nn.GRU(3, 4, num_layers=2, dropout=0.5, dtype=kiln.float64)
    a, b = half(kiln.tensor(x))[0], half.eval()(kiln.tensor(x))[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    with pytest.warns(UserWarning, match=r"\[GRU\] dropout option adds dropout"):
        nn.GRU(3, 4, dropout=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.GRU(3, 4, num_layers=2, dropout=0.2)


def test_rnn_errors():
    lstm = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(RuntimeError, match=r"\[LSTM\.forward\] input\.size\(-1\) must be equal "
                                           r"to input_size\. Expected 3, got input of size "
                                           r"\[5, 2, 7\]"):
        lstm(kiln.randn(5, 2, 7))
    with pytest.raises(ValueError, match=r"\[LSTM\.forward\] Expected input to be 2D or 3D, "
                                         r"got 4D input of size \[1, 5, 2, 3\]"):
        lstm(kiln.randn(1, 5, 2, 3))
    with pytest.raises(ValueError, match=r"\[LSTM\.forward\] input must have the type "
                                         r"kiln.float32, got type kiln.float64"):
        lstm(kiln.randn(5, 2, 3, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"\[LSTM\.forward\] Expected hidden\[1\] size "
                                           r"\[2, 2, 4\], got \[2, 3, 4\]"):
        lstm(kiln.randn(5, 2, 3), (kiln.randn(2, 2, 4), kiln.randn(2, 3, 4)))
    with pytest.raises(RuntimeError, match=r"\[GRU\.forward\] For unbatched 2-D input of size "
                                           r"\[5, 3\], hx should also be 2-D but got \(3-D\)"):
        nn.GRU(3, 4)(kiln.randn(5, 3), kiln.randn(1, 1, 4))
    with pytest.raises(RuntimeError, match=r"\[RNN\.forward\] Expected hidden size \[2, 2, 4\], "
                                           r"got \[1, 2, 4\]"):
        nn.RNN(3, 4, bidirectional=True)(kiln.randn(5, 2, 3), kiln.randn(1, 2, 4))
    with pytest.raises(TypeError, match=r"\[LSTM\.forward\] hx must be a tuple \(h, c\)"):
        lstm(kiln.randn(5, 2, 3), kiln.randn(2, 2, 4))
    with pytest.raises(TypeError, match=r"\[LSTMCell\.forward\] hx must be a tuple \(h, c\)"):
        nn.LSTMCell(3, 4)(kiln.randn(2, 3), kiln.randn(2, 4))
    with pytest.raises(RuntimeError, match=r"\[GRU\.forward\] Expected sequence length"):
        nn.GRU(3, 4)(kiln.randn(0, 2, 3))
    with pytest.raises(ValueError, match=r"\[RNN\] Unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match=r"\[LSTM\] dropout should be a number in range"):
        nn.LSTM(3, 4, num_layers=2, dropout=1.5)
    with pytest.raises(ValueError, match=r"\[LSTM\] proj_size has to be smaller than "
                                         r"hidden_size, got proj_size=4 and hidden_size=4"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(TypeError, match=r"\[GRU\] hidden_size should be of type int, got: "
                                        r"float"):
        nn.GRU(3, 4.0)
    with pytest.raises(ValueError, match=r"\[RNN\] num_layers must be greater than zero"):
        nn.RNN(3, 4, num_layers=0)


def np_prelu(x, w):
    w = w.reshape([-1] + [1] * (x.ndim - 2)) if w.size > 1 else w
    return np.where(x > 0, x, w * x)


@pytest.mark.parametrize("shape,n", [((2, 3, 4, 5), 3), ((2, 3), 3), ((2, 3, 4), 1), ((4,), 1),
                                     ((), 1)])
def test_prelu_matches_numpy(shape, n):
    module = nn.PReLU(n, init=0.1, dtype=kiln.float64)
    assert list(module.state_dict()) == ["weight"]
    assert np.allclose(module.weight.detach().numpy(), 0.1)
    module.weight.data = kiln.tensor(U(n))
    x = U(*shape)
    assert_close(module(kiln.tensor(x)), np_prelu(x, module.weight.detach().numpy()))
    x32 = x.astype(np.float32)
    w32 = module.weight.detach().numpy().astype(np.float32)
    assert_close(F.prelu(kiln.tensor(x32), kiln.tensor(w32)), np_prelu(x32, w32), kiln.float32)
    assert repr(nn.PReLU(3)) == "PReLU(num_parameters=3)"


def test_prelu_gradcheck_and_errors():
    x = U(2, 3, 4)
    x[np.abs(x) < 0.05] = 0.5  # away from the kink
    assert kiln.autograd.gradcheck(F.prelu, [kiln.tensor(x, requires_grad=True),
                                             kiln.tensor(U(3), requires_grad=True)])
    assert kiln.autograd.gradcheck(F.prelu, [kiln.tensor(x, requires_grad=True),
                                             kiln.tensor(U(1), requires_grad=True)])
    with pytest.raises(RuntimeError, match=r"\[prelu\] Mismatch .*weight of size \[3\], input "
                                           r"of size \[2, 4\]"):
        F.prelu(kiln.randn(2, 4), kiln.randn(3))
    with pytest.raises(RuntimeError, match=r"\[prelu\] .*weight of size \[1, 3\]"):
        F.prelu(kiln.randn(2, 3), kiln.randn(1, 3))


# ---------------------------------------------------------------------------------------------
# The same modules in PyTorch, with PyTorch's weights loaded into kiln by state_dict key.

def _torch():
    return pytest.importorskip("torch")


TORCH_MODULES = [
    ("rnn_cell", lambda m: m.RNNCell(3, 4), (5, 3)),
    ("rnn_cell_relu_unbatched", lambda m: m.RNNCell(3, 4, nonlinearity="relu"), (3,)),
    ("lstm_cell", lambda m: m.LSTMCell(3, 4), (5, 3)),
    ("gru_cell_nobias", lambda m: m.GRUCell(3, 4, bias=False), (5, 3)),
    ("rnn_2l_bi", lambda m: m.RNN(3, 4, num_layers=2, bidirectional=True), (6, 2, 3)),
    ("lstm_2l_bi_bf", lambda m: m.LSTM(3, 4, num_layers=2, bidirectional=True,
                                       batch_first=True), (2, 6, 3)),
    ("lstm_proj", lambda m: m.LSTM(3, 5, num_layers=2, proj_size=2), (6, 2, 3)),
    ("lstm_unbatched", lambda m: m.LSTM(3, 4, bidirectional=True), (6, 3)),
    ("gru_2l_bi", lambda m: m.GRU(3, 4, num_layers=2, bidirectional=True), (6, 2, 3)),
    ("gru_bf_nobias", lambda m: m.GRU(3, 4, batch_first=True, bias=False), (2, 6, 3)),
    ("prelu", lambda m: m.PReLU(3), (2, 3, 4)),
]


def _flat(out):
    if isinstance(out, tuple):
        return [t for o in out for t in _flat(o)]
    return [out]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,build,shape", TORCH_MODULES, ids=[c[0] for c in TORCH_MODULES])
def test_matches_torch(device, name, build, shape):
    torch = _torch()
    t_mod = build(torch.nn).double().to(device)
    k_mod = build(nn).double().to(device)
    assert [(k, tuple(v.shape)) for k, v in k_mod.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in t_mod.state_dict().items()]
    assert repr(k_mod) == repr(t_mod)
    k_mod.load_state_dict({k: kiln.tensor(v.detach().cpu().numpy(), device=device)
                           for k, v in t_mod.state_dict().items()})
    x = U(*shape)
    k_x = kiln.tensor(x, device=device, requires_grad=True)
    t_x = torch.tensor(x, device=device, requires_grad=True)
    k_out, t_out = _flat(k_mod(k_x)), _flat(t_mod(t_x))
    assert len(k_out) == len(t_out)
    k_loss = t_loss = 0
    for ko, to in zip(k_out, t_out):
        np.testing.assert_allclose(ko.detach().cpu().numpy(), to.detach().cpu().numpy(),
                                   rtol=1e-7, atol=1e-9)
        w = U(*to.shape)
        k_loss = k_loss + (ko * kiln.tensor(w, device=device)).sum()
        t_loss = t_loss + (to * torch.tensor(w, device=device)).sum()
    k_loss.backward()
    t_loss.backward()
    np.testing.assert_allclose(k_x.grad.cpu().numpy(), t_x.grad.cpu().numpy(), rtol=1e-7,
                               atol=1e-9)
    t_params = dict(t_mod.named_parameters())
    for pname, kp in k_mod.named_parameters():
        np.testing.assert_allclose(kp.grad.cpu().numpy(), t_params[pname].grad.cpu().numpy(),
                                   rtol=1e-7, atol=1e-9, err_msg=pname)


@pytest.mark.parametrize("device", DEVICES)
def test_lstm_with_states_matches_torch_float32(device):
    torch = _torch()
    t_mod = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).to(device)
    k_mod = nn.LSTM(3, 4, num_layers=2, bidirectional=True).to(device)
    k_mod.load_state_dict({k: kiln.tensor(v.detach().cpu().numpy(), device=device)
                           for k, v in t_mod.state_dict().items()})
    x, h0, c0 = (U(5, 2, 3).astype(np.float32), U(4, 2, 4).astype(np.float32),
                 U(4, 2, 4).astype(np.float32))
    k_out = _flat(k_mod(kiln.tensor(x, device=device),
                        (kiln.tensor(h0, device=device), kiln.tensor(c0, device=device))))
    # cuDNN's RNNs may compute float32 in TF32; torch's own kernels keep full float32.
    with torch.backends.cudnn.flags(enabled=False):
        t_out = _flat(t_mod(torch.tensor(x, device=device),
                            (torch.tensor(h0, device=device), torch.tensor(c0, device=device))))
    for ko, to in zip(k_out, t_out):
        np.testing.assert_allclose(ko.detach().cpu().numpy(), to.detach().cpu().numpy(),
                                   rtol=1e-5, atol=1e-5)
