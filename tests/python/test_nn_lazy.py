"""Lazy modules, UninitializedParameter/UninitializedBuffer and nn.Buffer (issue 17):
PyTorch's materialise-on-first-call semantics, state_dict loading before the first call,
and the same forward as the plain layer they become."""

import numpy as np
import pytest

import kiln
from kiln import nn

RNG = np.random.default_rng(5)

CONVS = [("LazyConv1d", "Conv1d", (2, 3, 9), dict(kernel_size=3, padding=1)),
         ("LazyConv2d", "Conv2d", (2, 4, 6, 5), dict(kernel_size=(3, 2), stride=2, groups=2)),
         ("LazyConv3d", "Conv3d", (1, 2, 4, 5, 6), dict(kernel_size=2)),
         ("LazyConvTranspose1d", "ConvTranspose1d", (2, 3, 5), dict(kernel_size=3, stride=2)),
         ("LazyConvTranspose2d", "ConvTranspose2d", (2, 4, 3, 3),
          dict(kernel_size=2, groups=2, output_padding=1, stride=2)),
         ("LazyConvTranspose3d", "ConvTranspose3d", (1, 2, 3, 3, 2), dict(kernel_size=2))]


@pytest.mark.parametrize("lazy, plain, shape, kw", CONVS, ids=[c[0] for c in CONVS])
def test_lazy_conv_materializes_on_first_call(lazy, plain, shape, kw):
    m = getattr(nn, lazy)(6, **kw)
    assert isinstance(m.weight, nn.UninitializedParameter)
    assert isinstance(m.bias, nn.UninitializedParameter)
    assert m.has_uninitialized_params()
    x = kiln.tensor(RNG.standard_normal(shape), dtype=kiln.float32)
    y = m(x)
    assert type(m) is getattr(nn, plain)
    assert type(m.weight) is nn.Parameter and m.weight.requires_grad
    assert m.in_channels == shape[1]
    ref = getattr(nn, plain)(shape[1], 6, **kw)
    assert list(m.weight.shape) == list(ref.weight.shape)
    ref.load_state_dict(m.state_dict())
    np.testing.assert_allclose(y.detach().numpy(), ref(x).detach().numpy(), rtol=1e-6)
    # Unbatched input fixes in_channels from dim 0.
    m2 = getattr(nn, lazy)(6, **kw)
    m2(x[0])
    assert m2.in_channels == shape[1]


def test_lazy_conv_initialisation_follows_the_plain_layer():
    kiln.manual_seed(3)
    m = nn.LazyConv2d(8, 3)
    m(kiln.randn(1, 5, 6, 6))
    bound = 1 / np.sqrt(5 * 9)  # kaiming_uniform(a=sqrt(5)) and the bias share this bound
    assert np.abs(m.weight.detach().numpy()).max() <= bound
    assert np.abs(m.bias.detach().numpy()).max() <= bound
    assert m.weight.detach().numpy().std() > bound / 4  # initialised, not zeros


def test_lazy_conv_errors():
    m = nn.LazyConv2d(4, 3, groups=2)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        m(kiln.randn(1, 3, 5, 5))
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input"):
        nn.LazyConv2d(4, 3)(kiln.randn(5, 5))
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized"):
        nn.LazyConv2d(4, 3).weight.shape


