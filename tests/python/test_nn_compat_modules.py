"""The torch.nn modules issue 17 found missing: 3-d padding and pooling, FractionalMaxPool,
CTCLoss, NLLLoss2d, LinearCrossEntropyLoss, AdaptiveLogSoftmaxWithLoss, CrossMapLRN2d,
SyncBatchNorm, DataParallel, Container and nn.factory_kwargs, plus nn.init's dirac_, sparse_
and deprecated aliases. NumPy references and gradchecks; PyTorch side by side where
installed."""

import math
import warnings

import numpy as np
import pytest

import kiln
from kiln import nn
from kiln.nn import functional as F
from helpers import gradcheck

RNG = np.random.default_rng(13)


def _t(a, **kw):
    return kiln.tensor(np.asarray(a), **kw)


@pytest.mark.parametrize("cls, mode, np_mode", [
    ("ConstantPad3d", "constant", "constant"), ("ZeroPad3d", "constant", "constant"),
    ("ReflectionPad3d", "reflect", "reflect"), ("ReplicationPad3d", "replicate", "edge"),
    ("CircularPad3d", "circular", "wrap")])
def test_3d_padding_matches_numpy(cls, mode, np_mode):
    x = RNG.standard_normal((2, 3, 3, 4, 5))
    pad = (1, 2, 0, 1, 2, 1)  # (W_left, W_right, H_top, H_bottom, D_front, D_back)
    args = (pad, 1.5) if cls == "ConstantPad3d" else (pad,)
    m = getattr(nn, cls)(*args)
    widths = ((0, 0), (0, 0), (2, 1), (0, 1), (1, 2))
    kw = {"constant_values": 1.5 if cls == "ConstantPad3d" else 0.0} if np_mode == "constant" \
        else {}
    np.testing.assert_array_equal(m(_t(x)).numpy(), np.pad(x, widths, mode=np_mode, **kw))
    assert getattr(nn, cls)(*((1, 0.0) if cls == "ConstantPad3d" else (1,))).padding == (1,) * 6
    with pytest.raises(ValueError, match="padding must be an int or a tuple of 6 ints"):
        getattr(nn, cls)(*(((1, 2), 0.0) if cls == "ConstantPad3d" else ((1, 2),)))
    gradcheck(lambda t: m(t), RNG.standard_normal((1, 2, 3, 3, 4)))


def test_lppool3d_maxunpool3d_and_fractional_modules():
    x = np.abs(RNG.standard_normal((2, 3, 4, 4, 4))) + 0.1
    np.testing.assert_allclose(nn.LPPool3d(2, 2)(_t(x)).numpy(), F.lp_pool3d(_t(x), 2, 2).numpy())
    out, idx = nn.MaxPool3d(2, return_indices=True)(_t(x))
    back = nn.MaxUnpool3d(2)(out, idx)
    assert list(back.shape) == list(x.shape)
    assert (back.numpy() != 0).sum() == out.numel()
    samples = _t(RNG.random((2, 3, 2)))
    m = nn.FractionalMaxPool2d(2, output_size=3, return_indices=True, _random_samples=samples)
    a, ai = m(_t(x[:, :, 0]))
    b, bi = F.fractional_max_pool2d(_t(x[:, :, 0]), 2, 3, return_indices=True,
                                    _random_samples=samples)
    assert (a == b).all() and (ai == bi).all()
    assert "_random_samples" in dict(m.named_buffers())
    assert list(nn.FractionalMaxPool3d(2, output_ratio=(0.5, 0.5, 0.75))(_t(x)).shape) == \
        [2, 3, 2, 2, 3]
    with pytest.raises(ValueError, match="requires specifying either an output size, or a "
                                         "pooling ratio"):
        nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5)
    with pytest.raises(ValueError, match=r"output_ratio must be between 0 and 1 \(got 1.5\)"):
        nn.FractionalMaxPool2d(2, output_ratio=1.5)


def test_ctc_loss_and_nll_loss2d_modules():
    lp = F.log_softmax(kiln.tensor(RNG.standard_normal((6, 2, 4))), 2)
    targets = _t([[1, 2], [3, 0]])
    m = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    assert m(lp, targets, [6, 6], [2, 1]).item() == pytest.approx(
        F.ctc_loss(lp, targets, [6, 6], [2, 1], reduction="sum").item())
    x = F.log_softmax(kiln.tensor(RNG.standard_normal((2, 3, 4, 4))), 1)
    y = _t(RNG.integers(0, 3, (2, 4, 4)))
    assert isinstance(nn.NLLLoss2d(), nn.NLLLoss)
    assert nn.NLLLoss2d(ignore_index=1)(x, y).item() == pytest.approx(
        F.nll_loss(x, y, ignore_index=1).item())


