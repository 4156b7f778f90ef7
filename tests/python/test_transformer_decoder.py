"""TransformerDecoderLayer, TransformerDecoder, Transformer and EmbeddingBag against NumPy
references built from the modules' own weights, plus (where PyTorch is installed) against
torch.nn with loaded state_dicts."""

import math

import numpy as np
import pytest

import kiln
from helpers import assert_close, rand, requires_gpu
from kiln import nn

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


def T(a, **kw):
    return kiln.tensor(np.asarray(a, dtype=np.float64), **kw)


def np_(t):
    return t.detach().numpy()


def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_mha(q, kv, m, mask=None):
    """Batch-first attention of q (N, L, E) over kv (N, S, E); mask broadcasts to
    (N, heads, L, S) and is added to the scores."""
    e, heads = m.embed_dim, m.num_heads
    d = e // heads
    w, b = np_(m.in_proj_weight), np_(m.in_proj_bias)
    qp, kp, vp = (a @ w[i * e:(i + 1) * e].T + b[i * e:(i + 1) * e]
                  for i, a in enumerate((q, kv, kv)))

    def split(a):
        return a.reshape(a.shape[0], a.shape[1], heads, d).transpose(0, 2, 1, 3)

    scores = split(qp) @ split(kp).transpose(0, 1, 3, 2) / math.sqrt(d)
    if mask is not None:
        scores = scores + mask
    out = (np_softmax(scores) @ split(vp)).transpose(0, 2, 1, 3).reshape(q.shape)
    return out @ np_(m.out_proj.weight).T + np_(m.out_proj.bias)


def np_ln(x, norm):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + norm.eps) * np_(norm.weight) + np_(norm.bias)


def np_decoder_layer(x, mem, m, self_mask=None, cross_mask=None):
    """Batch-first reference of one decoder layer (relu feed-forward)."""
    def sa(a):
        return np_mha(a, a, m.self_attn, self_mask)

    def ca(a):
        return np_mha(a, mem, m.multihead_attn, cross_mask)

    def ff(a):
        h = np.maximum(a @ np_(m.linear1.weight).T + np_(m.linear1.bias), 0)
        return h @ np_(m.linear2.weight).T + np_(m.linear2.bias)

    if m.norm_first:
        x = x + sa(np_ln(x, m.norm1))
        x = x + ca(np_ln(x, m.norm2))
        return x + ff(np_ln(x, m.norm3))
    x = np_ln(x + sa(x), m.norm1)
    x = np_ln(x + ca(x), m.norm2)
    return np_ln(x + ff(x), m.norm3)


def randomize(module):
    """Random weights everywhere (biases and LayerNorm affine included), so every parameter
    matters in the comparison."""
    with kiln.no_grad():
        for p in module.parameters():
            p.copy_(T(rand(*p.shape) * 0.5))
    return module


LAYER_KEYS = [
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
    "self_attn.out_proj.bias", "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
    "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias", "linear1.weight",
    "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias",
    "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias",
]
ENCODER_LAYER_KEYS = [
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
    "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
    "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
]


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_numpy(norm_first, batch_first):
    m = randomize(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, batch_first=batch_first,
                                             norm_first=norm_first).double().eval())
    assert list(m.state_dict()) == LAYER_KEYS
    x, mem = rand(2, 4, 8), rand(2, 5, 8)  # batch-first data

    def run(**kw):
        if batch_first:
            return m(T(x), T(mem), **kw)
        return m(T(x.transpose(1, 0, 2)), T(mem.transpose(1, 0, 2)), **kw).transpose(0, 1)

    assert_close(run(), np_decoder_layer(x, mem, m), atol=1e-9, rtol=1e-9)
    # Causal self-attention, padded target and memory keys.
    causal = nn.Transformer.generate_square_subsequent_mask(4, dtype=kiln.float64)
    tgt_pad = np.zeros((2, 4), dtype=bool)
    tgt_pad[1, 3] = True
    mem_pad = np.zeros((2, 5), dtype=bool)
    mem_pad[0, 2:] = True
    self_mask = np_(causal)[None, None] + np.where(tgt_pad, -np.inf, 0)[:, None, None]
    cross_mask = np.where(mem_pad, -np.inf, 0)[:, None, None]
    ref = np_decoder_layer(x, mem, m, self_mask, cross_mask)
    out = run(tgt_mask=causal, tgt_key_padding_mask=kiln.tensor(tgt_pad),
              memory_key_padding_mask=kiln.tensor(mem_pad), tgt_is_causal=True)
    assert_close(out, ref, atol=1e-9, rtol=1e-9)
    # A float memory_mask (L, S) is added to the cross-attention scores.
    mem_mask = rand(4, 5)
    ref = np_decoder_layer(x, mem, m, None, mem_mask[None, None])
    assert_close(run(memory_mask=T(mem_mask)), ref, atol=1e-9, rtol=1e-9)


