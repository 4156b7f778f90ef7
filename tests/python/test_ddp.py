"""DistributedDataParallel. In-process tests drive the reducer through a fake process group
(PyTorch's ProcessGroup methods: rank, size, allreduce, broadcast); the multi-process tests
run real ranks over Gloo on CPU (tests/python/ddp_worker.py) and NCCL on two GPUs."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.nn as nn
from kiln.nn.parallel import DistributedDataParallel as DDP
from helpers import free_port

HERE = os.path.dirname(os.path.abspath(__file__))


class _Done:
    def wait(self, timeout=None):
        return True


class FakeGroup:
    """`size` ranks that all hold this rank's tensors: allreduce(SUM) multiplies by size,
    broadcast keeps the data. DDP's shape check all-gathers int64 rows (rank r fills row r,
    the rest are zeros): here every rank's row is rank 0's. Records every collective as
    (name, numel)."""

    def __init__(self, size=2):
        self._size = size
        self.calls = []

    def rank(self):
        return 0

    def size(self):
        return self._size

    def allreduce(self, tensors):
        (t,) = tensors
        self.calls.append(("allreduce", t.numel()))
        if t.dtype == kiln.int64:
            t.copy_(t[0:1].expand_as(t))
        else:
            t.mul_(self._size)
        return _Done()

    def broadcast(self, tensors, root):
        self.calls.append(("broadcast", tensors[0].numel()))
        return _Done()


def _mlp(seed=0, dtype=kiln.float64):
    kiln.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 6), nn.Tanh(),
                         nn.Linear(6, 3)).to(dtype)


def _data(n=8, seed=1):
    rng = np.random.default_rng(seed)
    return (kiln.tensor(rng.standard_normal((n, 5))), kiln.tensor(rng.standard_normal((n, 3))))


def _grads(model):
    return [p.grad.numpy().copy() for p in model.parameters()]


def _step_loss(model, x, y):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    return loss


def test_grads_match_local_model_with_several_buckets():
    ref, model = _mlp(), _mlp()
    group = FakeGroup(size=3)
    ddp = DDP(model, process_group=group, bucket_cap_mb=200 / 2**20)
    # Buckets fill in reverse registration order, closing at >= 200 bytes (25 float64).
    assert [b.indices for b in ddp._buckets] == [[5, 4, 3], [2], [1, 0]]
    x, y = _data()
    _step_loss(ref, x, y)
    group.calls.clear()
    _step_loss(ddp, x, y)
    # Then rank 0's gradient order is broadcast, to rebuild the buckets (unchanged here).
    assert group.calls == [("allreduce", 3 + 18 + 6), ("allreduce", 42), ("allreduce", 7 + 35),
                           ("broadcast", 6)]
    for a, b in zip(_grads(ref), _grads(model)):
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)


def test_buckets_launch_while_backward_runs():
    model = _mlp()
    first_layer_done = []

    class Spy(FakeGroup):
        def allreduce(self, tensors):
            first_layer_done.append(model[0].weight.grad is not None)
            return super().allreduce(tensors)

    ddp = DDP(model, process_group=Spy(), bucket_cap_mb=200 / 2**20)
    first_layer_done.clear()  # the shape check's all-reduces
    _step_loss(ddp, *_data())
    # The last layers' buckets leave before autograd reached the first layer.
    assert first_layer_done == [False, False, True]


def test_default_buckets_first_one_small():
    model = nn.Sequential(nn.Linear(600, 600), nn.Linear(600, 500))
    ddp = DDP(model, process_group=FakeGroup())
    # 1 MiB for the first bucket, then 25 MiB.
    assert [b.indices for b in ddp._buckets] == [[3, 2], [1, 0]]
    assert ddp.bucket_bytes_cap == 25 * 2**20


def test_buckets_split_by_dtype():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    model[0].to(kiln.float64)
    ddp = DDP(model, process_group=FakeGroup(), bucket_cap_mb=1)
    assert sorted(b.indices for b in ddp._buckets) == [[1, 0], [3, 2]]
    assert {str(b.buffer.dtype) for b in ddp._buckets} == {"kiln.float32", "kiln.float64"}


def test_construction_broadcasts_flat_per_dtype():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    group = FakeGroup()
    DDP(model, process_group=group, broadcast_buffers=False)
    # Shape check: 2 all-reduces; then one flat float32 broadcast of all parameters and the
    # float buffers, and one for the int64 num_batches_tracked.
    assert group.calls[:2] == [("allreduce", 2), ("allreduce", 2 * (1 + 3 + 3 * 2))]
    assert sorted(group.calls[2:]) == [("broadcast", 1), ("broadcast", 12 + 4 + 4 + 4 + 4 + 4)]


def test_several_iterations_and_optimizer():
    ref, model = _mlp(), _mlp()
    ddp = DDP(model, process_group=FakeGroup(), bucket_cap_mb=1e-4)
    opt_ref = kiln.optim.SGD(ref.parameters(), lr=0.1)
    opt = kiln.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(3):
        x, y = _data(seed=step)
        for m, o in ((ref, opt_ref), (ddp, opt)):
            o.zero_grad()
            _step_loss(m, x, y)
            o.step()
    for a, b in zip(ref.parameters(), model.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_gradient_as_bucket_view(set_to_none):
    ref, model = _mlp(), _mlp()
    ddp = DDP(model, process_group=FakeGroup(), bucket_cap_mb=1e-4,
              gradient_as_bucket_view=True)
    opt_ref = kiln.optim.SGD(ref.parameters(), lr=0.1)
    opt = kiln.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(2):
        x, y = _data(seed=step)
        for m, o in ((ref, opt_ref), (ddp, opt)):
            o.zero_grad(set_to_none=set_to_none)
            _step_loss(m, x, y)
        for a, b in zip(_grads(ref), _grads(model)):
            np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)
        opt_ref.step()
        opt.step()
    for i, p in enumerate(ddp._params):
        assert p.grad.data_ptr() == ddp._bucket_of[i].views[i].data_ptr()


def test_no_sync_accumulates_then_reduces_sum():
    ref, model = _mlp(), _mlp()
    group = FakeGroup()
    ddp = DDP(model, process_group=group)
    group.calls.clear()
    (x1, y1), (x2, y2) = _data(seed=3), _data(seed=4)
    with ddp.no_sync():
        _step_loss(ddp, x1, y1)
    assert group.calls == []
    _step_loss(ddp, x2, y2)
    assert [c[0] for c in group.calls] == ["allreduce", "broadcast"]
    _step_loss(ref, x1, y1)
    _step_loss(ref, x2, y2)
    for a, b in zip(_grads(ref), _grads(model)):
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)


class _OutOfOrder(nn.Module):
    def __init__(self):
        super().__init__()
        self.second = nn.Linear(6, 3).double()  # registered first, used last
        self.first = nn.Linear(5, 6).double()

    def forward(self, x):
        return self.second(kiln.tanh(self.first(x)))


@pytest.mark.parametrize("as_view", [False, True])
def test_buckets_rebuilt_in_gradient_order(as_view):
    kiln.manual_seed(0)
    model = _OutOfOrder()
    ref = _OutOfOrder()
    ref.load_state_dict(model.state_dict())
    ddp = DDP(model, process_group=FakeGroup(), bucket_cap_mb=100 / 2**20,
              gradient_as_bucket_view=as_view)
    # Reverse registration order puts `first` (whose gradients come last) in bucket 0.
    assert [b.indices for b in ddp._buckets] == [[3, 2], [1, 0]]
    for step in range(2):
        x, y = _data(seed=step)
        for m in (ref, ddp):
            m.zero_grad()
            _step_loss(m, x, y)
        for a, b in zip(_grads(ref), _grads(model)):
            np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)
        assert [sorted(b.indices) for b in ddp._buckets] == [[0, 1], [2, 3]]
    if as_view:
        for i, p in enumerate(ddp._params):
            assert p.grad.data_ptr() == ddp._bucket_of[i].views[i].data_ptr()


class _TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4).double()
        self.unused_head = nn.Linear(4, 2).double()

    def forward(self, x):
        return self.body(x)


def test_unused_parameters_error_names_them():
    ddp = DDP(_TwoHeads(), process_group=FakeGroup())
    x = kiln.tensor(np.ones((2, 4)))
    with pytest.raises(RuntimeError, match=r"\[DistributedDataParallel\] rank 0: parameters that "
                       r"received no gradient.*unused_head\.weight, unused_head\.bias.*"
                       r"find_unused_parameters=True"):
        ddp(x).sum().backward()
    # The failed iteration leaves no state behind: the next one raises the same way.
    with pytest.raises(RuntimeError, match="unused_head.weight"):
        ddp(x).sum().backward()


def test_find_unused_parameters():
    model = _TwoHeads()
    group = FakeGroup()
    ddp = DDP(model, process_group=group, find_unused_parameters=True)
    x = kiln.tensor(np.arange(8.0).reshape(2, 4))
    for _ in range(2):
        model.zero_grad()
        group.calls.clear()
        ddp(x).sum().backward()
        assert model.unused_head.weight.grad is None and model.unused_head.bias.grad is None
        np.testing.assert_allclose(model.body.bias.grad.numpy(), [2.0] * 4)
        # The used-flags all-reduce, then the buckets.
        assert group.calls[0] == ("allreduce", 4)


def test_static_graph_allows_unused_parameters():
    model = _TwoHeads()
    ddp = DDP(model, process_group=FakeGroup(), static_graph=True)
    x = kiln.tensor(np.arange(8.0).reshape(2, 4))
    for _ in range(2):
        model.zero_grad()
        ddp(x).sum().backward()
        np.testing.assert_allclose(model.body.bias.grad.numpy(), [2.0] * 4)
        assert model.unused_head.bias.grad is None


def test_second_backward_through_same_forward_raises():
    ddp = DDP(_mlp(), process_group=FakeGroup())
    x, y = _data()
    loss = ((ddp(x) - y) ** 2).mean()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match=r"\[DistributedDataParallel\] parameter '4.bias'.*"
                       r"after this iteration's reduction finished"):
        loss.backward()


def test_no_sync_forward_skips_next_buffer_broadcast():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    group = FakeGroup()
    ddp = DDP(model, process_group=group)
    with ddp.no_sync():
        ddp(kiln.randn(5, 3))
        group.calls.clear()
        ddp(kiln.randn(5, 3))
    assert group.calls == []


def test_forward_under_no_grad_does_not_arm_hooks():
    model = _mlp()
    group = FakeGroup()
    ddp = DDP(model, process_group=group)
    group.calls.clear()
    x, y = _data()
    with kiln.no_grad():
        ddp(x)
    loss = ((model(x) - y) ** 2).mean()  # the inner module directly: no DDP forward
    loss.backward()
    assert group.calls == []


def test_state_dict_and_module():
    model = _mlp()
    ddp = DDP(model, process_group=FakeGroup())
    assert ddp.module is model
    keys = list(ddp.state_dict())
    assert keys[0] == "module.0.weight" and len(keys) == 6
    assert all(k.startswith("module.") for k in keys)
    assert [n for n, _ in ddp.named_parameters()][0] == "module.0.weight"


def test_broadcast_buffers_each_forward():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    group = FakeGroup()
    ddp = DDP(model, process_group=group)
    group.calls.clear()
    ddp(kiln.randn(5, 3))
    assert sorted(group.calls) == [("broadcast", 1), ("broadcast", 8)]
    ddp_off = DDP(model, process_group=group, broadcast_buffers=False)
    group.calls.clear()
    ddp_off(kiln.randn(5, 3))
    assert group.calls == []


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="doesn't have any parameter that requires"):
        DDP(nn.ReLU(), process_group=FakeGroup())
    with pytest.raises(ValueError, match=r"\[DistributedDataParallel\] device_ids"):
        DDP(nn.Linear(2, 2), device_ids=[0], process_group=FakeGroup())


def test_default_group_must_be_initialized():
    dist = pytest.importorskip("kiln.distributed")
    if not hasattr(dist, "is_initialized") or dist.is_initialized():
        pytest.skip("kiln.distributed without process groups, or already initialized")
    with pytest.raises(RuntimeError, match=r"\[DistributedDataParallel\].*init_process_group"):
        DDP(nn.Linear(2, 2))


def test_hooks_do_not_keep_wrapper_alive():
    import gc
    import weakref
    model = _mlp()
    ref = weakref.ref(DDP(model, process_group=FakeGroup()))
    gc.collect()
    assert ref() is None
    x, y = _data()
    _step_loss(model, x, y)  # the module trains on without the wrapper
    assert model[0].weight.grad is not None


# ---- multi-process -------------------------------------------------------------------------

def _gloo_ready():
    try:
        import kiln.distributed as dist
    except ImportError:
        return False
    return hasattr(dist, "init_process_group") and dist.is_gloo_available()


def _run_ranks(scenario, world_size, backend="gloo", timeout=60):
    """Runs ddp_worker.py as `world_size` processes; returns each rank's JSON result."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(HERE, "..", "..", "python"), os.environ.get("PYTHONPATH", "")]))
    procs = []
    try:
        for rank in range(world_size):
            procs.append(subprocess.Popen(
                [sys.executable, os.path.join(HERE, "ddp_worker.py"), scenario, backend,
                 str(rank), str(world_size), str(port)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True))
        results = []
        for rank, p in enumerate(procs):
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, f"rank {rank} failed:\n{err[-3000:]}"
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


gloo = pytest.mark.skipif(not _gloo_ready(), reason="kiln.distributed with Gloo not available")


def _assert_same_everywhere(results, key):
    for r in results[1:]:
        for a, b in zip(results[0][key], r[key]):
            np.testing.assert_array_equal(np.array(b), np.array(a))


def _assert_matches_reference(results):
    _assert_same_everywhere(results, "params")
    for a, b in zip(results[0]["params"], results[0]["reference"]):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-10, atol=1e-12)


