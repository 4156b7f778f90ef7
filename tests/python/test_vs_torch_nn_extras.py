"""kiln.nn extras (losses, activations, distances, shuffles, pooling, packed RNNs) against
PyTorch on the same device, forward and input gradients (runs where PyTorch is installed:
the GPU machine)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kiln  # noqa: E402
from torch_compare import (  # noqa: E402, F401
    Const, DEVICES, Fixed, GRAD_DTYPES, Strided, U, check, check_raises, compare, reseed,
    seeded_data)

reseed(__name__)


def F(lib):
    return lib.nn.functional


def signs(*shape):
    return Fixed(np.where(np.random.default_rng(sum(shape)).random(shape) > 0.5, 1.0, -1.0))


def fsigns(*shape):
    return Const(np.where(np.random.default_rng(sum(shape) + 1).random(shape) > 0.5, 1.0, -1.0))


def labels(*shape, classes=5):
    return Fixed(np.random.default_rng(sum(shape) + classes).integers(0, classes, shape))


def positive(*shape):
    return U(*shape, low=0.5, high=2.0)


LOSSES = [
    ("cosine_embedding", lambda lib, a, b, y: F(lib).cosine_embedding_loss(a, b, y, 0.2),
     [U(4, 5), Strided(U(4, 5)), fsigns(4)]),
    ("cosine_embedding_none", lambda lib, a, b, y: F(lib).cosine_embedding_loss(
        a, b, y, reduction="none"), [U(4, 5), U(4, 5), fsigns(4)]),
    ("margin_ranking", lambda lib, a, b, y: F(lib).margin_ranking_loss(a, b, y, 0.3),
     [U(6), U(6), fsigns(6)]),
    ("hinge_embedding", lambda lib, x, y: F(lib).hinge_embedding_loss(x, y, 1.5,
                                                                      reduction="sum"),
     [U(3, 4), fsigns(3, 4)]),
    ("soft_margin", lambda lib, x, y: F(lib).soft_margin_loss(x, y), [U(3, 4), fsigns(3, 4)]),
    ("multilabel_soft_margin", lambda lib, x, y, w: F(lib).multilabel_soft_margin_loss(
        x, y, w, reduction="none"), [U(3, 5), Const(np.random.default_rng(1).random((3, 5))
                                                    > 0.5), Const(positive(5))]),
    ("multi_margin_p1", lambda lib, x, y: F(lib).multi_margin_loss(x, y, margin=0.7),
     [U(4, 5), labels(4)]),
    ("multi_margin_p2_w", lambda lib, x, y, w: F(lib).multi_margin_loss(
        x, y, 2, 0.7, w, reduction="none"), [U(4, 5), labels(4), Const(positive(5))]),
    ("multi_margin_1d", lambda lib, x, y: F(lib).multi_margin_loss(x, y, reduction="none"),
     [U(5), Fixed(np.array(3))]),
    ("multilabel_margin", lambda lib, x, y: F(lib).multilabel_margin_loss(x, y,
                                                                          reduction="none"),
     [U(3, 4), Fixed(np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 0]]))]),
    ("poisson_log", lambda lib, x, t: F(lib).poisson_nll_loss(x, t, full=True),
     [U(3, 4), Const(np.random.default_rng(2).integers(0, 5, (3, 4)).astype(float))]),
    ("poisson_linear", lambda lib, x, t: F(lib).poisson_nll_loss(x, t, log_input=False,
                                                                 reduction="sum"),
     [positive(3, 4), Const(np.random.default_rng(3).integers(0, 5, (3, 4)).astype(float))]),
    ("gaussian_nll", lambda lib, x, t, v: F(lib).gaussian_nll_loss(x, t, v, full=True),
     [U(3, 4), U(3, 4), positive(3, 4)]),
    ("gaussian_nll_per_sample", lambda lib, x, t, v: F(lib).gaussian_nll_loss(
        x, t, v, reduction="none"), [U(3, 4), U(3, 4), positive(3)]),
    ("triplet", lambda lib, a, p, n: F(lib).triplet_margin_loss(a, p, n, 0.5, 3.0, swap=True),
     [U(4, 3), U(4, 3), U(4, 3)]),
    ("triplet_distance", lambda lib, a, p, n: F(lib).triplet_margin_with_distance_loss(
        a, p, n, margin=0.5, swap=True, reduction="none"), [U(4, 3), U(4, 3), U(4, 3)]),
    ("pairwise_distance", lambda lib, a, b: F(lib).pairwise_distance(a, b, 1.5, keepdim=True),
     [U(4, 3), U(4, 3)]),
    ("pdist", lambda lib, x: F(lib).pdist(x, 2.5), [U(5, 3)]),
]

ACTIVATIONS = [
    ("selu", lambda lib, x: F(lib).selu(x), [U(3, 4)]),
    ("celu", lambda lib, x: F(lib).celu(x, 0.7), [Strided(U(3, 4))]),
    ("threshold", lambda lib, x: F(lib).threshold(x, 0.3, -2.0), [U(3, 4)]),
    ("tanhshrink", lambda lib, x: F(lib).tanhshrink(x), [U(3, 4)]),
    ("softshrink", lambda lib, x: F(lib).softshrink(x, 0.6), [U(3, 4)]),
    ("hardshrink", lambda lib, x: F(lib).hardshrink(x, 0.6), [U(3, 4)]),
    ("rrelu_eval", lambda lib, x: F(lib).rrelu(x, 0.1, 0.3), [U(3, 4)]),
    ("selu_", lambda lib, x: F(lib).selu_(x * 1.0), [U(3, 4)]),
    ("celu_", lambda lib, x: F(lib).celu_(x * 1.0, 1.3), [U(3, 4)]),
    ("threshold_", lambda lib, x: F(lib).threshold_(x * 1.0, 0.1, 5.0), [U(3, 4)]),
    ("softmax2d", lambda lib, x: lib.nn.Softmax2d()(x), [U(2, 3, 2, 2)]),
    ("channel_shuffle", lambda lib, x: F(lib).channel_shuffle(x, 3), [U(2, 6, 2)]),
    ("local_response_norm", lambda lib, x: F(lib).local_response_norm(x, 3, 0.3, 0.75, 1.5),
     [U(2, 5, 3, 2)]),
    ("lrn_3d", lambda lib, x: F(lib).local_response_norm(x, 2), [U(2, 5, 4)]),
    ("lp_pool1d", lambda lib, x: F(lib).lp_pool1d(x, 3, 2), [positive(2, 3, 7)]),
    ("lp_pool2d", lambda lib, x: F(lib).lp_pool2d(x, 2, (2, 3), stride=1), [positive(1, 2, 4, 6)]),
    ("upsampling_bilinear", lambda lib, x: lib.nn.UpsamplingBilinear2d(scale_factor=2)(x),
     [U(1, 2, 3, 3)]),
    ("max_unpool2d", lambda lib, x: F(lib).max_unpool2d(
        *F(lib).max_pool2d(x, 2, return_indices=True), 2), [U(2, 3, 4, 6)]),
    ("affine_grid", lambda lib, t: F(lib).affine_grid(t, (2, 3, 3, 4), align_corners=False),
     [U(2, 2, 3)]),
]


def _grid_sample_case(mode, pad, ac):
    grid = U(2, 3, 5, 2, low=-3.2, high=3.2)
    # PyTorch's nearest-mode grid gradient is a zero tensor where kiln's is None: a constant
    # grid compares only the input gradient there.
    return (f"grid_sample_{mode}_{pad}_{ac}",
            lambda lib, x, g: F(lib).grid_sample(x, g, mode, pad, ac),
            [U(2, 2, 3, 4), Const(grid) if mode == "nearest" else grid])


ACTIVATIONS += [_grid_sample_case(mode, pad, ac) for mode in ("bilinear", "nearest")
                for pad in ("zeros", "border", "reflection") for ac in (False, True)]


# PyTorch's CELU gradient scales by 1 / alpha rounded to float32 (derivatives.yaml takes
# alpha.toFloat()), so in float64 it is off by ~3e-8 relative; kiln's is exact (see the float64
# gradcheck in test_nn_extras.py). float64 compares at float32's precision there.
FLOAT64_TOL = {"celu": (1e-7, 1e-7), "celu_": (1e-7, 1e-7)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES)
@pytest.mark.parametrize("name,fn,inputs", LOSSES + ACTIVATIONS,
                         ids=[c[0] for c in LOSSES + ACTIVATIONS])
def test_against_torch(name, fn, inputs, dtype, device):
    check(fn, inputs, device, dtype, tol=FLOAT64_TOL.get(name) if dtype == "float64" else None)


@pytest.mark.parametrize("device", DEVICES)
def test_rejections_match_torch(device):
    check_raises(lambda lib, x, y: F(lib).multi_margin_loss(x, y, p=3), [U(2, 3), labels(2)],
                 device)
    check_raises(lambda lib, x, t, v: F(lib).gaussian_nll_loss(x, t, v), [U(3, 4), U(3, 4),
                                                                           U(2)], device)
    check_raises(lambda lib, x: F(lib).dropout1d(x), [U(2, 3, 4, 5)], device)
    check_raises(lambda lib, x: F(lib).pdist(x), [U(4)], device)
    check_raises(lambda lib, x: F(lib).channel_shuffle(x, 4), [U(2, 6, 2)], device)
    check_raises(lambda lib, x: F(lib).softshrink(x, -1.0), [U(3)], device)


def _copy_rnn(kiln_module, torch_module, device):
    state = {k: torch.tensor(v.detach().cpu().numpy()) for k, v in
             kiln_module.state_dict().items()}
    torch_module.load_state_dict(state)
    return torch_module.to(device).double()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind,kwargs", [
    ("RNN", {"num_layers": 2}),
    ("GRU", {"bidirectional": True}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 2, "batch_first": True}),
])
def test_packed_rnn_against_torch(kind, kwargs, device):
    lengths = [3, 5, 1, 4]
    arrays = [U(n, 2) for n in lengths]
    k_mod = getattr(kiln.nn, kind)(2, 3, **kwargs).double().to(device)
    t_mod = _copy_rnn(k_mod, getattr(torch.nn, kind)(2, 3, **kwargs), device)
    outs, leaves = [], []
    for lib, mod in ((kiln, k_mod), (torch, t_mod)):
        xs = [lib.tensor(a, device=device, requires_grad=True) for a in arrays]
        rnn = lib.nn.utils.rnn
        padded = rnn.pad_sequence(xs, batch_first=kwargs.get("batch_first", False))
        packed = rnn.pack_padded_sequence(padded, lib.tensor(lengths),
                                          batch_first=kwargs.get("batch_first", False),
                                          enforce_sorted=False)
        out, state = mod(packed)
        unpacked, out_lengths = rnn.pad_packed_sequence(
            out, batch_first=kwargs.get("batch_first", False), padding_value=-1.0)
        states = state if isinstance(state, tuple) else (state,)
        (unpacked.sum() + sum(s.square().sum() for s in states)).backward()
        outs.append((packed.data, packed.batch_sizes, unpacked, out_lengths) + states)
        leaves.append(xs)
    compare(outs[0], outs[1])
    for k, t in zip(*leaves):
        compare(k.grad, t.grad, what="input grad")
    for name, p in k_mod.named_parameters():
        compare(p.grad, dict(t_mod.named_parameters())[name].grad, what=name)