def test_decoder_layer_unbatched_dropout_and_grad():
    m = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.5).double()
    x, mem = T(rand(3, 8)), T(rand(5, 8))
    trained = np_(m.train()(x, mem))
    m.eval()
    evaluated = np_(m(x, mem))
    assert not np.allclose(trained, evaluated)
    np.testing.assert_array_equal(np_(m(x, mem)), evaluated)  # eval is deterministic
    ref = np_decoder_layer(np_(x)[None], np_(mem)[None], m)[0]
    assert_close(m(x, mem), ref, atol=1e-9, rtol=1e-9)
    # Every parameter gets a gradient, and so do tgt and memory.
    xg, memg = T(rand(3, 2, 8), requires_grad=True), T(rand(5, 2, 8), requires_grad=True)
    m.train()(xg, memg).square().sum().backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and np.abs(np_(p.grad)).sum() > 0, name
    assert np.abs(np_(xg.grad)).sum() > 0 and np.abs(np_(memg.grad)).sum() > 0


def test_decoder_layer_gradcheck():
    m = nn.TransformerDecoderLayer(4, 2, dim_feedforward=4, dropout=0.0, norm_first=True,
                                   activation="gelu").double()
    x, mem = T(rand(2, 1, 4), requires_grad=True), T(rand(3, 1, 4), requires_grad=True)
    params = list(m.parameters())
    assert kiln.autograd.gradcheck(lambda a, b, *ps: m(a, b), [x, mem] + params)
    with pytest.raises(RuntimeError, match=r"\[TransformerDecoderLayer\].*relu/gelu"):
        nn.TransformerDecoderLayer(4, 2, activation="tanh")


def test_decoder_stack_copies_layers_and_applies_norm():
    layer = randomize(nn.TransformerDecoderLayer(8, 2, 16, batch_first=True).double())
    norm = randomize(nn.LayerNorm(8).double())
    dec = nn.TransformerDecoder(layer, 2, norm=norm).eval()
    assert list(dec.state_dict()) == [f"layers.{i}.{k}" for i in range(2) for k in LAYER_KEYS] \
        + ["norm.weight", "norm.bias"]
    assert dec.layers[0] is not dec.layers[1] and dec.layers[1].linear1.weight is not \
        layer.linear1.weight
    x, mem = rand(2, 3, 8), rand(2, 4, 8)
    ref = np_ln(np_decoder_layer(np_decoder_layer(x, mem, layer), mem, layer), norm)
    assert_close(dec(T(x), T(mem)), ref, atol=1e-9, rtol=1e-9)
    assert_close(nn.TransformerDecoder(layer, 1).eval()(T(x), T(mem)),
                 np_decoder_layer(x, mem, layer), atol=1e-9, rtol=1e-9)


def test_generate_square_subsequent_mask():
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    assert mask.dtype == kiln.float32 and tuple(mask.shape) == (4, 4)
    np.testing.assert_array_equal(np_(mask), np.triu(np.full((4, 4), -np.inf), 1))
    assert nn.Transformer.generate_square_subsequent_mask(2, dtype=kiln.float64).dtype == \
        kiln.float64


def test_transformer_keys_init_and_forward():
    m = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                       dim_feedforward=16, batch_first=True).double()
    keys = ([f"encoder.layers.{i}.{k}" for i in range(2) for k in ENCODER_LAYER_KEYS]
            + ["encoder.norm.weight", "encoder.norm.bias"]
            + [f"decoder.layers.0.{k}" for k in LAYER_KEYS]
            + ["decoder.norm.weight", "decoder.norm.bias"])
    assert list(m.state_dict()) == keys
    # xavier_uniform_ on matrices: bound sqrt(6 / (fan_in + fan_out)); vectors keep their init.
    w = np_(m.decoder.layers[0].linear1.weight)
    bound = math.sqrt(6 / (8 + 16))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    np.testing.assert_array_equal(np_(m.encoder.norm.weight), np.ones(8))
    np.testing.assert_array_equal(np_(m.encoder.layers[0].self_attn.in_proj_bias), np.zeros(24))

    randomize(m).eval()
    src, tgt = rand(2, 5, 8), rand(2, 3, 8)
    causal = nn.Transformer.generate_square_subsequent_mask(3, dtype=kiln.float64)
    out = m(T(src), T(tgt), tgt_mask=causal)
    memory = m.encoder(T(src))
    ref = np_ln(np_decoder_layer(tgt, np_(memory), m.decoder.layers[0],
                                 np_(causal)[None, None]), m.decoder.norm)
    assert tuple(out.shape) == (2, 3, 8)
    assert_close(out, ref, atol=1e-9, rtol=1e-9)
    with pytest.raises(RuntimeError, match=r"\[Transformer.forward\] the batch number"):
        m(T(rand(3, 5, 8)), T(tgt))
    with pytest.raises(RuntimeError, match=r"\[Transformer.forward\] the feature number"):
        m(T(rand(2, 5, 6)), T(tgt))


