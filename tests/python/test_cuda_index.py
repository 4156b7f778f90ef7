"""CUDA indexing, scans, arg-reductions, tril/triu and the ops built on them
(embedding, cross_entropy, the digits MLP step) match the CPU."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import assert_close, rand, requires_gpu

pytestmark = requires_gpu


def both(fn, *arrays, dtype=kiln.float32, grad=False):
    """fn on CPU and CUDA copies of the inputs; returns (cpu_out, cuda_out, cpu_grads, cuda_grads)."""
    results = []
    for device in ("cpu", "cuda"):
        ts = []
        for a in arrays:
            t = kiln.tensor(a) if np.asarray(a).dtype.kind in "biu" else kiln.tensor(a, dtype=dtype)
            t = t.to(device)
            if grad and t.is_floating_point():
                t.requires_grad_()
            ts.append(t)
        out = fn(*ts)
        grads = []
        if grad:
            out.sum().backward()
            grads = [t.grad.cpu().numpy() for t in ts if t.is_floating_point()]
        results.append((out.detach().cpu().numpy(), grads))
    return results[0][0], results[1][0], results[0][1], results[1][1]


CASES = {
    "advanced_index": lambda x, i: x[i],
    "index_select": lambda x, i: x.index_select(0, i),
    "gather": lambda x, i: x.gather(0, i[:, None].expand(-1, x.shape[1])),
    "index_put_accumulate": lambda x, i: kiln.zeros_like(x).index_put_((i,), x[: len(i)] * 0 + 1,
                                                                       accumulate=True),
    "index_add": lambda x, i: kiln.zeros_like(x).index_add(0, i, x[: len(i)]),
    "masked_fill": lambda x, i: x.masked_fill(x > 0.5, -1.0),
    "tril": lambda x, i: x.tril(1),
    "triu": lambda x, i: x.triu(-1),
    "argmax": lambda x, i: x.argmax(1),
    "max_dim_values": lambda x, i: x.max(0).values,
    "max_dim_indices": lambda x, i: x.min(1).indices,
    "cumsum": lambda x, i: x.cumsum(1),
    "cumprod": lambda x, i: x.cumprod(0),
    "sort_values": lambda x, i: x.sort(1).values,
    "sort_indices_descending": lambda x, i: x.sort(0, descending=True).indices,
    "argsort_stable_ties": lambda x, i: (x * 2).round().argsort(1, stable=True),
    "topk": lambda x, i: x.topk(3, 1).values,
    "topk_smallest_indices": lambda x, i: x.topk(2, 0, largest=False).indices,
    "unique": lambda x, i: kiln.unique(i),
    "unique_inverse": lambda x, i: kiln.unique(i, return_inverse=True)[1],
    "unique_counts": lambda x, i: kiln.unique(i, return_counts=True)[1],
    "nonzero": lambda x, i: (x > 0.5).nonzero(),
    "mask_index": lambda x, i: x[x > 0.5],
    "sort_with_nan": lambda x, i: kiln.where(x > 1.2, x * float("nan"), x).sort(1).values,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_cpu(name):
    x = rand(6, 5)
    idx = np.array([4, 0, 4, 2], dtype=np.int64)
    cpu, gpu, _, _ = both(CASES[name], x, idx)
    assert_close(kiln.tensor(gpu), cpu, atol=1e-5, rtol=1e-5)


def test_embedding_forward_and_backward():
    w, idx = rand(7, 3), np.array([[1, 1], [6, 0]], dtype=np.int64)
    cpu, gpu, gc, gg = both(lambda i, wt: F.embedding(i, wt), idx, w, grad=True)
    assert_close(kiln.tensor(gpu), cpu, atol=1e-6, rtol=1e-6)
    assert_close(kiln.tensor(gg[0]), gc[0], atol=1e-6, rtol=1e-6)


def test_cross_entropy_forward_and_backward():
    logits, target = rand(8, 5), np.array([0, 4, 2, 2, 1, 3, 0, 4], dtype=np.int64)
    cpu, gpu, gc, gg = both(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), logits,
                            target, grad=True)
    assert_close(kiln.tensor(gpu), cpu, atol=1e-5, rtol=1e-5)
    assert_close(kiln.tensor(gg[0]), gc[0], atol=1e-5, rtol=1e-5)


def test_mlp_training_step_matches_cpu():
    x, w1, w2 = rand(16, 8), rand(8, 12), rand(12, 4)
    y = np.arange(16, dtype=np.int64) % 4

    def step(xt, w1t, w2t, yt):
        return F.cross_entropy(F.relu(xt @ w1t) @ w2t, yt)

    cpu, gpu, gc, gg = both(lambda a, b, c, t: step(a, b, c, t), x, w1, w2, y, grad=True)
    assert_close(kiln.tensor(gpu), cpu, atol=1e-5, rtol=1e-5)
    for a, b in zip(gg, gc):
        assert_close(kiln.tensor(a), b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16,
                                   kiln.int64, kiln.int32, kiln.int16, kiln.int8, kiln.uint8,
                                   kiln.bool])
def test_scatter_multiply_matches_cpu(dtype):
    # CUDA multiplies with a compare-and-swap loop per element; many sources hit each target
    # (and one- and two-byte dtypes share a 32-bit word with their neighbours).
    rng = np.random.default_rng(0)
    base = rng.choice([-1.0, 1.0, 2.0, 0.5], size=(5, 7))
    src = rng.choice([-1.0, 1.0, 2.0, 0.5], size=(40, 7))
    if dtype == kiln.bool:
        base, src = base > 0, src > 0
    elif not dtype.is_floating_point:
        base, src = np.abs(base).round() + (dtype != kiln.uint8) * (base < 0) * -2, np.sign(src)
    index = rng.integers(0, 5, size=(40, 7))
    out = {}
    for device in ("cpu", "cuda"):
        x = kiln.tensor(base, dtype=dtype, device=device)
        out[device] = x.scatter_(0, kiln.tensor(index, device=device),
                                 kiln.tensor(src, dtype=dtype, device=device), reduce="multiply")
    assert out["cuda"].dtype == dtype
    np.testing.assert_array_equal(out["cuda"].cpu().float().numpy(), out["cpu"].float().numpy())
    got = kiln.scatter_reduce(kiln.tensor(base, dtype=dtype, device="cuda"), 1,
                              kiln.tensor(index[:5] % 7, device="cuda"),
                              kiln.tensor(src[:5], dtype=dtype, device="cuda"), "prod")
    ref = kiln.scatter_reduce(kiln.tensor(base, dtype=dtype), 1, kiln.tensor(index[:5] % 7),
                              kiln.tensor(src[:5], dtype=dtype), "prod")
    np.testing.assert_array_equal(got.cpu().float().numpy(), ref.float().numpy())