def test_linear_cross_entropy_loss_module():
    kiln.manual_seed(0)
    m = nn.LinearCrossEntropyLoss(4, 3, out_features=(2,), bias=True, label_smoothing=0.1)
    assert list(m.linear.weight.shape) == [6, 4] and list(m.linear.bias.shape) == [6]
    x, y = kiln.randn(5, 4), _t(RNG.integers(0, 3, (5, 2)))
    logits = m.linear(x).reshape(5, 3, 2)
    assert m(x, y).item() == pytest.approx(
        F.cross_entropy(logits, y, label_smoothing=0.1).item(), rel=1e-6)
    with pytest.raises(RuntimeError, match=r"expected weight shape to be \(3,\), got \(2,\)"):
        nn.LinearCrossEntropyLoss(4, 3, weight=kiln.ones(2))
    with pytest.raises(RuntimeError, match="expected label_smoothing to be in range"):
        nn.LinearCrossEntropyLoss(4, 3, label_smoothing=1.5)


def _np_asm(head_w, head_b, tails, cutoffs, x):
    """Full log-probabilities of an adaptive softmax, from its definition."""
    def log_softmax(z):
        return z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) \
            - z.max(1, keepdims=True)
    head = log_softmax(x @ head_w.T + head_b)
    parts = [head[:, :cutoffs[0]]]
    for i, (w1, w2) in enumerate(tails):
        parts.append(log_softmax(x @ w1.T @ w2.T) + head[:, cutoffs[0] + i][:, None])
    return np.concatenate(parts, 1)


def test_adaptive_log_softmax_matches_its_definition():
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=True).double()
    assert [list(l.weight.shape) for l in m.tail[0]] == [[4, 8], [3, 4]]
    assert [list(l.weight.shape) for l in m.tail[1]] == [[2, 8], [4, 2]]
    with kiln.no_grad():
        m.head.bias[3:] += 3.0  # make the clusters likely so predict() walks the tails
    x = RNG.standard_normal((9, 8))
    y = np.array([0, 2, 3, 5, 6, 9, 1, 7, 4])
    full = _np_asm(m.head.weight.detach().numpy(), m.head.bias.detach().numpy(),
                   [(a.weight.detach().numpy(), b.weight.detach().numpy()) for a, b in m.tail],
                   [3, 6, 10], x)
    np.testing.assert_allclose(m.log_prob(_t(x)).detach().numpy(), full, rtol=1e-10)
    np.testing.assert_allclose(np.exp(full).sum(1), 1.0, rtol=1e-10)
    out, loss = m(_t(x), _t(y))
    np.testing.assert_allclose(out.detach().numpy(), full[np.arange(9), y], rtol=1e-10)
    assert loss.item() == pytest.approx(-full[np.arange(9), y].mean(), rel=1e-10)
    pred = m.predict(_t(x)).numpy()
    np.testing.assert_array_equal(pred, full.argmax(1))
    assert (pred >= 3).any()
    single = m(_t(x[0]), _t(y[0]))
    assert single.output.dim() == 0
    assert single.output.item() == pytest.approx(full[0, y[0]], rel=1e-10)
    params = list(m.parameters())
    gradcheck(lambda inp: m(inp, _t(y)).loss, x)
    assert all(p.grad is None for p in params)  # gradcheck differentiates the input only


