"""View ops (ops/view.h) against NumPy: shapes, strides, values, storage
sharing, when reshape copies, errors and float64 gradchecks."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, noncontig, rand


def shares_storage(a, b):
    """True when an in-place write to `a` changes `b`."""
    before = b.numpy().copy()
    a.add_(1)
    changed = not np.array_equal(b.numpy(), before)
    a.sub_(1)
    return changed


@pytest.fixture
def a():
    return rand(2, 3, 4)


def test_view_and_reshape(a):
    x = kiln.tensor(a)
    for shape in [(6, 4), (24,), (-1, 2), (2, -1, 3), (4, 1, 6)]:
        v = x.view(*shape)
        assert_close(v, a.reshape(shape))
        assert shares_storage(v, x)
        assert_close(x.view(shape), a.reshape(shape))
        assert_close(x.reshape(*shape), a.reshape(shape))
        assert_close(kiln.reshape(x, shape), a.reshape(shape))
    assert tuple(x.view(4, 6).stride()) == (6, 1)
    assert_close(x.view_as(kiln.ones(6, 4)), a.reshape(6, 4))
    assert_close(x.reshape_as(kiln.ones(4, 6)), a.reshape(4, 6))
    s = kiln.tensor(3.5, dtype=kiln.float64)
    assert tuple(s.view(1, 1).shape) == (1, 1) and s.view(1, 1).tolist() == [[3.5]]
    assert tuple(kiln.tensor([2.0]).view(()).shape) == ()
    e = kiln.ones(0, 3)
    assert tuple(e.view(3, 0).shape) == (3, 0) and tuple(e.reshape(-1, 3).shape) == (0, 3)


def test_view_on_non_contiguous(a):
    # Merging dims that are contiguous among themselves stays a view.
    x = kiln.tensor(a).permute(1, 2, 0)  # shape (3, 4, 2): dims 0 and 1 merge
    v = x.view(12, 2)
    assert_close(v, a.transpose(1, 2, 0).reshape(12, 2))
    assert shares_storage(v, x)
    # Splitting a dim of a transposed tensor is a view too.
    t = kiln.tensor(a.reshape(6, 4)).t()
    assert_close(t.view(2, 2, 6), a.reshape(6, 4).T.reshape(2, 2, 6))
    with pytest.raises(RuntimeError, match=r"\[view\].*\[4, 6\].*reshape"):
        kiln.tensor(a.reshape(6, 4)).t().view(24)
    with pytest.raises(RuntimeError, match=r"\[view\]"):
        x.view(-1)


def test_view_errors(a):
    x = kiln.tensor(a)
    with pytest.raises(RuntimeError, match=r"\[view\].*invalid for input of size 24"):
        x.view(5, 5)
    with pytest.raises(RuntimeError, match=r"\[view\].*only one dimension can be inferred"):
        x.view(-1, -1)
    with pytest.raises(RuntimeError, match=r"\[reshape\]"):
        x.reshape(7, -1)
    with pytest.raises(RuntimeError, match=r"\[view\]"):
        x.view(-1, 0)


def test_reshape_copies_only_when_needed(a):
    x = kiln.tensor(a)
    r = x.reshape(4, 6)
    assert shares_storage(r, x)
    t = kiln.tensor(a.reshape(6, 4)).t()
    flat = t.reshape(-1)
    assert_close(flat, a.reshape(6, 4).T.reshape(-1))
    assert flat.is_contiguous()
    assert not shares_storage(flat, t)
    assert_close(kiln.tensor(a).flatten(), a.reshape(-1))


def test_expand(a):
    b = rand(3, 1)
    x = kiln.tensor(b)
    e = x.expand(2, 3, 4)
    assert_close(e, np.broadcast_to(b, (2, 3, 4)))
    assert tuple(e.stride()) == (0, 1, 0)
    assert_close(x.expand(-1, 5), np.broadcast_to(b, (3, 5)))
    assert_close(x.expand_as(kiln.ones(3, 2)), np.broadcast_to(b, (3, 2)))
    assert_close(kiln.broadcast_to(x, (2, 3, 2)), np.broadcast_to(b, (2, 3, 2)))
    assert_close(kiln.tensor(2.0, dtype=kiln.float64).expand(2, 2), np.full((2, 2), 2.0))
    with pytest.raises(RuntimeError, match=r"\[expand\].*\(4\).*\(3\)"):
        x.expand(4, 4)
    with pytest.raises(RuntimeError, match=r"\[expand\]"):
        x.expand(4)
    with pytest.raises(RuntimeError, match=r"\[expand\]"):
        x.expand(-1, 3, 4)


def test_expand_shares_storage():
    x = kiln.tensor(rand(3, 1))
    e = x.expand(3, 4)
    x.mul_(2)
    assert_close(e, np.broadcast_to(x.numpy(), (3, 4)))


def test_permute_transpose_t_mT_T(a):
    x = kiln.tensor(a)
    p = x.permute(2, 0, 1)
    assert_close(p, a.transpose(2, 0, 1))
    assert tuple(p.stride()) == (1, 12, 4)
    assert not p.is_contiguous()
    assert shares_storage(p, x)
    assert_close(x.permute((1, -1, 0)), a.transpose(1, 2, 0))
    assert_close(kiln.permute(x, (2, 1, 0)), a.transpose(2, 1, 0))
    assert_close(x.transpose(0, 2), np.swapaxes(a, 0, 2))
    assert_close(kiln.transpose(x, -1, 1), np.swapaxes(a, 2, 1))
    assert_close(x.swapaxes(0, 1), np.swapaxes(a, 0, 1))
    m = rand(3, 5)
    assert_close(kiln.tensor(m).t(), m.T)
    assert_close(kiln.t(kiln.tensor(m[0])), m[0])
    assert_close(x.mT, np.swapaxes(a, -1, -2))
    assert_close(x.T, a.T)
    assert_close(kiln.tensor(m).T.T, m)
    with pytest.raises(RuntimeError, match=r"\[t\]"):
        x.t()
    with pytest.raises(RuntimeError, match=r"\[mT\]"):
        kiln.tensor(m[0]).mT
    with pytest.raises(RuntimeError, match=r"\[permute\]"):
        x.permute(0, 1)
    with pytest.raises(RuntimeError, match=r"\[permute\].*repeated"):
        x.permute(0, 1, 1)
    with pytest.raises(IndexError, match=r"\[permute\]"):
        x.permute(0, 1, 3)
    with pytest.raises(IndexError, match=r"\[transpose\]"):
        x.transpose(0, 3)


def test_squeeze_unsqueeze():
    b = rand(1, 3, 1, 2)
    x = kiln.tensor(b)
    assert_close(x.squeeze(), b.squeeze())
    assert_close(x.squeeze(0), b.squeeze(0))
    assert_close(x.squeeze(-2), b.squeeze(2))
    assert_close(x.squeeze(1), b)  # not size 1: unchanged
    assert_close(kiln.squeeze(x, (0, 2)), b.squeeze((0, 2)))
    assert shares_storage(x.squeeze(), x)
    assert_close(x.unsqueeze(0), b[None])
    assert_close(x.unsqueeze(-1), b[..., None])
    assert_close(kiln.unsqueeze(x, 2), np.expand_dims(b, 2))
    s = kiln.tensor(1.5, dtype=kiln.float64)
    assert tuple(s.unsqueeze(0).shape) == (1,)
    assert tuple(s.squeeze().shape) == () and tuple(s.squeeze(0).shape) == ()
    assert tuple(kiln.ones(1, 0, 1).squeeze().shape) == (0,)
    # Strides of an unsqueezed non-contiguous tensor stay consistent.
    t = noncontig(rand(3, 4)).unsqueeze(1)
    assert tuple(t.shape) == (3, 1, 4)
    assert_close(t.contiguous().view(12), t.numpy().reshape(12))
    with pytest.raises(IndexError, match=r"\[unsqueeze\]"):
        x.unsqueeze(5)
    with pytest.raises(IndexError, match=r"\[squeeze\]"):
        x.squeeze(4)


def test_select_and_narrow(a):
    x = kiln.tensor(a)
    assert_close(x.select(0, 1), a[1])
    assert_close(x.select(-1, -2), a[..., -2])
    assert_close(kiln.select(x, 1, 2), a[:, 2])
    s = x.select(2, 3)
    assert shares_storage(s, x)
    assert s.storage_offset() == 3 and tuple(s.stride()) == (12, 4)
    assert_close(x.narrow(1, 1, 2), a[:, 1:3])
    assert_close(kiln.narrow(x, -1, 0, 3), a[..., :3])
    assert_close(x.narrow(2, -2, 2), a[..., 2:])
    n = x.narrow(2, 1, 2)
    assert shares_storage(n, x) and not n.is_contiguous() and n.storage_offset() == 1
    assert tuple(x.narrow(0, 2, 0).shape) == (0, 3, 4)
    # Chained views keep composing offsets and strides.
    assert_close(x.transpose(0, 2).narrow(0, 1, 2).select(1, 2), a.transpose(2, 1, 0)[1:3, 2])
    with pytest.raises(IndexError, match=r"\[select\].*out of bounds"):
        x.select(0, 2)
    with pytest.raises(IndexError, match=r"\[select\]"):
        kiln.tensor(1.0).select(0, 0)
    with pytest.raises(RuntimeError, match=r"\[narrow\]"):
        x.narrow(1, 2, 2)


def test_flatten_unflatten_movedim(a):
    x = kiln.tensor(a)
    assert_close(x.flatten(), a.reshape(-1))
    assert_close(x.flatten(1), a.reshape(2, 12))
    assert_close(kiln.flatten(x, 0, 1), a.reshape(6, 4))
    assert_close(x.flatten(-2, -1), a.reshape(2, 12))
    assert tuple(kiln.tensor(2.0).flatten().shape) == (1,)
    assert_close(noncontig(a).flatten(), a.reshape(-1))
    assert shares_storage(x.flatten(), x)
    assert_close(x.unflatten(2, (2, 2)), a.reshape(2, 3, 2, 2))
    assert_close(kiln.unflatten(x, -1, (-1, 2)), a.reshape(2, 3, 2, 2))
    assert_close(x.movedim(0, 2), np.moveaxis(a, 0, 2))
    assert_close(kiln.movedim(x, -1, 0), np.moveaxis(a, -1, 0))
    assert_close(kiln.moveaxis(x, 1, -1), np.moveaxis(a, 1, -1))
    with pytest.raises(RuntimeError, match=r"\[flatten\]"):
        x.flatten(2, 0)
    with pytest.raises(RuntimeError, match=r"\[unflatten\]"):
        x.unflatten(2, (3, 2))


def test_unfold():
    b = rand(2, 7)
    x = kiln.tensor(b)
    u = x.unfold(1, 3, 2)
    windows = np.stack([b[:, i:i + 3] for i in range(0, 5, 2)], axis=1)
    assert_close(u, windows)
    assert tuple(u.shape) == (2, 3, 3) and tuple(u.stride()) == (7, 2, 1)
    assert shares_storage(u, x)
    assert_close(x.unfold(0, 2, 1), b.T[None])
    assert_close(noncontig(b).unfold(1, 7, 7), b[:, None, :])
    with pytest.raises(RuntimeError, match=r"\[unfold\]"):
        x.unfold(1, 8, 1)
    with pytest.raises(RuntimeError, match=r"\[unfold\]"):
        x.unfold(1, 2, 0)


def test_writes_through_views_are_visible():
    x = kiln.zeros(3, 4, dtype=kiln.float64)
    x.t().select(0, 1).add_(5)  # column 1
    x.narrow(0, 2, 1).mul_(0).add_(7)  # row 2
    expected = np.zeros((3, 4))
    expected[:, 1] = 5
    expected[2] = 7
    assert_close(x, expected)
    v = x.view(12)
    v.copy_(kiln.arange(12, dtype=kiln.float64))
    assert_close(x, np.arange(12.0).reshape(3, 4))


def test_views_share_version_counter():
    x = kiln.ones(3, 4)
    v = x.t()
    before = x._version
    v.add_(1)
    assert x._version == v._version == before + 1
    x.unsqueeze(0).mul_(2)
    assert v._version == before + 2


def test_detach_and_data_share_storage():
    x = kiln.tensor(rand(3), requires_grad=True)
    d = x.detach()
    assert not d.requires_grad
    d.add_(1)
    assert_close(x, d.numpy())


# ---------------------------------------------------------------- gradients


def test_gradcheck_views():
    b = rand(2, 3, 4)
    gradcheck(lambda x: x.view(6, 4) * kiln.arange(4, dtype=kiln.float64), b)
    gradcheck(lambda x: x.reshape(4, -1), b)
    gradcheck(lambda x: x.permute(2, 0, 1) * kiln.arange(2, dtype=kiln.float64).view(1, 2, 1), b)
    gradcheck(lambda x: x.transpose(0, 2), b)
    gradcheck(lambda x: x.mT, b)
    gradcheck(lambda x: x.T, b)
    gradcheck(lambda x: x.select(1, 2), b)
    gradcheck(lambda x: x.select(-1, 0) * 3, b)
    gradcheck(lambda x: x.narrow(2, 1, 2), b)
    gradcheck(lambda x: x.flatten(0, 1), b)
    gradcheck(lambda x: x.unflatten(2, (2, 2)), b)
    gradcheck(lambda x: x.movedim(2, 0), b)
    gradcheck(lambda x: x.unsqueeze(1).squeeze(1), b)
    gradcheck(lambda x: x.t().reshape(-1), rand(3, 4))
    gradcheck(lambda x: x.t(), rand(3, 4))
    gradcheck(lambda x: x.expand(3, 2, 4) * kiln.arange(3, dtype=kiln.float64).view(3, 1, 1),
              rand(2, 1))
    gradcheck(lambda x: x.squeeze(), rand(1, 3, 1))


def test_grad_through_view_chain():
    b = rand(2, 3, 4)
    x = kiln.tensor(b, requires_grad=True)
    y = x.transpose(0, 2).narrow(0, 1, 2).select(1, 0)  # shape (2, 2)
    (y * kiln.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=kiln.float64)).sum().backward()
    expected = np.zeros_like(b)
    expected[:, 0, 1:3] = np.array([[1.0, 2.0], [3.0, 4.0]]).T
    assert_close(x.grad, expected)


def test_expand_grad_sums():
    x = kiln.tensor(rand(3, 1), requires_grad=True)
    x.expand(2, 3, 5).sum().backward()
    assert_close(x.grad, np.full((3, 1), 10.0))


def test_unfold_grad_overlapping_and_gapped_windows():
    x = kiln.tensor(rand(6), requires_grad=True)
    x.unfold(0, 3, 1).sum().backward()
    assert_close(x.grad, np.array([1.0, 2.0, 3.0, 3.0, 2.0, 1.0]))
    x.grad = None
    x.unfold(0, 2, 3).sum().backward()  # step > size: positions 2 and 5 are skipped
    assert_close(x.grad, np.array([1.0, 1.0, 0.0, 1.0, 1.0, 0.0]))
    weights = kiln.arange(3, dtype=kiln.float64)
    gradcheck(lambda t: t.unfold(1, 3, 1) * weights, rand(2, 5))
    gradcheck(lambda t: t.t().unfold(0, 3, 2) * weights, rand(2, 7))
    # Double backward goes through the summed window placements.
    y = kiln.tensor(rand(5), requires_grad=True)
    (g,) = kiln.autograd.grad((y.unfold(0, 2, 1) ** 3).sum(), y, create_graph=True)
    (gg,) = kiln.autograd.grad(g.sum(), y)
    counts = np.array([1.0, 2.0, 2.0, 2.0, 1.0])
    assert_close(gg, 6 * y.detach().numpy() * counts)


def test_as_strided_backward_sums_overlapping_reads():
    base = rand(6)
    x = kiln.tensor(base, requires_grad=True)
    y = kiln.as_strided(x, (3, 3), (1, 1), 0)  # rows [0..2], [1..3], [2..4]
    g = rand(3, 3)
    y.backward(kiln.tensor(g))
    expected = np.zeros(6)
    for r in range(3):
        for c in range(3):
            expected[r + c] += g[r, c]
    assert_close(x.grad, expected)
    gradcheck(lambda t: kiln.as_strided(t, (2, 2), (1, 2), 1), base)
    gradcheck(lambda t: kiln.as_strided(t.t(), (2, 3), (1, 2), 0), rand(3, 2))
