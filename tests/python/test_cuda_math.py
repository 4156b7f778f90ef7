"""CUDA reductions and cuBLAS matmul against the CPU and PyTorch."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, rand, requires_gpu

pytestmark = requires_gpu


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
def test_sum_mean_max_min(dtype):
    a = rand(5, 300, 3)
    x = kiln.tensor(a, dtype=dtype)
    g = x.to("cuda")
    tol = 1e-4 if dtype in (kiln.float32, kiln.float64) else 5e-2
    for fn in [lambda t: t.sum(), lambda t: t.sum(1), lambda t: t.mean((0, 2), keepdim=True),
               lambda t: t.amax(1), lambda t: t.amin(0)]:
        assert_close(fn(g).cpu().double(), fn(x).double().numpy(), atol=tol, rtol=tol)


def test_all_any_prod_int_sum():
    a = rand(4, 6, dtype=np.int64)
    g = kiln.tensor(a).to("cuda")
    assert g.sum().item() == int(a.sum())
    assert_close((g > 0).all(1).cpu(), (a > 0).all(1))
    assert_close((g > 0).any(0).cpu(), (a > 0).any(0))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
def test_matmul_layouts(dtype):
    a, b = rand(2, 7, 5), rand(5, 3)
    x, y = kiln.tensor(a, dtype=dtype), kiln.tensor(b, dtype=dtype)
    gx, gy = x.to("cuda"), y.to("cuda")
    tol = 1e-5 if dtype in (kiln.float32, kiln.float64) else 5e-2
    for f in [lambda p, q: p @ q, lambda p, q: p @ q.t().contiguous().t(),
              lambda p, q: p.transpose(1, 2).contiguous().transpose(1, 2) @ q,
              lambda p, q: p[0] @ q, lambda p, q: p[0].t().contiguous().t() @ q]:
        assert_close(f(gx, gy).cpu().double(), f(x, y).double().numpy(), atol=tol, rtol=tol)


def test_mlp_step_gradients_match_cpu():
    a, w = rand(8, 4), rand(4, 3)
    grads = []
    for device in ["cpu", "cuda"]:
        x = kiln.tensor(a, dtype=kiln.float32).to(device)
        wt = kiln.tensor(w, dtype=kiln.float32).to(device).requires_grad_()
        ((x @ wt).tanh() * 2).sum().backward()
        grads.append(wt.grad.cpu().numpy())
    assert_close(kiln.tensor(grads[1]), grads[0], atol=1e-5, rtol=1e-5)


def test_matmul_matches_pytorch():
    torch = pytest.importorskip("torch")
    a, b = rand(64, 96), rand(96, 32)
    got = (kiln.tensor(a, dtype=kiln.float32).to("cuda") @ kiln.tensor(b, dtype=kiln.float32).to("cuda")).cpu()
    ref = (torch.tensor(a, dtype=torch.float32, device="cuda") @ torch.tensor(b, dtype=torch.float32, device="cuda")).cpu()
    assert_close(got, ref.numpy(), atol=1e-4, rtol=1e-4)