def test_adaptive_log_softmax_errors():
    with pytest.raises(ValueError, match="cutoffs should be a sequence of length larger than 0"):
        nn.AdaptiveLogSoftmaxWithLoss(4, 10, [])
    for bad in ([5, 3], [0, 3], [3, 10], [3, 3]):
        with pytest.raises(ValueError, match="cutoffs should be a sequence of unique, positive"):
            nn.AdaptiveLogSoftmaxWithLoss(4, 10, bad)
    m = nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        m(kiln.randn(2, 4), _t([1, 10]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        m(kiln.randn(3, 4), _t([1, 2]))
    with pytest.raises(RuntimeError, match="0D or 1D target tensor expected"):
        m(kiln.randn(2, 4), _t([[1], [2]]))


def test_adaptive_log_softmax_matches_torch():
    torch = pytest.importorskip("torch")
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 9, 15], div_value=2.0).double()
    k = nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 9, 15], div_value=2.0).double()
    k.load_state_dict({n: _t(v.detach().numpy()) for n, v in t.state_dict().items()})
    x, y = RNG.standard_normal((11, 16)), RNG.integers(0, 20, 11)
    kx, tx = _t(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ko, to = k(kx, _t(y)), t(tx, torch.tensor(y))
    np.testing.assert_allclose(ko.output.detach().numpy(), to.output.detach().numpy(),
                               rtol=1e-12)
    ko.loss.backward()
    to.loss.backward()
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(k.predict(_t(x)).numpy(), t.predict(torch.tensor(x)).numpy())


def test_cross_map_lrn2d_follows_the_lua_torch_recurrence():
    x = RNG.standard_normal((2, 6, 3, 3))
    m = nn.CrossMapLRN2d(3, alpha=0.5, beta=0.75, k=2.0)
    # Windows of 3 centred channels, except that channel 0 stays in every later window
    # (PyTorch's running sum never subtracts it).
    windows = [[0, 1], [0, 1, 2], [0, 1, 2, 3], [0, 2, 3, 4], [0, 3, 4, 5], [0, 4, 5]]
    sums = np.stack([(x[:, w] ** 2).sum(1) for w in windows], 1)
    np.testing.assert_allclose(m(_t(x)).numpy(), x * (2.0 + 0.5 / 3 * sums) ** -0.75, rtol=1e-12)
    gradcheck(m, x)
    with pytest.raises(ValueError, match="CrossMapLRN2d: Expected input to be 4D, got 3D"):
        m(kiln.randn(2, 3, 3))
    assert repr(m) == "CrossMapLRN2d(3, alpha=0.5, beta=0.75, k=2.0)"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
def test_cross_map_lrn2d_matches_torch(size):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 7, 3, 4))
    np.testing.assert_allclose(nn.CrossMapLRN2d(size, 0.3, 0.6, 1.5)(_t(x)).numpy(),
                               torch.nn.CrossMapLRN2d(size, 0.3, 0.6, 1.5)(torch.tensor(x))
                               .numpy(), rtol=1e-12)


def test_sync_batch_norm_in_one_process_is_batch_norm():
    x = RNG.standard_normal((4, 3, 5))
    sync, ref = nn.SyncBatchNorm(3, momentum=0.2), nn.BatchNorm1d(3, momentum=0.2)
    np.testing.assert_allclose(sync(_t(x)).detach().numpy(), ref(_t(x)).detach().numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(sync.running_var.numpy(), ref.running_var.numpy(), rtol=1e-6)
    assert list(nn.SyncBatchNorm(3)(kiln.randn(2, 3, 2, 2, 2)).shape) == [2, 3, 2, 2, 2]
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        sync(kiln.randn(3))


def test_convert_sync_batchnorm_keeps_parameters_and_statistics():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4),
                          nn.Sequential(nn.BatchNorm1d(2, affine=False)))
    model[1](kiln.randn(2, 4, 2, 2))  # one training batch: statistics to carry over
    model.eval()
    weight, mean = model[1].weight, model[1].running_mean.clone()
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert type(converted[1]) is nn.SyncBatchNorm and type(converted[2][0]) is nn.SyncBatchNorm
    assert converted[1].weight is weight and not converted[1].training
    np.testing.assert_array_equal(converted[1].running_mean.numpy(), mean.numpy())
    assert int(converted[1].num_batches_tracked) == 1
    assert converted[2][0].weight is None
    assert type(converted[0]) is nn.Conv2d


def test_data_parallel_runs_the_module():
    kiln.manual_seed(0)
    inner = nn.Linear(3, 2)
    dp = nn.DataParallel(inner)
    x = kiln.randn(4, 3)
    assert dp.module is inner
    # With CUDA, DataParallel moves the module to device_ids[0] and the input there too.
    device = next(inner.parameters()).device
    assert device.type == ("cuda" if kiln.cuda.is_available() else "cpu")
    want = inner(x.to(device)).detach().cpu().numpy()
    np.testing.assert_array_equal(dp(x).detach().cpu().numpy(), want)
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    out = nn.parallel.data_parallel(inner, x.to(device))
    np.testing.assert_array_equal(out.detach().cpu().numpy(), want)


