"""The CPU loop kernels on their threaded paths (ops/cpu/: reductions, copies, softmax /
layer_norm / cross_entropy, embedding backward, optimizer steps): sizes above each grain give
NumPy's results, and the thread count changes no bit. Also the vectorised float exp (Note
[Vectorised float exp]) against float64 NumPy, its edge values, and strided runs giving the
same bits as contiguous ones."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import RNG, assert_close, with_threads


def same_bits_on_one_and_two_threads(fn):
    """fn()'s result(s) as NumPy arrays, after checking 1 and 2 threads agree bitwise."""
    one, two = with_threads(1, fn), with_threads(2, fn)
    one = one if isinstance(one, (tuple, list)) else (one,)
    two = two if isinstance(two, (tuple, list)) else (two,)
    out = []
    for a, b in zip(one, two):
        a, b = a.detach().numpy(), b.detach().numpy()
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
        out.append(a)
    return out[0] if len(out) == 1 else out


BIG = RNG.standard_normal((300, 700))  # 210k elements: above every grain


@pytest.mark.parametrize("name,dim", [(name, dim) for name in ["sum", "mean", "amax", "amin", "prod"]
                                      for dim in [None, 0, 1, (0, 1)]
                                      if not (name == "prod" and dim == (0, 1))])  # one dim, as torch
def test_reductions_above_the_grain_match_numpy(name, dim):
    a = BIG * 0.1 + 1.0 if name == "prod" else BIG  # keep prod finite
    x = kiln.tensor(a, dtype=kiln.float32)
    np_fn = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min, "prod": np.prod}[name]
    got = same_bits_on_one_and_two_threads(
        lambda: getattr(kiln, name)(x) if dim is None else getattr(kiln, name)(x, dim))
    want = np_fn(a.astype(np.float32).astype(np.float64), axis=dim)
    rtol = 1e-3 if name == "prod" else 1e-5
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-4)


def test_long_rows_and_strided_inputs_reduce_like_numpy():
    a = RNG.standard_normal(1 << 20 | 3)  # one row of many chunks, odd tail
    x = kiln.tensor(a)
    assert_close(same_bits_on_one_and_two_threads(lambda: x.sum()), a.sum())
    m = RNG.standard_normal((513, 1031))
    t = kiln.tensor(m).t()  # non-contiguous: reduced after a copy
    assert_close(same_bits_on_one_and_two_threads(lambda: t.sum(1)), m.T.sum(1))
    assert_close(same_bits_on_one_and_two_threads(lambda: kiln.var(t, 0)), m.T.var(0, ddof=1))
    assert_close(same_bits_on_one_and_two_threads(lambda: kiln.linalg.vector_norm(t, 2, 1)),
                 np.linalg.norm(m.T, axis=1))


def test_max_and_sum_keep_nan_and_inf_on_threaded_paths():
    a = RNG.standard_normal(1 << 18).astype(np.float32)
    a[200_000] = np.nan
    a[5] = np.inf
    x = kiln.tensor(a)
    assert np.isnan(same_bits_on_one_and_two_threads(lambda: x.max()))
    assert np.isnan(same_bits_on_one_and_two_threads(lambda: x.sum()))
    b = a.copy()
    b[200_000] = 0
    y = kiln.tensor(b)
    assert same_bits_on_one_and_two_threads(lambda: y.max()) == np.inf
    assert same_bits_on_one_and_two_threads(lambda: y.min()) == b.min()


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_over_long_rows_keeps_the_first_extreme_and_the_first_nan(op):
    n = (1 << 16) * 3 + 5  # several chunks per row
    a = RNG.standard_normal((3, n)).astype(np.float32)
    extreme = 9.0 if op == "argmax" else -9.0
    a[0, [70_000, 150_000]] = extreme  # a tie across chunks: the first wins
    a[1, [100, 140_000]] = np.nan  # NaN wins, the first one
    a[2, -1] = extreme  # in the last chunk's tail
    x = kiln.tensor(a)
    idx = same_bits_on_one_and_two_threads(lambda: getattr(kiln, op)(x, 1))
    assert idx.tolist() == [70_000, 100, n - 1]
    values, idx2 = same_bits_on_one_and_two_threads(
        lambda: (kiln.max if op == "argmax" else kiln.min)(x, 1))
    assert idx2.tolist() == idx.tolist()
    assert values[0] == extreme and np.isnan(values[1])
    assert same_bits_on_one_and_two_threads(lambda: getattr(kiln, op)(x[0])) == 70_000
    # Many short rows split over threads.
    m = RNG.standard_normal((5000, 37))
    want = m.argmax(1) if op == "argmax" else m.argmin(1)
    got = same_bits_on_one_and_two_threads(lambda: getattr(kiln, op)(kiln.tensor(m), 1))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("shape,perm", [((1024, 777), (1, 0)), ((3, 200, 300), (0, 2, 1)),
                                        ((2, 40, 33, 35), (0, 2, 3, 1)), ((31, 5000), (1, 0))])
