"""Sparse COO tensors on CUDA match the CPU: construction, coalesce, to_dense, to_sparse,
sparse @ dense forward and backward, and PyTorch's CUDA results where installed."""

import numpy as np
import pytest

import kiln
from helpers import requires_gpu

pytestmark = requires_gpu

INDICES = [[1, 0, 1, 2, 1], [2, 3, 0, 1, 2]]
VALUES = [1.5, -2.0, 3.0, 4.0, 0.25]
SIZE = (3, 4)


def run(device, dense):
    values = kiln.tensor(VALUES, dtype=kiln.float64, device=device, requires_grad=True)
    d = kiln.tensor(dense, device=device, requires_grad=True)
    s = kiln.sparse_coo_tensor(INDICES, values, SIZE)
    assert s.device.type == device and s._indices().device.type == device
    out = kiln.mm(s, d)
    (out ** 2).sum().backward()
    c = s.coalesce()
    return [out.detach().cpu().numpy(), values.grad.cpu().numpy(), d.grad.cpu().numpy(),
            c.indices().cpu().numpy(), c.values().detach().cpu().numpy(),
            s.to_dense().detach().cpu().numpy(),
            kiln.matmul(d.detach().t(), s.detach().t()).cpu().numpy(),
            kiln.sparse.sum(s.detach(), 0).to_dense().cpu().numpy()]


def test_cuda_matches_cpu_forward_and_backward():
    dense = np.random.default_rng(0).standard_normal((4, 2))
    for cpu, cuda in zip(run("cpu", dense), run("cuda", dense)):
        np.testing.assert_allclose(cuda, cpu, rtol=1e-12, atol=1e-12)


def test_moving_a_sparse_tensor_moves_indices_and_values():
    s = kiln.sparse_coo_tensor(INDICES, VALUES, SIZE).cuda()
    assert s.is_cuda and s._indices().is_cuda and s._values().is_cuda
    assert s.type() == "kiln.cuda.sparse.FloatTensor"
    x = kiln.tensor([[0.0, 1.0], [2.0, 0.0]], device="cuda").to_sparse()
    assert x.is_cuda and x.indices().cpu().tolist() == [[0, 1], [1, 0]]
    np.testing.assert_array_equal(s.cpu().to_dense().numpy(), s.to_dense().cpu().numpy())


def test_mixed_devices_are_refused():
    s = kiln.sparse_coo_tensor(INDICES, VALUES, SIZE).cuda()
    with pytest.raises(RuntimeError, match=r"\[mm\] expected both operands on the same device"):
        kiln.mm(s, kiln.ones(4, 2))


def test_cuda_matches_pytorch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    dense = np.random.default_rng(1).standard_normal((4, 3))
    results = []
    for lib in (kiln, torch):
        values = lib.tensor(VALUES, dtype=lib.float64, device="cuda", requires_grad=True)
        d = lib.tensor(dense, device="cuda", requires_grad=True)
        s = lib.sparse_coo_tensor(lib.tensor(INDICES, device="cuda"), values, SIZE)
        out = lib.mm(s, d)
        out.sum().backward()
        results.append((out.detach().cpu().numpy(), values.grad.cpu().numpy(),
                        d.grad.cpu().numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)