def _check_train(results):
    _assert_matches_reference(results)
    assert results[0]["buckets"] == 3


def _check_unused(results):
    for r in results:
        assert "find_unused_parameters=True" in r["error"] and "spare.weight" in r["error"]
        assert r["found_unused_ok"]
    assert "head.weight" not in results[0]["error"]  # rank 0 uses the head
    assert "head.weight" in results[1]["error"]
    _assert_same_everywhere(results, "params")


def _check_broadcast(results):
    _assert_same_everywhere(results, "params")
    _assert_same_everywhere(results, "buffers")


def _check_mismatch(results):
    for r in results:
        assert "rank 1" in r["error"] and "'0.weight'" in r["error"]
        assert "[3, 5]" in r["error"] and "[4, 5]" in r["error"]


def _check_amp(results):
    _assert_same_everywhere(results, "params")
    assert all(np.isfinite(np.array(p)).all() for p in results[0]["params"])
    assert results[0]["changed"]


CHECKS = {"train": _check_train, "view_no_sync": _assert_matches_reference,
          "unused": _check_unused, "broadcast": _check_broadcast, "mismatch": _check_mismatch,
          "amp": _check_amp}


@gloo
@pytest.mark.parametrize("world_size", [2, 3])
def test_gloo_training_matches_single_process(world_size):
    _check_train(_run_ranks("train", world_size))


@gloo
@pytest.mark.parametrize("scenario", ["view_no_sync", "unused", "broadcast", "mismatch", "amp"])
def test_gloo(scenario):
    CHECKS[scenario](_run_ranks(scenario, 2))


@gloo
def test_gloo_subgroup():
    results = _run_ranks("subgroup", 3)
    assert results[0]["params"] is None
    assert "not a member of process_group" in results[0]["error"]
    _assert_matches_reference(results[1:])


def _two_gpus():
    try:
        import kiln.distributed as dist
    except ImportError:
        return False
    return (hasattr(dist, "init_process_group") and dist.is_nccl_available()
            and kiln.cuda.is_available() and kiln.cuda.device_count() >= 2)


@pytest.mark.skipif(not _two_gpus(), reason="needs 2 GPUs and NCCL")
@pytest.mark.parametrize("scenario", sorted(CHECKS))
def test_nccl(scenario):
    CHECKS[scenario](_run_ranks(scenario, 2, backend="nccl", timeout=120))