@pytest.mark.parametrize("to", [None, kiln.float64, kiln.float16])
def test_transposing_copies_match_numpy(shape, perm, to):
    a = RNG.standard_normal(shape).astype(np.float32)
    x = kiln.tensor(a).permute(*perm)
    fn = (lambda: x.contiguous()) if to is None else (lambda: x.to(to))
    got = same_bits_on_one_and_two_threads(fn)
    want = np.ascontiguousarray(a.transpose(perm))
    if to is not None:
        want = want.astype(got.dtype)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_copy_into_a_transposed_destination():
    a = RNG.standard_normal((600, 500)).astype(np.float32)
    dst = kiln.zeros(500, 600).t()
    dst.copy_(kiln.tensor(a))
    assert np.array_equal(dst.numpy(), a)
    small = kiln.tensor(RNG.standard_normal((3, 40)))  # below the tile size on one side
    assert np.array_equal(small.t().contiguous().numpy(), small.numpy().T)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_forward_and_backward_above_the_grain(dtype, log):
    a = RNG.standard_normal((257, 1000)) * 4
    g = RNG.standard_normal((257, 1000))
    fn = F.log_softmax if log else F.softmax

    def run():
        x = kiln.tensor(a, dtype=dtype, requires_grad=True)
        y = fn(x, -1)
        y.backward(kiln.tensor(g, dtype=dtype))
        return y, x.grad

    y, gx = same_bits_on_one_and_two_threads(run)
    e = np.exp(a - a.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    if log:
        want_y, want_g = np.log(sm), g - sm * g.sum(1, keepdims=True)
    else:
        want_y, want_g = sm, sm * (g - (g * sm).sum(1, keepdims=True))
    assert_close(kiln.tensor(y), want_y, dtype)
    assert_close(kiln.tensor(gx), want_g, dtype)


def test_softmax_rows_with_nan_and_inf_are_nan():
    a = RNG.standard_normal((64, 1030)).astype(np.float32)
    a[3, 7] = np.nan
    a[5, 9] = np.inf
    a[6, :] = -np.inf
    y = same_bits_on_one_and_two_threads(lambda: F.softmax(kiln.tensor(a), -1))
    assert np.isnan(y[[3, 5, 6]]).all() and not np.isnan(np.delete(y, [3, 5, 6], 0)).any()
    a[8, :] = -1e30  # large finite rows are fine
    assert_close(F.softmax(kiln.tensor(a[8:9]), -1), np.full((1, 1030), 1 / 1030), kiln.float32)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_layer_norm_forward_and_backward_above_the_grain(dtype):
    rows, cols = 300, 512
    a = RNG.standard_normal((rows, cols)) * 3 + 5
    w, b = RNG.standard_normal(cols), RNG.standard_normal(cols)
    g = RNG.standard_normal((rows, cols))

    def run():
        x = kiln.tensor(a, dtype=dtype, requires_grad=True)
        kw = kiln.tensor(w, dtype=dtype, requires_grad=True)
        kb = kiln.tensor(b, dtype=dtype, requires_grad=True)
        y = F.layer_norm(x, (cols,), kw, kb, 1e-5)
        y.backward(kiln.tensor(g, dtype=dtype))
        return y, x.grad, kw.grad, kb.grad

    y, gx, gw, gb = same_bits_on_one_and_two_threads(run)
    mu, var = a.mean(1, keepdims=True), a.var(1, keepdims=True)
    xhat = (a - mu) / np.sqrt(var + 1e-5)
    gy = g * w
    want_gx = (gy - gy.mean(1, keepdims=True) - xhat * (gy * xhat).mean(1, keepdims=True)) / \
        np.sqrt(var + 1e-5)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == kiln.float32 else {}
    assert_close(kiln.tensor(y), xhat * w + b, dtype, **tol)
    assert_close(kiln.tensor(gx), want_gx, dtype, **tol)
    assert_close(kiln.tensor(gw), (g * xhat).sum(0), dtype, **tol)
    assert_close(kiln.tensor(gb), g.sum(0), dtype, **tol)


def test_rms_norm_above_the_grain():
    a = RNG.standard_normal((200, 300)) + 2
    got = same_bits_on_one_and_two_threads(lambda: F.rms_norm(kiln.tensor(a), (300,), eps=1e-6))
    assert_close(kiln.tensor(got), a / np.sqrt((a * a).mean(1, keepdims=True) + 1e-6))


def test_cross_entropy_forward_and_backward_above_the_grain():
    logits = RNG.standard_normal((512, 300)) * 3
    target = RNG.integers(0, 300, 512)
    target[7] = -100

    def run():
        x = kiln.tensor(logits, dtype=kiln.float32, requires_grad=True)
        loss = F.cross_entropy(x, kiln.tensor(target))
        loss.backward()
        return loss, x.grad

    loss, gx = same_bits_on_one_and_two_threads(run)
    m = logits.max(1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(1, keepdims=True)))[:, 0]
    keep = target != -100
    rows = np.arange(512)[keep]
    want = (lse[keep] - logits[rows, target[keep]]).mean()
    assert_close(kiln.tensor(loss), want, kiln.float32)
    sm = np.exp(logits - lse[:, None])
    sm[rows, target[keep]] -= 1
    sm[~keep] = 0
    assert_close(kiln.tensor(gx), sm / keep.sum(), kiln.float32)


