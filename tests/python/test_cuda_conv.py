"""Convolution, pooling, normalization and resampling ops on CUDA against the CPU and (where
installed) PyTorch on the same device, forward and gradients of every floating input."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF
from helpers import assert_close, rand, requires_gpu

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


@pytest.fixture(autouse=True)
def _cudnn_tf32_off():
    """The float32 tolerances here assume cuDNN convolutions without TF32 (on by default)."""
    with kiln.backends.cudnn.flags(allow_tf32=False):
        yield


def _bn(F, xs, mk):
    rm, rv = mk(np.linspace(-1, 1, 3)), mk(np.linspace(0.5, 2, 3))
    out = F.batch_norm(xs[0], rm, rv, xs[1], xs[2], True, 0.2, 1e-3)
    return out, rm, rv


# name -> (fn(F, inputs, make_plain_tensor) -> output or tuple, input shapes)
CASES = {
    "conv2d": (lambda F, xs, mk: F.conv2d(xs[0], xs[1], xs[2], (2, 1), 1, (1, 2), 2),
               [(2, 4, 9, 8), (6, 2, 3, 3), (6,)]),
    "conv2d_depthwise": (lambda F, xs, mk: F.conv2d(xs[0], xs[1], None, 1, "same", 1, 4),
                         [(1, 4, 7, 6), (4, 1, 3, 2)]),
    "conv2d_1x1": (lambda F, xs, mk: F.conv2d(xs[0], xs[1]), [(3, 5, 4, 4), (7, 5, 1, 1)]),
    "conv1d": (lambda F, xs, mk: F.conv1d(xs[0], xs[1], xs[2], 2, 1, 2),
               [(2, 3, 11), (4, 3, 3), (4,)]),
    "conv3d": (lambda F, xs, mk: F.conv3d(xs[0], xs[1], xs[2], (1, 2, 1), 1, (2, 1, 1), 2),
               [(2, 4, 5, 4, 6), (6, 2, 2, 3, 2), (6,)]),
    "conv_transpose3d": (lambda F, xs, mk: F.conv_transpose3d(xs[0], xs[1], xs[2], 2, 1, 1),
                         [(1, 2, 3, 2, 3), (2, 3, 3, 2, 3), (3,)]),
    "conv_transpose2d": (lambda F, xs, mk: F.conv_transpose2d(xs[0], xs[1], xs[2], 2, 1, 1, 2, 1),
                         [(2, 4, 3, 4), (4, 3, 3, 3), (6,)]),
    "conv_transpose1d": (lambda F, xs, mk: F.conv_transpose1d(xs[0], xs[1], None, 3, 0, 2, 1, 2),
                         [(1, 2, 5), (2, 3, 2)]),
    "max_pool2d": (lambda F, xs, mk: F.max_pool2d(xs[0], 3, 2, 1, 1, True, True),
                   [(2, 3, 9, 8)]),
    "max_pool3d": (lambda F, xs, mk: F.max_pool3d(xs[0], (2, 3, 2), (2, 1, 2), 1, 1, True, True),
                   [(1, 2, 5, 4, 6)]),
    "avg_pool3d": (lambda F, xs, mk: F.avg_pool3d(xs[0], 2, 1, 1, False, False),
                   [(1, 2, 3, 4, 3)]),
    "interpolate_trilinear": (lambda F, xs, mk: F.interpolate(xs[0], size=(3, 5, 4),
                                                              mode="trilinear"),
                              [(1, 2, 2, 3, 4)]),
    "max_pool1d": (lambda F, xs, mk: F.max_pool1d(xs[0], 2, 1, 1, 2, False, True),
                   [(2, 3, 7)]),
    "avg_pool2d": (lambda F, xs, mk: F.avg_pool2d(xs[0], 3, 2, 1, True, False),
                   [(2, 3, 9, 8)]),
    "avg_pool2d_divisor": (lambda F, xs, mk: F.avg_pool2d(xs[0], 2, 1, 1, False, True, 3),
                           [(1, 2, 5, 5)]),
    "avg_pool1d": (lambda F, xs, mk: F.avg_pool1d(xs[0], 3, 2, 1, True, True), [(2, 3, 8)]),
    "adaptive_avg_pool2d": (lambda F, xs, mk: F.adaptive_avg_pool2d(xs[0], (3, 5)),
                            [(2, 3, 7, 9)]),
    "adaptive_avg_pool1d": (lambda F, xs, mk: F.adaptive_avg_pool1d(xs[0], 4), [(2, 3, 9)]),
    "adaptive_max_pool2d": (lambda F, xs, mk: F.adaptive_max_pool2d(xs[0], (4, 3), True),
                            [(2, 3, 7, 9)]),
    "batch_norm": (_bn, [(4, 3, 5, 2), (3,), (3,)]),
    "batch_norm_eval": (lambda F, xs, mk: F.batch_norm(xs[0], mk(np.linspace(-1, 1, 3)),
                                                       mk(np.linspace(0.5, 2, 3)), xs[1], xs[2]),
                        [(4, 3, 5), (3,), (3,)]),
    "group_norm": (lambda F, xs, mk: F.group_norm(xs[0], 2, xs[1], xs[2], 1e-4),
                   [(2, 6, 4, 3), (6,), (6,)]),
    "instance_norm": (lambda F, xs, mk: F.instance_norm(xs[0], None, None, xs[1], xs[2]),
                      [(2, 3, 4, 5), (3,), (3,)]),
    "pad_reflect": (lambda F, xs, mk: F.pad(xs[0], (1, 2, 2, 1), mode="reflect"),
                    [(2, 3, 4, 5)]),
    "pad_replicate": (lambda F, xs, mk: F.pad(xs[0], (3, 1, 0, 2), mode="replicate"),
                      [(2, 3, 4, 5)]),
    "pad_constant": (lambda F, xs, mk: F.pad(xs[0], (1, -1, 2, 0), value=0.5), [(2, 3, 4, 5)]),
    "unfold": (lambda F, xs, mk: F.unfold(xs[0], (2, 3), 2, 1, (1, 2)), [(2, 3, 6, 7)]),
    "fold": (lambda F, xs, mk: F.fold(xs[0], (5, 6), (2, 2), 1, 1, 2), [(2, 12, 12)]),
    "pixel_shuffle": (lambda F, xs, mk: F.pixel_shuffle(xs[0], 2), [(2, 8, 3, 4)]),
    "interpolate_bilinear": (lambda F, xs, mk: F.interpolate(xs[0], size=(7, 5), mode="bilinear",
                                                             align_corners=False),
                             [(2, 3, 4, 6)]),
    "interpolate_bilinear_ac": (lambda F, xs, mk: F.interpolate(
        xs[0], scale_factor=2, mode="bilinear", align_corners=True), [(1, 2, 3, 4)]),
    "interpolate_nearest": (lambda F, xs, mk: F.interpolate(xs[0], size=(5, 9)),
                            [(1, 2, 3, 4)]),
}


def _run(lib, F, name, device, dtype):
    """Outputs and input gradients of case `name` in `lib` (kiln or torch)."""
    fn, shapes = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    arrays = [rng.uniform(-2, 2, size=s) for s in shapes]
    xs = [lib.tensor(a, dtype=dtype, device=device).requires_grad_(True) for a in arrays]
    outs = fn(F, xs, lambda a: lib.tensor(a, dtype=dtype, device=device))
    outs = outs if isinstance(outs, tuple) else (outs,)
    # A fixed upstream gradient on the first (differentiable) output.
    g = np.random.default_rng(1).uniform(-1, 1, size=tuple(outs[0].shape))
    outs[0].backward(lib.tensor(g, dtype=dtype, device=device))
    results = [o.detach().cpu().double().numpy() if o.dtype.is_floating_point
               else o.detach().cpu().numpy() for o in outs]
    grads = [x.grad.detach().cpu().double().numpy() for x in xs]
    return results, grads


@requires_gpu
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_cuda_matches_cpu(name, dtype):
    tol = 1e-4 if dtype == kiln.float32 else 1e-10
    cpu = _run(kiln, KF, name, "cpu", dtype)
    gpu = _run(kiln, KF, name, "cuda", dtype)
    for a, b in zip(cpu[0] + cpu[1], gpu[0] + gpu[1]):
        np.testing.assert_allclose(b, a, atol=tol, rtol=tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name, device):
    torch = pytest.importorskip("torch")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    ours = _run(kiln, KF, name, device, kiln.float64)
    theirs = _run(torch, torch.nn.functional, name, device, torch.float64)
    for a, b in zip(theirs[0] + theirs[1], ours[0] + ours[1]):
        np.testing.assert_allclose(b, a, atol=1e-9, rtol=1e-9)


@requires_gpu
def test_cnn_training_step_on_cuda_matches_cpu():
    import kiln.nn as nn
    kiln.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16),
                        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    x = kiln.tensor(rand(4, 3, 8, 8), dtype=kiln.float32)
    y = kiln.tensor(np.arange(4) % 10)
    import copy
    gpu_net = copy.deepcopy(net).cuda()
    loss_cpu = KF.cross_entropy(net(x), y)
    loss_gpu = KF.cross_entropy(gpu_net(x.cuda()), y.cuda())
    loss_cpu.backward()
    loss_gpu.backward()
    assert_close(loss_gpu.cpu(), loss_cpu.detach().numpy(), dtype=kiln.float32, atol=1e-4,
                 rtol=1e-4)
    for (name, p), q in zip(net.named_parameters(), gpu_net.parameters()):
        assert_close(q.grad.cpu(), p.grad.numpy(), dtype=kiln.float32, atol=1e-4, rtol=1e-3)
    assert_close(gpu_net[1].running_var.cpu(), net[1].running_var.numpy(), dtype=kiln.float32,
                 atol=1e-5, rtol=1e-5)
