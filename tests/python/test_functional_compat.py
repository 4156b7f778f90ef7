"""kiln.nn.functional additions for issue 17: ctc_loss, fractional max pooling,
linear_cross_entropy (reference and chunked), multi_head_attention_forward, conv_tbc,
lp_pool3d, max_unpool3d, the *_with_indices pools, in-place activations and the upsample
aliases. NumPy closed forms and float64 gradchecks on the CPU; PyTorch side by side where
installed."""

import itertools
import math
import warnings

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import gradcheck

RNG = np.random.default_rng(11)


def _t(a, **kw):
    return kiln.tensor(np.asarray(a), **kw)


# ---------------------------------------------------------------------------------------------
# ctc_loss


def _ctc_brute_force(log_probs, target, blank):
    """-log of the summed probability of every length-T path that collapses to target."""
    steps, classes = log_probs.shape
    total = 0.0
    for path in itertools.product(range(classes), repeat=steps):
        collapsed = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
        if collapsed == list(target):
            total += math.exp(sum(log_probs[t, c] for t, c in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


def _log_softmax(x, axis):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def test_ctc_loss_matches_brute_force_enumeration():
    steps, classes = 5, 3
    logits = RNG.standard_normal((steps, 3, classes))
    lp = _log_softmax(logits, 2)
    targets = np.array([[1, 2, 0], [1, 1, 0], [2, 0, 0]])
    in_lens, tgt_lens = [5, 4, 3], [2, 2, 1]
    got = F.ctc_loss(_t(lp), _t(targets), in_lens, tgt_lens, reduction="none").numpy()
    want = [_ctc_brute_force(lp[:in_lens[n], n], targets[n, :tgt_lens[n]], 0) for n in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    mean = F.ctc_loss(_t(lp), _t(targets), _t(in_lens), _t(tgt_lens)).item()
    assert mean == pytest.approx(np.mean(np.array(want) / np.array(tgt_lens)), rel=1e-10)
    assert F.ctc_loss(_t(lp), _t(targets), in_lens, tgt_lens, reduction="sum").item() == \
        pytest.approx(sum(want), rel=1e-10)


def test_ctc_loss_concatenated_targets_unbatched_and_other_blank():
    lp = _log_softmax(RNG.standard_normal((6, 2, 4)), 2)
    padded = np.array([[0, 1, 1], [2, 0, 0]])
    flat = np.array([0, 1, 1, 2])
    a = F.ctc_loss(_t(lp), _t(padded), [6, 5], [3, 1], blank=3, reduction="none")
    b = F.ctc_loss(_t(lp), _t(flat), [6, 5], [3, 1], blank=3, reduction="none")
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    want = _ctc_brute_force(lp[:6, 0], [0, 1, 1], 3)
    assert a[0].item() == pytest.approx(want, rel=1e-10)
    single = F.ctc_loss(_t(lp[:, 0]), _t(padded[0]), [6], [3], blank=3, reduction="none")
    assert single.dim() == 0 and single.item() == pytest.approx(want, rel=1e-10)


def test_ctc_loss_impossible_alignment_is_inf_or_zero_with_zero_infinity():
    lp = _log_softmax(RNG.standard_normal((2, 1, 3)), 2)
    target = _t([[1, 1]])  # a repeated label needs a blank between: 3 steps at least
    assert F.ctc_loss(_t(lp), target, [2], [2], reduction="none").item() == math.inf
    x = _t(lp, requires_grad=True)
    loss = F.ctc_loss(x, target, [2], [2], zero_infinity=True)
    assert loss.item() == 0.0
    loss.backward()
    assert np.all(x.grad.numpy() == 0)


def test_ctc_loss_gradcheck():
    targets = _t([[1, 2], [2, 2]])

    def fn(logits):
        return F.ctc_loss(F.log_softmax(logits, 2), targets, [5, 5], [2, 2])

    gradcheck(fn, RNG.standard_normal((5, 2, 3)))


@pytest.mark.parametrize("reduction, zero_infinity", [("none", False), ("mean", False),
                                                      ("sum", True)])
def test_ctc_loss_matches_torch(reduction, zero_infinity):
    torch = pytest.importorskip("torch")
    logits = RNG.standard_normal((12, 4, 6))
    targets = RNG.integers(1, 6, (4, 7))
    targets[0, 2] = targets[0, 1]
    in_lens, tgt_lens = [12, 10, 3, 8], [7, 4, 5, 0]  # element 2 is infeasible
    kx, tx = _t(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
    k = F.ctc_loss(F.log_softmax(kx, 2), _t(targets), in_lens, tgt_lens, reduction=reduction,
                   zero_infinity=zero_infinity)
    t = torch.nn.functional.ctc_loss(torch.log_softmax(tx, 2), torch.tensor(targets),
                                     torch.tensor(in_lens), torch.tensor(tgt_lens),
                                     reduction=reduction, zero_infinity=zero_infinity)
    np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=1e-10)
    if zero_infinity:
        k.backward()
        t.backward()
        np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-12)


def test_ctc_loss_errors():
    lp = _t(_log_softmax(RNG.standard_normal((4, 2, 3)), 2))
    with pytest.raises(ValueError, match="typo is not a valid value for reduction"):
        F.ctc_loss(lp, _t([[1], [1]]), [4, 4], [1, 1], reduction="typo")
    with pytest.raises(RuntimeError, match=r"\[ctc_loss\] blank must be in label range"):
        F.ctc_loss(lp, _t([[1], [1]]), [4, 4], [1, 1], blank=3)
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 4"):
        F.ctc_loss(lp, _t([[1], [1]]), [5, 4], [1, 1])
    with pytest.raises(RuntimeError, match=r"\[ctc_loss\] log_probs must be"):
        F.ctc_loss(lp.reshape(-1), _t([[1], [1]]), [4, 4], [1, 1])


# ---------------------------------------------------------------------------------------------
# fractional max pooling


def _np_fractional(x, kernel, out, samples):
    """PyTorch's documented sequence (computed in float64 here) and window maxima, NCHW."""
    n, c, h, w = x.shape
    result = np.empty((n, c) + tuple(out))
    index = np.empty((n, c) + tuple(out), dtype=np.int64)

    def starts(u, size, o, k):
        alpha = (size - k) / (o - 1)
        seq = [int((i + u) * alpha) - int(u * alpha) for i in range(o - 1)]
        return seq + [size - k]

    for b in range(n):
        for ch in range(c):
            hs = starts(samples[b, ch, 1], h, out[0], kernel[0])
            ws = starts(samples[b, ch, 0], w, out[1], kernel[1])
            for i, y0 in enumerate(hs):
                for j, x0 in enumerate(ws):
                    win = x[b, ch, y0:y0 + kernel[0], x0:x0 + kernel[1]]
                    r, s = np.unravel_index(np.argmax(win), win.shape)
                    result[b, ch, i, j] = win[r, s]
                    index[b, ch, i, j] = (y0 + r) * w + x0 + s
    return result, index


def test_fractional_max_pool2d_matches_numpy_and_gradcheck():
    x = RNG.standard_normal((2, 3, 9, 11))
    samples = RNG.random((2, 3, 2))
    out, idx = F.fractional_max_pool2d(_t(x), (2, 3), output_size=(5, 4), return_indices=True,
                                       _random_samples=_t(samples))
    want, want_idx = _np_fractional(x, (2, 3), (5, 4), samples)
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    # The indices are the max_unpool2d layout: unpooling puts the maxima back.
    back = F.max_unpool2d(out, idx, (2, 3), output_size=(9, 11)).numpy()
    np.testing.assert_array_equal(back.reshape(2, 3, -1)[np.arange(2)[:, None, None],
                                                         np.arange(3)[None, :, None],
                                                         want_idx.reshape(2, 3, -1)],
                                  want.reshape(2, 3, -1))
    gradcheck(lambda t: F.fractional_max_pool2d(t, 2, output_ratio=0.5,
                                                _random_samples=_t(samples[:1, :1])),
              RNG.standard_normal((1, 1, 6, 6)))


def test_fractional_max_pool_shapes_and_errors():
    x = kiln.randn(2, 3, 10, 10)
    assert list(F.fractional_max_pool2d(x, 3, output_ratio=0.5).shape) == [2, 3, 5, 5]
    assert list(F.fractional_max_pool2d(x[0], 3, output_size=4).shape) == [3, 4, 4]
    assert list(F.fractional_max_pool3d(kiln.randn(1, 2, 6, 7, 8), 2, output_size=(3, 4, 5))
                .shape) == [1, 2, 3, 4, 5]
    out, idx = F.fractional_max_pool2d_with_indices(x, 3, output_size=4)
    assert idx.dtype == kiln.int64 and list(idx.shape) == [2, 3, 4, 4]
    with pytest.raises(ValueError, match="requires specifying either an output_size or an "
                                         "output_ratio"):
        F.fractional_max_pool2d(x, 3)
    with pytest.raises(RuntimeError, match="pool height 3 too large relative to input height 10"):
        F.fractional_max_pool2d(x, 3, output_size=9)
    with pytest.raises(RuntimeError, match="Expect _random_samples of size"):
        F.fractional_max_pool2d(x, 3, output_size=4, _random_samples=kiln.rand(2, 3, 3))
    with pytest.raises(RuntimeError, match="Expected 3D or 4D tensor"):
        F.fractional_max_pool2d(kiln.randn(10, 10), 3, output_size=4)


@pytest.mark.parametrize("dims, shape, kernel, out", [
    (2, (2, 3, 10, 11), 3, (5, 7)), (2, (3, 9, 9), (2, 3), 4),
    (3, (2, 2, 7, 8, 9), 2, (3, 4, 5)), (3, (2, 5, 6, 7), (2, 3, 2), (3, 2, 4))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fractional_max_pool_matches_torch(dims, shape, kernel, out, dtype):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal(shape).astype(dtype)
    batch = shape[0] if len(shape) == dims + 2 else 1
    samples = RNG.random((batch, shape[-dims - 1], dims)).astype(dtype)
    kf = getattr(F, f"fractional_max_pool{dims}d")
    tf = getattr(torch.nn.functional, f"fractional_max_pool{dims}d")
    kx, tx = _t(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ko, ki = kf(kx, kernel, output_size=out, return_indices=True, _random_samples=_t(samples))
    to, ti = tf(tx, kernel, output_size=out, return_indices=True,
                _random_samples=torch.tensor(samples))
    np.testing.assert_array_equal(ko.detach().numpy(), to.detach().numpy())
    np.testing.assert_array_equal(ki.numpy(), ti.numpy())
    g = RNG.standard_normal(to.shape).astype(dtype)
    ko.backward(_t(g))
    to.backward(torch.tensor(g))
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy())


# ---------------------------------------------------------------------------------------------
# linear_cross_entropy


def _np_cross_entropy(logits, target, weight=None, reduction="mean", ignore=-100, smoothing=0.0):
    lp = _log_softmax(logits, -1)
    classes = logits.shape[-1]
    w = np.ones(classes) if weight is None else weight
    keep = target != ignore
    safe = np.where(keep, target, 0)
    nll = -lp[np.arange(len(target)), safe] * w[safe] * keep
    smooth = -(lp * w).sum(-1) * keep
    loss = (1 - smoothing) * nll + smoothing / classes * smooth
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (w[safe] * keep).sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("chunk", [None, 3, 64])
def test_linear_cross_entropy_matches_numpy(reduction, chunk):
    x = RNG.standard_normal((10, 4))
    w, b, cw = RNG.standard_normal((7, 4)), RNG.standard_normal(7), RNG.random(7)
    y = RNG.integers(0, 7, 10)
    y[2] = 3
    options = None if chunk is None else kiln.nn.LinearCrossEntropyOptions(batch_chunk_size=chunk)
    got = F.linear_cross_entropy(_t(x), _t(w), _t(y), linear_bias=_t(b), weight=_t(cw),
                                 reduction=reduction, ignore_index=3, label_smoothing=0.2,
                                 options=options)
    want = _np_cross_entropy(x @ w.T + b, y, cw, reduction, 3, 0.2)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("chunk", [None, 4])
def test_linear_cross_entropy_gradcheck(chunk):
    y = _t([0, 2, 1, 2, 0, 1])
    options = None if chunk is None else kiln.nn.LinearCrossEntropyOptions(batch_chunk_size=chunk)
    gradcheck(lambda x, w, b: F.linear_cross_entropy(x, w, y, linear_bias=b, options=options),
              RNG.standard_normal((6, 3)), RNG.standard_normal((3, 3)), RNG.standard_normal(3))


def test_linear_cross_entropy_k_dimensional_and_probabilities():
    x = RNG.standard_normal((5, 4))
    w = RNG.standard_normal((3, 2, 4))  # C=3 classes, out_features (2,)
    y = RNG.integers(0, 3, (5, 2))
    logits = np.einsum("nf,cdf->ncd", x, w)
    got = F.linear_cross_entropy(_t(x), _t(w), _t(y), reduction="none")
    lp = _log_softmax(logits, 1)
    want = -np.take_along_axis(lp, y[:, None, :], 1)[:, 0]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    probs = np.exp(_log_softmax(RNG.standard_normal((5, 3)), 1))
    got = F.linear_cross_entropy(_t(x), _t(w[:, 0]), _t(probs))
    want = -(probs * _log_softmax(x @ w[:, 0].T, 1)).sum(1).mean()
    assert got.item() == pytest.approx(want, rel=1e-12)
    with pytest.raises(RuntimeError, match="ignore_index cannot be specified when target "
                                           "contains probabilities"):
        F.linear_cross_entropy(_t(x), _t(w[:, 0]), _t(probs), ignore_index=1)


def test_linear_cross_entropy_errors():
    x, w = kiln.randn(4, 3), kiln.randn(5, 3)
    y = kiln.tensor([0, 1, 2, 3])
    with pytest.raises(RuntimeError, match="expected input with dimensionality 1 or 2, got 3"):
        F.linear_cross_entropy(kiln.randn(2, 4, 3), w, y)
    with pytest.raises(RuntimeError, match="expected linear_weight with dimensionality at least 2"):
        F.linear_cross_entropy(x, kiln.randn(3), y)
    with pytest.raises(RuntimeError, match="expected equal input and linear_weight last "
                                           "dimensions"):
        F.linear_cross_entropy(x, kiln.randn(5, 2), y)
    with pytest.raises(RuntimeError, match=r"expected linear_bias shape \(5,\), got \(4,\)"):
        F.linear_cross_entropy(x, w, y, linear_bias=kiln.randn(4))
    with pytest.raises(RuntimeError, match="requires batched input"):
        F.linear_cross_entropy(kiln.randn(3), kiln.randn(5, 2, 3), kiln.tensor(1))
    with pytest.raises(ValueError, match="invalid chunking_method"):
        kiln.nn.LinearCrossEntropyOptions(chunking_method="blocks")
    with pytest.raises(ValueError, match="batch_chunk_size must be positive int or None"):
        kiln.nn.LinearCrossEntropyOptions(batch_chunk_size=0)
    with pytest.raises(ValueError, match="invalid acc_policy"):
        kiln.nn.LinearCrossEntropyOptions(acc_policy="fast")


def test_linear_cross_entropy_options_chunk_sizes():
    opts = kiln.nn.LinearCrossEntropyOptions()
    # 1000 rows, 16 features, 256 classes: logits of 16x fewer rows ~ the input, as a power of 2.
    assert opts.chunk_rows(1000, 16, 256) == 64
    assert kiln.nn.LinearCrossEntropyOptions(chunking_method="aspect_ratio:4").chunk_rows(
        1000, 16, 256) == 16
    assert kiln.nn.LinearCrossEntropyOptions(batch_chunk_size=7).chunk_rows(1000, 16, 256) == 7


@pytest.mark.parametrize("options", [None, dict(batch_chunk_size=3)])
def test_linear_cross_entropy_matches_torch(options):
    torch = pytest.importorskip("torch")
    if not hasattr(torch.nn.functional, "linear_cross_entropy"):
        pytest.skip(f"torch {torch.__version__} has no F.linear_cross_entropy (2.15 added it)")
    x, w, b = RNG.standard_normal((10, 4)), RNG.standard_normal((7, 4)), RNG.standard_normal(7)
    y = RNG.integers(0, 7, 10)
    kx, kw, kb = (_t(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    k = F.linear_cross_entropy(kx, kw, _t(y), linear_bias=kb, label_smoothing=0.1,
                               options=options and kiln.nn.LinearCrossEntropyOptions(**options))
    t = torch.nn.functional.linear_cross_entropy(tx, tw, torch.tensor(y), linear_bias=tb,
                                                 label_smoothing=0.1)
    k.backward()
    t.backward()
    assert k.item() == pytest.approx(t.item(), rel=1e-12)
    for a, c in ((kx, tx), (kw, tw), (kb, tb)):
        np.testing.assert_allclose(a.grad.numpy(), c.grad.numpy(), rtol=1e-10, atol=1e-14)


# ---------------------------------------------------------------------------------------------
# multi_head_attention_forward


def _mha_args(e=8, heads=2, separate=False):
    w = RNG.standard_normal((3 * e, e)) * 0.3
    b = RNG.standard_normal(3 * e) * 0.1
    ow, ob = RNG.standard_normal((e, e)) * 0.3, RNG.standard_normal(e) * 0.1
    return w, b, ow, ob


def test_multi_head_attention_forward_matches_numpy():
    e, heads, L, S, N = 8, 2, 3, 4, 2
    w, b, ow, ob = _mha_args(e, heads)
    q, k, v = (RNG.standard_normal((n, N, e)) for n in (L, S, S))
    out, weights = F.multi_head_attention_forward(
        _t(q), _t(k), _t(v), e, heads, _t(w), _t(b), None, None, False, 0.0, _t(ow), _t(ob))
    qp, kp, vp = q @ w[:e].T + b[:e], k @ w[e:2 * e].T + b[e:2 * e], v @ w[2 * e:].T + b[2 * e:]
    hd = e // heads
    outs, ws = [], []
    for n in range(N):
        head_out, head_w = [], []
        for h in range(heads):
            sl = slice(h * hd, (h + 1) * hd)
            scores = qp[:, n, sl] @ kp[:, n, sl].T / math.sqrt(hd)
            a = np.exp(_log_softmax(scores, -1))
            head_out.append(a @ vp[:, n, sl])
            head_w.append(a)
        outs.append(np.concatenate(head_out, -1) @ ow.T + ob)
        ws.append(np.mean(head_w, 0))
    np.testing.assert_allclose(out.numpy(), np.stack(outs, 1), rtol=1e-10)
    np.testing.assert_allclose(weights.numpy(), np.stack(ws), rtol=1e-10)


def test_multi_head_attention_forward_gradcheck_and_errors():
    e = 4
    w, b, ow, ob = (_t(a) for a in _mha_args(e, 2))
    mask = _t(np.triu(np.ones((3, 3), bool), 1))
    gradcheck(lambda q: F.multi_head_attention_forward(q, q, q, e, 2, w, b, None, None, False,
                                                       0.0, ow, ob, attn_mask=mask)[0],
              RNG.standard_normal((3, 2, e)))
    q = kiln.randn(3, 2, e, dtype=kiln.float64)
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 6, but got 4"):
        F.multi_head_attention_forward(q, q, q, 6, 2, w, b, None, None, False, 0.0, ow, ob)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        F.multi_head_attention_forward(q, q, q, e, 2, w, b, None, None, False, 0.0, ow, ob,
                                       is_causal=True)
    with pytest.raises(RuntimeError, match="q_proj_weight, k_proj_weight or v_proj_weight is "
                                           "None"):
        F.multi_head_attention_forward(q, q, q, e, 2, None, b, None, None, False, 0.0, ow, ob,
                                       use_separate_proj_weight=True)


@pytest.mark.parametrize("kw", [dict(), dict(add_zero_attn=True), dict(bias_kv=True),
                                dict(static=True), dict(separate=True), dict(unbatched=True)])
def test_multi_head_attention_forward_matches_torch(kw):
    torch = pytest.importorskip("torch")
    e, heads, L, S, N = 8, 2, 3, 4, 2
    w, b, ow, ob = _mha_args(e, heads)
    shapes = [(L, e), (S, e), (S, e)] if kw.get("unbatched") else [(L, N, e), (S, N, e), (S, N, e)]
    q, k, v = (RNG.standard_normal(s) for s in shapes)
    extra = {}
    if kw.get("bias_kv"):
        extra.update(bias_k=RNG.standard_normal((1, 1, e)), bias_v=RNG.standard_normal((1, 1, e)))
    if kw.get("static"):
        extra.update(static_k=RNG.standard_normal((N * heads, 5, e // heads)),
                     static_v=RNG.standard_normal((N * heads, 5, e // heads)))
    if kw.get("separate"):
        extra.update(use_separate_proj_weight=True, q_proj_weight=w[:e], k_proj_weight=w[e:2 * e],
                     v_proj_weight=w[2 * e:])
    mask = None if kw.get("static") else RNG.standard_normal((L, S))

    def run(lib, fn):
        conv = {n: (lib.tensor(a) if isinstance(a, np.ndarray) else a) for n, a in extra.items()}
        bias_k, bias_v = conv.pop("bias_k", None), conv.pop("bias_v", None)
        out, weights = fn(lib.tensor(q), lib.tensor(k), lib.tensor(v), e, heads,
                          None if kw.get("separate") else lib.tensor(w), lib.tensor(b), bias_k,
                          bias_v, kw.get("add_zero_attn", False), 0.0, lib.tensor(ow),
                          lib.tensor(ob), attn_mask=None if mask is None else lib.tensor(mask),
                          **conv)
        return out.detach().numpy(), weights.detach().numpy()

    ko, kwts = run(kiln, F.multi_head_attention_forward)
    to, twts = run(torch, torch.nn.functional.multi_head_attention_forward)
    np.testing.assert_allclose(ko, to, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kwts, twts, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# small additions


def test_conv_tbc_is_a_time_major_cross_correlation():
    x, w, b = RNG.standard_normal((7, 2, 3)), RNG.standard_normal((3, 3, 4)), RNG.standard_normal(4)
    for pad in (0, 1):
        xp = np.pad(x, ((pad, pad), (0, 0), (0, 0)))
        want = np.stack([sum(xp[t + k] @ w[k] for k in range(3)) + b
                         for t in range(xp.shape[0] - 2)])
        np.testing.assert_allclose(F.conv_tbc(_t(x), _t(w), _t(b), pad).numpy(), want,
                                   rtol=1e-12)
    gradcheck(lambda x, w, b: F.conv_tbc(x, w, b, 1), x, w, b)
    with pytest.raises(RuntimeError, match="Input dim 2 \\(input channels\\) is not == dim 1"):
        F.conv_tbc(_t(x), _t(w[:, :2]), _t(b))
    with pytest.raises(RuntimeError, match="Input must have 3 dims"):
        F.conv_tbc(_t(x[0]), _t(w), _t(b))


def test_lp_pool3d_and_max_unpool3d():
    x = np.abs(RNG.standard_normal((2, 3, 4, 4, 6)))
    got = F.lp_pool3d(_t(x), 2, 2).numpy()
    want = np.sqrt((x ** 2).reshape(2, 3, 2, 2, 2, 2, 3, 2).sum((3, 5, 7)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    out, idx = F.max_pool3d(_t(x), 2, return_indices=True)
    back = F.max_unpool3d(out, idx, 2).numpy()
    assert back.shape == x.shape
    np.testing.assert_array_equal(np.sort(back[back != 0]), np.sort(out.numpy().ravel()))
    gradcheck(lambda t: F.lp_pool3d(t, 3, (2, 2, 3)), x + 0.5)


def test_with_indices_variants_and_in_place_activations():
    x = kiln.randn(2, 3, 8)
    for fn, ref in ((F.max_pool1d_with_indices, F.max_pool1d),
                    (F.adaptive_max_pool1d_with_indices, F.adaptive_max_pool1d)):
        out, idx = fn(x, 2)
        ref_out, ref_idx = ref(x, 2, return_indices=True)
        assert (out == ref_out).all() and (idx == ref_idx).all()
    x3 = kiln.randn(1, 2, 4, 4, 4)
    assert F.max_pool3d_with_indices(x3, 2)[1].dtype == kiln.int64
    assert list(F.adaptive_max_pool2d_with_indices(x3[0], 2)[1].shape) == [2, 4, 2, 2]
    assert list(F.adaptive_max_pool3d_with_indices(x3, 1)[0].shape) == [1, 2, 1, 1, 1]
    a = RNG.standard_normal(10)
    for fn, want in ((F.relu_, np.maximum(a, 0)), (F.elu_, np.where(a > 0, a, np.expm1(a))),
                     (lambda t: F.hardtanh_(t, -0.5, 0.5), np.clip(a, -0.5, 0.5)),
                     (lambda t: F.leaky_relu_(t, 0.2), np.where(a > 0, a, 0.2 * a))):
        t = _t(a)
        assert fn(t) is t
        np.testing.assert_allclose(t.numpy(), want, rtol=1e-12)
    assert F.native_channel_shuffle is F.channel_shuffle


def test_upsample_aliases_warn_and_interpolate():
    x = kiln.randn(1, 2, 3, 3)
    with pytest.warns(UserWarning, match="upsample` is deprecated"):
        a = F.upsample(x, scale_factor=2, mode="bilinear", align_corners=False)
    assert (a == F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)).all()
    with pytest.warns(UserWarning, match="upsample_nearest` is deprecated"):
        b = F.upsample_nearest(x, size=5)
    assert (b == F.interpolate(x, size=5, mode="nearest")).all()
    with pytest.warns(UserWarning, match="upsample_bilinear` is deprecated"):
        c = F.upsample_bilinear(x, scale_factor=2)
    assert (c == F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)).all()


def test_small_additions_match_torch():
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    x, w, b = RNG.standard_normal((7, 2, 3)), RNG.standard_normal((3, 3, 4)), RNG.standard_normal(4)
    np.testing.assert_allclose(F.conv_tbc(_t(x), _t(w), _t(b), 1).numpy(),
                               torch.conv_tbc(torch.tensor(x), torch.tensor(w), torch.tensor(b),
                                              1).numpy(), rtol=1e-12)
    v = np.abs(RNG.standard_normal((2, 3, 4, 6, 6)))
    np.testing.assert_allclose(F.lp_pool3d(_t(v), 1.5, (2, 3, 2), stride=1).numpy(),
                               TF.lp_pool3d(torch.tensor(v), 1.5, (2, 3, 2), stride=1).numpy(),
                               rtol=1e-12)
    ko, ki = F.max_pool3d(_t(v), 2, return_indices=True)
    to, ti = TF.max_pool3d(torch.tensor(v), 2, return_indices=True)
    np.testing.assert_array_equal(F.max_unpool3d(ko, ki, 2, output_size=(5, 7, 7)).numpy(),
                                  TF.max_unpool3d(to, ti, 2, output_size=(5, 7, 7)).numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(F.upsample_bilinear(_t(v[0]), scale_factor=2).numpy(),
                                   TF.upsample_bilinear(torch.tensor(v[0]),
                                                        scale_factor=2).numpy(), rtol=1e-12)
