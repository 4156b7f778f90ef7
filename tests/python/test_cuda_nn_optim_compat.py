"""Issue 17's nn/optim additions on CUDA: the new optimizers' trajectories, CTC loss,
fractional max pooling, linear_cross_entropy (chunked), the lazy layers, AdaptiveLogSoftmax,
CrossMapLRN2d, multi_head_attention_forward and DataParallel give the CPU's values (and
PyTorch's where installed)."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from kiln import nn
from helpers import requires_gpu

pytestmark = requires_gpu

RNG = np.random.default_rng(21)

OPTIMIZERS = [("ASGD", dict(lr=0.05, t0=2, weight_decay=0.1)),
              ("Rprop", dict(lr=0.05, maximize=True)),
              ("Adafactor", dict(lr=0.05, weight_decay=0.1)),
              ("Adafactor", dict(beta2_decay=-0.5, eps=(1e-20, 1e-2))),
              ("Muon", dict(lr=0.02, weight_decay=0.05)),
              ("Muon", dict(nesterov=False, adjust_lr_fn="match_rms_adamw"))]


@pytest.mark.parametrize("name, kw", OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in
                                                      enumerate(OPTIMIZERS)])
def test_optimizer_on_cuda_matches_cpu(name, kw):
    shapes = [(5, 3), (4, 6)] if name == "Muon" else [(5, 3), (7,)]
    starts = [RNG.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    runs = {}
    for device in ("cpu", "cuda"):
        params = [kiln.tensor(a, device=device, requires_grad=True) for a in starts]
        opt = getattr(kiln.optim, name)(params, **kw)
        for step in range(5):
            for p, s in zip(params, shapes):
                g = np.random.default_rng(step).uniform(-1, 1, s).astype(np.float32)
                p.grad = kiln.tensor(g * (-1) ** step, device=device)
            opt.step()
        runs[device] = [p.detach().cpu().numpy() for p in params]
        assert all(t.device.type == device for st in opt.state.values() for k, t in st.items()
                   if isinstance(t, kiln.Tensor) and k != "step")
    for a, b, start in zip(runs["cpu"], runs["cuda"], starts):
        if name == "Muon":  # bfloat16 matmuls may round differently on the GPU
            np.testing.assert_allclose(b, a, atol=0.1 * np.abs(a - start).max())
        else:
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_ctc_loss_on_cuda_matches_cpu_and_backward():
    logits = RNG.standard_normal((10, 3, 5))
    targets = RNG.integers(1, 5, (3, 4))
    in_lens, tgt_lens = [10, 8, 6], [4, 2, 3]
    out = {}
    for device in ("cpu", "cuda"):
        x = kiln.tensor(logits, device=device, requires_grad=True)
        loss = F.ctc_loss(F.log_softmax(x, 2), kiln.tensor(targets, device=device),
                          kiln.tensor(in_lens, device=device), tgt_lens)
        loss.backward()
        out[device] = (loss.item(), x.grad.cpu().numpy())
    assert out["cuda"][0] == pytest.approx(out["cpu"][0], rel=1e-10)
    np.testing.assert_allclose(out["cuda"][1], out["cpu"][1], rtol=1e-8, atol=1e-12)


def test_fractional_max_pool_on_cuda():
    x = RNG.standard_normal((2, 3, 9, 10)).astype(np.float32)
    samples = RNG.random((2, 3, 2)).astype(np.float32)
    res = {}
    for device in ("cpu", "cuda"):
        o, i = F.fractional_max_pool2d(kiln.tensor(x, device=device), 3, output_size=(4, 5),
                                       return_indices=True,
                                       _random_samples=kiln.tensor(samples, device=device))
        assert o.device.type == device
        res[device] = (o.cpu().numpy(), i.cpu().numpy())
    np.testing.assert_array_equal(res["cuda"][0], res["cpu"][0])
    np.testing.assert_array_equal(res["cuda"][1], res["cpu"][1])
    assert F.fractional_max_pool3d(kiln.randn(1, 2, 5, 5, 5, device="cuda"), 2,
                                   output_ratio=0.5).device.type == "cuda"


def test_linear_cross_entropy_chunked_on_cuda():
    x, w = RNG.standard_normal((12, 8)), RNG.standard_normal((20, 8))
    y = RNG.integers(0, 20, 12)
    grads = {}
    for device, options in (("cpu", None), ("cuda", nn.LinearCrossEntropyOptions(
            batch_chunk_size=5))):
        kx = kiln.tensor(x, device=device, requires_grad=True)
        kw = kiln.tensor(w, device=device, requires_grad=True)
        loss = F.linear_cross_entropy(kx, kw, kiln.tensor(y, device=device), options=options)
        loss.backward()
        grads[device] = (loss.item(), kx.grad.cpu().numpy(), kw.grad.cpu().numpy())
    assert grads["cuda"][0] == pytest.approx(grads["cpu"][0], rel=1e-10)
    for a, b in zip(grads["cuda"][1:], grads["cpu"][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_lazy_layers_materialize_on_cuda():
    m = nn.Sequential(nn.LazyConv2d(4, 3, device="cuda"), nn.LazyBatchNorm2d(device="cuda"))
    y = m(kiln.randn(2, 3, 6, 6, device="cuda"))
    assert y.device.type == "cuda" and m[0].weight.device.type == "cuda"
    assert m[1].running_mean.device.type == "cuda" and type(m[1]) is nn.BatchNorm2d


def test_modules_on_cuda_match_cpu():
    kiln.manual_seed(0)
    asm = nn.AdaptiveLogSoftmaxWithLoss(8, 12, [3, 7]).double()
    lrn = nn.CrossMapLRN2d(3, 0.2, 0.7, 1.5)
    mha = nn.MultiheadAttention(8, 2, add_bias_kv=True).double()
    x = RNG.standard_normal((6, 8))
    y = RNG.integers(0, 12, 6)
    img = RNG.standard_normal((2, 5, 3, 3))
    seq = RNG.standard_normal((4, 2, 8))
    cpu = (asm(kiln.tensor(x), kiln.tensor(y)).output.detach().numpy(),
           lrn(kiln.tensor(img)).numpy(), mha(*(kiln.tensor(seq),) * 3)[0].detach().numpy())
    asm.cuda(), mha.cuda()
    gpu = (asm(kiln.tensor(x).cuda(), kiln.tensor(y).cuda()).output.detach().cpu().numpy(),
           lrn(kiln.tensor(img).cuda()).cpu().numpy(),
           mha(*(kiln.tensor(seq).cuda(),) * 3)[0].detach().cpu().numpy())
    for a, b in zip(gpu, cpu):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_data_parallel_moves_the_module_to_the_first_device():
    inner = nn.Linear(3, 2)
    dp = nn.DataParallel(inner, device_ids=[0])
    assert inner.weight.device.type == "cuda"
    out = dp(kiln.randn(4, 3))  # inputs follow to cuda:0
    assert out.device.type == "cuda"
    inner.cpu()
    with pytest.raises(RuntimeError, match="module must have its parameters and buffers on "
                                           "device cuda:0"):
        dp(kiln.randn(4, 3))


def test_new_optimizers_match_torch_on_cuda():
    torch = pytest.importorskip("torch")
    for name, kw in OPTIMIZERS[:4]:
        starts = [RNG.uniform(-1, 1, s).astype(np.float32) for s in [(5, 3), (7,)]]
        kp = [kiln.tensor(a, device="cuda", requires_grad=True) for a in starts]
        tp = [torch.tensor(a, device="cuda", requires_grad=True) for a in starts]
        kopt, topt = getattr(kiln.optim, name)(kp, **kw), getattr(torch.optim, name)(tp, **kw)
        for step in range(5):
            for k, t, a in zip(kp, tp, starts):
                g = np.random.default_rng(step).uniform(-1, 1, a.shape).astype(np.float32)
                k.grad = kiln.tensor(g, device="cuda")
                t.grad = torch.tensor(g, device="cuda")
            kopt.step()
            topt.step()
        for k, t in zip(kp, tp):
            np.testing.assert_allclose(k.detach().cpu().numpy(), t.detach().cpu().numpy(),
                                       rtol=1e-5, atol=1e-6)