def test_transformer_custom_parts_and_grad():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8), 1)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 8), 1)
    m = nn.Transformer(d_model=4, nhead=2, custom_encoder=enc, custom_decoder=dec)
    assert m.encoder is enc and m.decoder is dec
    assert "encoder.norm.weight" not in m.state_dict()
    src, tgt = kiln.randn(5, 2, 4), kiln.randn(3, 2, 4)
    m(src, tgt).sum().backward()
    assert all(p.grad is not None for p in m.parameters())


# --- against PyTorch (the GPU machine) ----------------------------------------------------

def _load_torch_state(k_mod, t_mod, device):
    """kiln module with the torch module's weights, both in float64 eval mode on `device`."""
    t_mod.double().to(device).eval()
    k_mod.double().to(device).eval()
    state = t_mod.state_dict()
    assert list(k_mod.state_dict()) == list(state)
    k_mod.load_state_dict({k: kiln.tensor(v.cpu().numpy(), device=device)
                           for k, v in state.items()})
    return k_mod, t_mod


def _check(k_out, t_out):
    np.testing.assert_allclose(k_out.detach().cpu().numpy(), t_out.detach().cpu().numpy(),
                               rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_vs_torch(device, norm_first):
    torch = pytest.importorskip("torch")
    args = dict(d_model=8, nhead=2, dim_feedforward=16, batch_first=True, norm_first=norm_first)
    k_mod, t_mod = _load_torch_state(nn.TransformerDecoderLayer(**args),
                                     torch.nn.TransformerDecoderLayer(**args), device)
    x, mem = rand(2, 4, 8), rand(2, 5, 8)
    pad = np.zeros((2, 5), dtype=bool)
    pad[1, 3:] = True
    k_mask = nn.Transformer.generate_square_subsequent_mask(4, device=device,
                                                            dtype=kiln.float64)
    t_mask = torch.nn.Transformer.generate_square_subsequent_mask(4, device=device,
                                                                  dtype=torch.float64)
    k_out = k_mod(kiln.tensor(x, device=device), kiln.tensor(mem, device=device),
                  tgt_mask=k_mask, memory_key_padding_mask=kiln.tensor(pad, device=device))
    with torch.no_grad():
        t_out = t_mod(torch.tensor(x, device=device), torch.tensor(mem, device=device),
                      tgt_mask=t_mask, memory_key_padding_mask=torch.tensor(pad, device=device))
    _check(k_out, t_out)


@pytest.mark.parametrize("device", DEVICES)
def test_transformer_vs_torch(device):
    torch = pytest.importorskip("torch")
    args = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                dim_feedforward=16)
    k_mod, t_mod = _load_torch_state(nn.Transformer(**args), torch.nn.Transformer(**args),
                                     device)
    src, tgt = rand(5, 2, 8), rand(3, 2, 8)
    k_out = k_mod(kiln.tensor(src, device=device), kiln.tensor(tgt, device=device),
                  tgt_mask=nn.Transformer.generate_square_subsequent_mask(
                      3, device=device, dtype=kiln.float64))
    with torch.no_grad():
        t_out = t_mod(torch.tensor(src, device=device), torch.tensor(tgt, device=device),
                      tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(
                          3, device=device, dtype=torch.float64))
    _check(k_out, t_out)


# --- EmbeddingBag -----------------------------------------------------------------------------

F = nn.functional


