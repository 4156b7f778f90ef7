"""Sharing tensors between processes (issue 17, item 13): share_memory_, is_shared,
Module.share_memory and kiln.multiprocessing queues (Note [Shared-memory tensors])."""

import numpy as np
import pytest

import kiln
import kiln.multiprocessing as kmp


@pytest.fixture(params=["file_descriptor", "file_system"])
def strategy(request):
    old = kmp.get_sharing_strategy()
    kmp.set_sharing_strategy(request.param)
    yield request.param
    kmp.set_sharing_strategy(old)


def test_share_memory_keeps_the_object_values_and_views(strategy):
    base = kiln.arange(12, dtype=kiln.float32)
    t = base[2:10].view(2, 4).t()  # strided, with an offset
    values = t.numpy().copy()
    assert not t.is_shared()
    assert t.share_memory_() is t and t.is_shared()
    np.testing.assert_array_equal(t.numpy(), values)
    assert t.stride() == (1, 4) and t.storage_offset() == 2
    assert t.share_memory_() is t  # already shared: nothing happens
    p = kiln.nn.Parameter(kiln.ones(3))
    p.share_memory_()
    assert isinstance(p, kiln.nn.Parameter) and p.requires_grad and p.is_shared()
    (p * 2).sum().backward()
    assert p.grad.tolist() == [2.0, 2.0, 2.0]


def test_module_share_memory(strategy):
    m = kiln.nn.Sequential(kiln.nn.Linear(3, 2), kiln.nn.BatchNorm1d(2))
    params = list(m.parameters())
    assert m.share_memory() is m
    assert all(a is b for a, b in zip(params, m.parameters()))
    assert all(t.is_shared() for t in list(m.parameters()) + list(m.buffers()))
    with pytest.raises(ValueError, match="unknown strategy"):
        kmp.set_sharing_strategy("bogus")
    assert kmp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}


def _child(inbox, outbox, done):
    t, p = inbox.get()
    t.mul_(10)  # written in shared memory: the parent sees it
    outbox.put((t.sum().item(), t.is_shared(), type(p).__name__, p.requires_grad))
    done.wait(30)


def test_queue_passing_shares_memory_with_the_receiver(strategy):
    ctx = kmp.get_context("spawn")
    inbox, outbox, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_child, args=(inbox, outbox, done))
    proc.start()
    try:
        t = kiln.arange(6, dtype=kiln.float64).view(2, 3)[:, 1:]
        inbox.put((t, kiln.nn.Parameter(kiln.ones(2))))
        total, shared, name, requires_grad = outbox.get(timeout=60)
        assert total == 10 * (1 + 2 + 4 + 5) and shared
        assert name == "Parameter" and requires_grad
        np.testing.assert_array_equal(t.numpy(), [[10, 20], [40, 50]])
        assert t.is_shared()
    finally:
        done.set()
        proc.join(30)
    assert proc.exitcode == 0


def test_non_leaf_tensors_requiring_grad_are_refused():
    from kiln.multiprocessing.reductions import reduce_tensor

    x = kiln.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        reduce_tensor(x)


def test_pickle_outside_multiprocessing_still_copies():
    import pickle

    t = kiln.arange(3)
    u = pickle.loads(pickle.dumps(t))
    u.add_(1)
    assert t.tolist() == [0, 1, 2] and not u.is_shared()