def test_embedding_backward_sums_repeated_rows_like_numpy():
    weight = RNG.standard_normal((50, 300))
    idx = RNG.integers(0, 50, (40, 30))
    g = RNG.standard_normal((40, 30, 300))

    def run():
        w = kiln.tensor(weight, requires_grad=True)
        F.embedding(kiln.tensor(idx), w).backward(kiln.tensor(g))
        return w.grad

    got = same_bits_on_one_and_two_threads(run)
    want = np.zeros_like(weight)
    np.add.at(want, idx.reshape(-1), g.reshape(-1, 300))
    assert_close(kiln.tensor(got), want)


@pytest.mark.parametrize("name,settings", [
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, amsgrad=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
])
def test_optimizer_steps_on_large_parameters_do_not_depend_on_threads(name, settings):
    p0 = RNG.standard_normal(200_003).astype(np.float32)
    grads = [RNG.standard_normal(200_003).astype(np.float32) for _ in range(3)]

    def run():
        p = kiln.nn.Parameter(kiln.tensor(p0))
        opt = getattr(kiln.optim, name)([p], **settings)
        for g in grads:
            p.grad = kiln.tensor(g)
            opt.step()
        return p

    got = same_bits_on_one_and_two_threads(run)
    torch = pytest.importorskip("torch")
    tp = torch.nn.Parameter(torch.tensor(p0))
    topt = getattr(torch.optim, name)([tp], **settings)
    for g in grads:
        tp.grad = torch.tensor(g)
        topt.step()
    np.testing.assert_allclose(got, tp.detach().numpy(), rtol=1e-5, atol=1e-6)


# --- the vectorised float exp ---------------------------------------------------------------

def ulps(got, want):
    """|got - want| in units of the last place of want as a float32."""
    w32 = want.astype(np.float32)
    spacing = np.spacing(np.abs(w32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def test_float_exp_is_within_two_ulps_of_float64_numpy():
    a = np.concatenate([RNG.uniform(-103, 88.7, 1 << 18), RNG.standard_normal(1 << 16),
                        np.linspace(-87.4, -103.9, 4001)]).astype(np.float32)
    got = kiln.exp(kiln.tensor(a)).numpy()
    want = np.exp(a.astype(np.float64))
    normal = want > np.finfo(np.float32).tiny
    assert ulps(got[normal], want[normal]).max() <= 2
    # Subnormal results: within one subnormal step.
    sub = ~normal
    step = np.finfo(np.float32).smallest_subnormal
    assert (np.abs(got[sub] - want[sub]) <= 2 * step).all()


def test_float_exp_sigmoid_silu_edge_values():
    edges = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 88.73, 89.0, -103.9, -104.0,
                      -200.0, 1e-30, -1e-30], dtype=np.float32)
    x = kiln.tensor(edges)
    with np.errstate(over="ignore"):
        want_exp = np.exp(edges.astype(np.float64))
    got = kiln.exp(x).numpy()
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == 0 and got[3] == 1 and got[4] == 1
    assert np.isfinite(got[5]) and got[6] == np.inf and got[7] == np.inf
    assert got[9] == 0 and got[10] == 0 and got[11] == 1 and got[12] == 1
    np.testing.assert_allclose(got[5], want_exp[5], rtol=2e-7)
    e64 = edges.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        # The shared functors' formulas (math::Sigmoid, math::Silu): silu(-inf) is NaN there.
        want_sig = 1 / (1 + np.exp(-e64))
        want_silu = e64 / (1 + np.exp(-e64))
    assert_close(kiln.sigmoid(x), want_sig, kiln.float32)
    assert_close(F.silu(x), want_silu, kiln.float32)


@pytest.mark.parametrize("op", [kiln.exp, kiln.sigmoid, F.silu])
def test_strided_and_threaded_runs_give_the_contiguous_bits(op):
    a = RNG.standard_normal((700, 301)).astype(np.float32) * 5
    x = kiln.tensor(a)
    contiguous = same_bits_on_one_and_two_threads(lambda: op(x))
    strided = same_bits_on_one_and_two_threads(lambda: op(x.t())).T
    assert np.array_equal(contiguous, strided)
    small = op(x[:3, :5]).numpy()  # a serial loop
    assert np.array_equal(small, contiguous[:3, :5])
    ref = {kiln.exp: np.exp, kiln.sigmoid: lambda v: 1 / (1 + np.exp(-v)),
           F.silu: lambda v: v / (1 + np.exp(-v))}[op](a.astype(np.float64))
    assert_close(kiln.tensor(contiguous), ref, kiln.float32)