def np_embedding_bag(idx, w, bags, mode, psw=None, padding_idx=None):
    """Reference: `bags` is a list of (start, end) into the flat idx."""
    out = np.zeros((len(bags), w.shape[1]))
    for b, (lo, hi) in enumerate(bags):
        sel = [j for j in range(lo, hi) if idx[j] != padding_idx]
        if not sel:
            continue
        rows = w[idx[sel]] * (1 if psw is None else psw[sel][:, None])
        out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_numpy(mode):
    w = rand(10, 3)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 7])
    offsets = np.array([0, 4, 4, 7])  # bag 1 is empty
    bags = [(0, 4), (4, 4), (4, 7), (7, 10)]
    ref = np_embedding_bag(idx, w, bags, mode)
    assert_close(F.embedding_bag(kiln.tensor(idx), T(w), kiln.tensor(offsets), mode=mode), ref)
    last = np.array([0, 4, 4, 7, 10])
    assert_close(F.embedding_bag(kiln.tensor(idx), T(w), kiln.tensor(last), mode=mode,
                                 include_last_offset=True), ref)
    # 2-D input: each row is a bag; padding_idx entries are left out (a bag of only padding
    # gives zeros).
    idx2 = np.array([[1, 3, 3], [0, 0, 0], [9, 0, 2]])
    ref2 = np_embedding_bag(idx2.reshape(-1), w, [(0, 3), (3, 6), (6, 9)], mode, padding_idx=0)
    assert_close(F.embedding_bag(kiln.tensor(idx2), T(w), mode=mode, padding_idx=0), ref2)
    m = nn.EmbeddingBag(10, 3, mode=mode, padding_idx=0).double()
    assert np.all(np_(m.weight)[0] == 0) and repr(m) == f"EmbeddingBag(10, 3, mode='{mode}', " \
        "padding_idx=0)"
    with kiln.no_grad():
        m.weight.copy_(T(w))
    assert_close(m(kiln.tensor(idx2)), ref2)


def test_embedding_bag_per_sample_weights_and_grad():
    w, psw = rand(6, 2), rand(7)
    idx, offsets = np.array([5, 1, 1, 0, 3, 2, 4]), np.array([0, 2, 5])
    ref = np_embedding_bag(idx, w, [(0, 2), (2, 5), (5, 7)], "sum", psw)
    out = F.embedding_bag(kiln.tensor(idx), T(w), kiln.tensor(offsets), mode="sum",
                          per_sample_weights=T(psw))
    assert_close(out, ref)
    for mode, weights in (("sum", T(psw)), ("mean", None), ("max", None)):
        wt = T(w, requires_grad=True)
        args = [wt] + ([T(psw, requires_grad=True)] if weights is not None else [])
        assert kiln.autograd.gradcheck(
            lambda a, *p: F.embedding_bag(kiln.tensor(idx), a, kiln.tensor(offsets), mode=mode,
                                          per_sample_weights=p[0] if p else None), args)
    bag = nn.EmbeddingBag.from_pretrained(T(w), mode="sum")
    assert not bag.weight.requires_grad
    assert_close(bag(kiln.tensor(idx), kiln.tensor(offsets), T(psw)), ref)


def test_embedding_bag_bad_input():
    w, idx = T(rand(4, 2)), kiln.tensor([0, 1, 2])
    with pytest.raises(ValueError, match=r"\[embedding_bag\] offsets has to be a 1D"):
        F.embedding_bag(idx, w)
    with pytest.raises(ValueError, match=r"\[embedding_bag\] if input is 2D"):
        F.embedding_bag(idx.reshape(1, 3), w, kiln.tensor([0]))
    with pytest.raises(ValueError, match=r"\[embedding_bag\] input has to be 1D or 2D"):
        F.embedding_bag(idx.reshape(1, 1, 3), w)
    with pytest.raises(NotImplementedError, match=r"\[embedding_bag\] per_sample_weights"):
        F.embedding_bag(idx, w, kiln.tensor([0]), per_sample_weights=T(rand(3)))
    with pytest.raises(ValueError, match=r"\[embedding_bag\] mode"):
        F.embedding_bag(idx, w, kiln.tensor([0]), mode="min")
    with pytest.raises(ValueError, match=r"\[EmbeddingBag\] padding_idx"):
        nn.EmbeddingBag(4, 2, padding_idx=4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_vs_torch(device, mode):
    torch = pytest.importorskip("torch")
    t_mod = torch.nn.EmbeddingBag(10, 3, mode=mode, padding_idx=2).double().to(device)
    k_mod = nn.EmbeddingBag(10, 3, mode=mode, padding_idx=2).double().to(device)
    assert repr(k_mod) == repr(t_mod)
    k_mod.load_state_dict({k: kiln.tensor(v.cpu().numpy(), device=device)
                           for k, v in t_mod.state_dict().items()})
    idx, offsets = np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 3, 3, 6])
    psw = rand(8) if mode == "sum" else None
    k_out = k_mod(kiln.tensor(idx, device=device), kiln.tensor(offsets, device=device),
                  None if psw is None else kiln.tensor(psw, device=device))
    with torch.no_grad():
        t_out = t_mod(torch.tensor(idx, device=device), torch.tensor(offsets, device=device),
                      None if psw is None else torch.tensor(psw, device=device))
    _check(k_out, t_out)