@pytest.mark.parametrize("lazy, plain, shape", [
    ("LazyBatchNorm1d", "BatchNorm1d", (4, 3)), ("LazyBatchNorm2d", "BatchNorm2d", (2, 3, 4, 4)),
    ("LazyBatchNorm3d", "BatchNorm3d", (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", "InstanceNorm1d", (2, 3, 5)),
    ("LazyInstanceNorm2d", "InstanceNorm2d", (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", "InstanceNorm3d", (2, 3, 2, 3, 2))])
def test_lazy_norms(lazy, plain, shape):
    kw = dict(affine=True, track_running_stats=True) if "Instance" in lazy else {}
    m = getattr(nn, lazy)(momentum=0.3, **kw)
    assert isinstance(m.running_mean, nn.UninitializedBuffer)
    x = kiln.tensor(RNG.standard_normal(shape), dtype=kiln.float32)
    y = m(x)
    assert type(m) is getattr(nn, plain) and m.num_features == 3
    assert type(m.running_mean) is kiln.Tensor and list(m.running_var.shape) == [3]
    ref = getattr(nn, plain)(3, momentum=0.3, **kw)
    ref_y = ref(x)
    np.testing.assert_allclose(m.running_mean.numpy(), ref.running_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(y.detach().numpy(), ref_y.detach().numpy(), rtol=1e-5, atol=1e-6)
    # Batch norm counts batches; instance norm (in PyTorch too) does not.
    assert int(m.num_batches_tracked) == int(ref.num_batches_tracked)
    assert list(m.state_dict()) == list(ref.state_dict())


def test_lazy_norm_without_affine_or_stats_and_unbatched_instance_norm():
    # Nothing to materialize: as in PyTorch the module becomes BatchNorm1d with
    # num_features 0 and normalizes with batch statistics.
    m = nn.LazyBatchNorm1d(affine=False, track_running_stats=False)
    x = RNG.standard_normal((4, 5))
    y = m(kiln.tensor(x))
    assert type(m) is nn.BatchNorm1d and m.weight is None and m.running_mean is None
    np.testing.assert_allclose(y.numpy(), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-6)
    # Unbatched (C, L): channels from dim 0 (PyTorch takes dim 1 and then fails).
    inst = nn.LazyInstanceNorm1d(affine=True)
    inst(kiln.randn(3, 7))
    assert inst.num_features == 3 and list(inst.weight.shape) == [3]
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.LazyBatchNorm2d()(kiln.randn(2, 3))


def test_load_state_dict_materializes_before_the_first_call():
    src = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    src(kiln.randn(2, 3, 5, 5))
    dst = nn.Sequential(nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d())
    dst.load_state_dict(src.state_dict())
    assert type(dst[0]) is nn.Conv2d and type(dst[1]) is nn.BatchNorm2d
    assert dst[0].in_channels == 3 and dst[1].num_features == 4
    grouped = nn.LazyConvTranspose1d(4, 3, groups=2)
    grouped.load_state_dict(nn.ConvTranspose1d(6, 4, 3, groups=2).state_dict())
    assert grouped.in_channels == 6 and list(grouped.weight.shape) == [6, 2, 3]
    lazy_conv = nn.LazyConv1d(4, 3, groups=2)
    lazy_conv.load_state_dict(nn.Conv1d(6, 4, 3, groups=2).state_dict())
    assert lazy_conv.in_channels == 6
    x = kiln.randn(1, 3, 5, 5)
    src.eval(), dst.eval()
    np.testing.assert_array_equal(dst(x).detach().numpy(), src(x).detach().numpy())


def test_optimizer_sees_materialized_parameters():
    m = nn.Sequential(nn.LazyConv1d(2, 1), nn.Flatten(), nn.LazyLinear(1))
    m(kiln.randn(1, 3, 4))
    opt = kiln.optim.SGD(m.parameters(), lr=0.1)
    before = [p.detach().clone() for p in m.parameters()]
    m(kiln.randn(1, 3, 4)).sum().backward()
    opt.step()
    assert all(not (a == b.detach()).all() for a, b in zip(before, m.parameters()))


def test_uninitialized_placeholders():
    p = nn.UninitializedParameter(dtype=kiln.float64)
    assert isinstance(p, nn.Parameter) and p.requires_grad and repr(p) == "<UninitializedParameter>"
    with pytest.raises(RuntimeError, match="uninitialized parameter or buffer"):
        p.size()
    p.materialize((2, 3))
    assert type(p) is nn.Parameter and p.dtype == kiln.float64 and list(p.shape) == [2, 3]
    b = nn.UninitializedBuffer()
    assert not b.requires_grad
    b.materialize((4,), dtype=kiln.float16)
    assert list(b.shape) == [4] and b.dtype == kiln.float16
    import copy
    q = copy.deepcopy(nn.UninitializedParameter())
    assert isinstance(q, nn.UninitializedParameter)


def test_buffer_marks_tensors_that_modules_register_as_buffers():
    m = nn.Module()
    m.stat = nn.Buffer(kiln.ones(2))
    m.scratch = nn.Buffer(kiln.zeros(3), persistent=False)
    m.plain = kiln.ones(1)
    assert [n for n, _ in m.named_buffers()] == ["stat", "scratch"]
    assert list(m.state_dict()) == ["stat"]
    assert isinstance(m.stat, nn.Buffer) and not isinstance(m.plain, nn.Buffer)
    assert type(m.stat) is kiln.Tensor
    m.to(kiln.float64)
    assert m.stat.dtype == kiln.float64


def test_lazy_conv_matches_torch():
    torch = pytest.importorskip("torch")
    tm, km = torch.nn.LazyConv2d(5, 3, padding=1), nn.LazyConv2d(5, 3, padding=1)
    x = RNG.standard_normal((2, 4, 6, 6)).astype(np.float32)
    tm(torch.tensor(x))
    km(kiln.tensor(x))
    assert type(km).__name__ == type(tm).__name__
    assert list(km.weight.shape) == list(tm.weight.shape)
    assert repr(nn.LazyConv1d(3, 2)) == repr(torch.nn.LazyConv1d(3, 2))