def test_container_is_deprecated_but_registers_modules():
    with pytest.warns(FutureWarning, match="nn.Container` is deprecated"):
        c = nn.Container(a=nn.Linear(2, 2), b=nn.ReLU())
    assert [n for n, _ in c.named_children()] == ["a", "b"]


def test_factory_kwargs():
    assert nn.factory_kwargs(None) == {}
    assert nn.factory_kwargs({"device": "cpu", "factory_kwargs": {"dtype": kiln.float64}}) == \
        {"device": "cpu", "dtype": kiln.float64}
    with pytest.raises(TypeError, match="unexpected kwargs"):
        nn.factory_kwargs({"shape": 3})
    with pytest.raises(TypeError, match="dtype specified twice"):
        nn.factory_kwargs({"dtype": kiln.float32, "factory_kwargs": {"dtype": kiln.float64}})


# ---------------------------------------------------------------------------------------------
# nn.init


@pytest.mark.parametrize("shape, groups", [((4, 4, 3), 1), ((6, 2, 3, 3), 2), ((2, 5, 3, 3, 3), 1),
                                           ((3, 2, 5), 1)])
def test_dirac_keeps_the_input_through_a_convolution(shape, groups):
    w = kiln.empty(shape, dtype=kiln.float64)
    assert nn.init.dirac_(w, groups) is w
    dims = len(shape) - 2
    x = RNG.standard_normal((1, shape[1] * groups) + (7,) * dims)
    conv = getattr(F, f"conv{dims}d")
    y = conv(_t(x), w, padding=tuple(k // 2 for k in shape[2:]), groups=groups).numpy()
    out_per_group = shape[0] // groups
    for g in range(groups):
        for d in range(min(out_per_group, shape[1])):
            np.testing.assert_array_equal(y[0, g * out_per_group + d], x[0, g * shape[1] + d])
    assert w.numpy().sum() == groups * min(out_per_group, shape[1])


def test_sparse_init_zeroes_a_fraction_of_each_column():
    kiln.manual_seed(0)
    w = kiln.empty(20, 30)
    nn.init.sparse_(w, 0.25, std=0.5)
    zeros = (w.numpy() == 0).sum(0)
    assert (zeros == math.ceil(0.25 * 20)).all()
    assert abs(w.numpy()[w.numpy() != 0].std() - 0.5) < 0.1
    g1, g2 = kiln.Generator().manual_seed(7), kiln.Generator().manual_seed(7)
    a, b = kiln.empty(5, 4), kiln.empty(5, 4)
    nn.init.sparse_(a, 0.5, generator=g1)
    nn.init.sparse_(b, 0.5, generator=g2)
    assert (a == b).all()


def test_init_errors():
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions"):
        nn.init.dirac_(kiln.empty(3, 3))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        nn.init.dirac_(kiln.empty(3, 3, 3), groups=2)
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        nn.init.sparse_(kiln.empty(3, 3, 3), 0.1)


@pytest.mark.parametrize("old, new, args", [
    ("uniform", "uniform_", ()), ("normal", "normal_", ()), ("constant", "constant_", (0.3,)),
    ("eye", "eye_", ()), ("dirac", "dirac_", ()), ("xavier_uniform", "xavier_uniform_", ()),
    ("xavier_normal", "xavier_normal_", ()), ("kaiming_uniform", "kaiming_uniform_", ()),
    ("kaiming_normal", "kaiming_normal_", ()), ("orthogonal", "orthogonal_", ()),
    ("sparse", "sparse_", (0.5,))])
def test_deprecated_init_aliases_warn_and_fill(old, new, args):
    shape = (3, 3, 3) if old == "dirac" else (4, 3)
    a, b = kiln.empty(shape), kiln.empty(shape)
    kiln.manual_seed(1)
    with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor of "
                                           f"`nn.init.{new}`"):
        out = getattr(nn.init, old)(a, *args)
    kiln.manual_seed(1)
    getattr(nn.init, new)(b, *args)
    assert out is a and (a == b).all()


def test_init_matches_torch():
    torch = pytest.importorskip("torch")
    for shape, groups in (((6, 2, 3, 3), 2), ((4, 4, 3), 1)):
        k, t = kiln.empty(shape), torch.empty(shape)
        nn.init.dirac_(k, groups)
        torch.nn.init.dirac_(t, groups)
        np.testing.assert_array_equal(k.numpy(), t.numpy())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.nn.init.uniform(torch.empty(2))
        nn.init.uniform(kiln.empty(2))
    assert str(caught[0].message) == str(caught[1].message)
