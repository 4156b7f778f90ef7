"""kiln.distributed collectives across real processes.

Each test spawns N ranks running one `case_*` function of this file (``python
test_dist_collectives.py <case> <rank> <world> <port>``), meeting over tcp:// on 127.0.0.1.
Every rank checks its results against NumPy; the parent asserts every rank exited 0. Joins
have timeouts and stragglers are killed, so a broken collective fails instead of hanging.
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import kiln
import kiln.distributed as dist
from helpers import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")

needs_gloo = pytest.mark.skipif(not dist.is_gloo_available(), reason="kiln built without Gloo")
needs_two_gpus = pytest.mark.skipif(
    not (dist.is_nccl_available() and kiln.cuda.is_available() and kiln.cuda.device_count() >= 2),
    reason="needs NCCL and 2 CUDA devices",
)


def spawn(case, world, timeout=20.0, expect_ok=True):
    """Runs case_<case> on `world` ranks; returns [(returncode, output)] per rank. The ranks
    also get torchrun's environment variables (env:// rendezvous)."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE=str(world))
    procs = [
        subprocess.Popen([sys.executable, __file__, case, str(r), str(world), str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=dict(env, RANK=str(r)))
        for r in range(world)
    ]
    results = []
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results.append((p.returncode, out.decode(errors="replace")))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if expect_ok:
        for r, (code, out) in enumerate(results):
            assert code == 0, f"rank {r} failed:\n{out}"
    return results


def init(rank, world, backend="gloo", port=None, timeout=10):
    from datetime import timedelta

    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=timeout))


def data(rank, shape, np_dtype, salt=0):
    """Rank-specific small integers (exact in every dtype, also bfloat16 sums)."""
    rng = np.random.default_rng(1000 * salt + rank)
    return rng.integers(1, 5, size=shape).astype(np_dtype)


def check(actual, expected, atol=0.0):
    half = actual.dtype in (kiln.bfloat16, kiln.float16)
    got = actual.float().numpy() if half else actual.numpy()
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(expected, np.float64), atol=atol)


# --- cases (run inside the spawned ranks) ------------------------------------------------
DTYPES = [(kiln.float32, np.float32), (kiln.float64, np.float64), (kiln.int64, np.int64),
          (kiln.int32, np.int32), (kiln.float16, np.float16), (kiln.bfloat16, np.float32),
          (kiln.uint8, np.uint8)]


def case_collectives(rank, world, port):
    init(rank, world, port=port)
    assert dist.get_rank() == rank and dist.get_world_size() == world
    assert dist.get_backend() == "gloo"
    every = lambda shape, dt, salt: [data(r, shape, dt, salt) for r in range(world)]  # noqa: E731
    for salt, (kd, nd) in enumerate(DTYPES):
        inputs = every((2, 3), nd, salt)
        for op, ref in ((dist.ReduceOp.SUM, np.sum), (dist.ReduceOp.MAX, np.max),
                        (dist.ReduceOp.MIN, np.min), (dist.ReduceOp.PRODUCT, np.prod)):
            t = kiln.tensor(inputs[rank]).to(kd)
            dist.all_reduce(t, op=op)
            check(t, ref(np.stack(inputs).astype(np.float64), axis=0))
        # broadcast from the last rank
        t = kiln.tensor(inputs[rank]).to(kd)
        dist.broadcast(t, src=world - 1)
        check(t, inputs[world - 1])
        # all_gather into a list and into one tensor
        outs = [kiln.zeros(2, 3, dtype=kd) for _ in range(world)]
        dist.all_gather(outs, kiln.tensor(inputs[rank]).to(kd))
        for r in range(world):
            check(outs[r], inputs[r])
        flat = kiln.zeros(world * 2, 3, dtype=kd)
        dist.all_gather_into_tensor(flat, kiln.tensor(inputs[rank]).to(kd))
        check(flat, np.concatenate(inputs))
    # float AVG, reduce to a root, reduce_scatter, all_to_all
    x = [data(r, (4, world), np.float32, 7) for r in range(world)]
    t = kiln.tensor(x[rank])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check(t, np.mean(np.stack(x), axis=0), atol=1e-6)
    t = kiln.tensor(x[rank])
    dist.reduce(t, dst=1, op=dist.ReduceOp.SUM)
    check(t, np.sum(np.stack(x), axis=0) if rank == 1 else x[rank])
    big = [data(r, (world * 2, 3), np.float32, 8) for r in range(world)]
    out = kiln.zeros(2, 3)
    dist.reduce_scatter_tensor(out, kiln.tensor(big[rank]))
    check(out, np.sum(np.stack(big), axis=0)[2 * rank:2 * rank + 2])
    out = kiln.zeros(world * 2, 3)
    dist.all_to_all_single(out, kiln.tensor(big[rank]))
    check(out, np.concatenate([big[r][2 * rank:2 * rank + 2] for r in range(world)]))
    # integer bitwise reductions
    bits = [data(r, (5,), np.int64, 9) * (r + 3) for r in range(world)]
    t = kiln.tensor(bits[rank])
    dist.all_reduce(t, op=dist.ReduceOp.BXOR)
    check(t, np.bitwise_xor.reduce(np.stack(bits), axis=0))
    # non-contiguous in place: results land in the viewed storage
    base = kiln.tensor(x[rank].copy())
    view = base.t()
    dist.all_reduce(view)
    check(base, np.sum(np.stack(x), axis=0))
    base = kiln.tensor(x[rank].copy())
    dist.broadcast(base[:, ::2], src=0)
    expected = x[rank].copy()
    expected[:, ::2] = x[0][:, ::2]
    check(base, expected)
    # async_op returns a Work to wait on
    t = kiln.tensor(x[rank])
    work = dist.all_reduce(t, async_op=True)
    assert work.wait() is True and work.is_completed()
    check(t, np.sum(np.stack(x), axis=0))
    dist.barrier()
    dist.destroy_process_group()
    assert not dist.is_initialized()


def case_groups_p2p_objects(rank, world, port):
    # No init_method: env:// from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE.
    dist.init_process_group("gloo")
    assert dist.get_rank() == rank
    # a subset group: ranks 1 and 2 (rank 0 is not a member but must call new_group too)
    sub = dist.new_group([1, 2])
    t = kiln.tensor([float(rank + 1)] * 3)
    dist.all_reduce(t, group=sub)
    if rank == 0:
        assert sub is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(sub) == -1
        check(t, [1.0] * 3)  # non-members skip the collective
    else:
        assert dist.get_rank(sub) == rank - 1 and dist.get_world_size(sub) == 2
        assert dist.get_process_group_ranks(sub) == [1, 2]
        check(t, [5.0] * 3)
        # src is a global rank
        b = kiln.tensor([float(rank)])
        dist.broadcast(b, src=2, group=sub)
        check(b, [2.0])
        with pytest.raises(ValueError, match=r"\[broadcast\] global rank 0 is not part"):
            dist.broadcast(b, src=0, group=sub)
    # send/recv around a ring, both blocking and async
    right, left = (rank + 1) % world, (rank - 1) % world
    out = kiln.tensor(np.arange(4, dtype=np.float32) + 10 * rank)
    got = kiln.zeros(4)
    sw = dist.isend(out, dst=right)
    rw = dist.irecv(got, src=left)
    sw.wait()
    rw.wait()
    check(got, np.arange(4) + 10 * left)
    if rank == 0:
        dist.send(kiln.tensor([7, 8], dtype=kiln.int32), dst=1, tag=3)
    elif rank == 1:
        r = kiln.zeros(2, dtype=kiln.int32)
        assert dist.recv(r, src=0, tag=3) == 0
        check(r, [7, 8])
    # object collectives
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "name": "r" * (rank + 1)})
    assert objs == [{"rank": r, "name": "r" * (r + 1)} for r in range(world)]
    items = [rank, "x"] if rank == 1 else [None, None]
    dist.broadcast_object_list(items, src=1)
    assert items == [1, "x"]
    gathered = [None] * world if rank == 2 else None
    dist.gather_object(("g", rank), gathered, dst=2)
    if rank == 2:
        assert gathered == [("g", r) for r in range(world)]
    dist.monitored_barrier()
    dist.barrier()


def case_errors(rank, world, port):
    init(rank, world, port=port, timeout=5)
    t = kiln.ones(2, 3)
    with pytest.raises(RuntimeError, match=rf"\[broadcast\] rank {rank}: invalid root rank 5"):
        dist.broadcast(t, src=5)
    with pytest.raises(RuntimeError, match=r"\[all_gather_into_tensor\] .*float32 \[3\]"):
        dist.all_gather_into_tensor(kiln.zeros(3), t)
    with pytest.raises(RuntimeError, match=r"BAND needs an integer or bool tensor"):
        dist.all_reduce(t, op=dist.ReduceOp.BAND)
    with pytest.raises(RuntimeError, match=r"\[all_gather\] rank \d: expected a list of 2 output"):
        dist.all_gather([kiln.zeros(2, 3)], t)
    with pytest.raises(RuntimeError, match=r"\[all_gather\] .*input float32 \[2, 3\].*int64"):
        dist.all_gather([kiln.zeros(2, 3, dtype=kiln.int64)] * 2, t)
    with pytest.raises(RuntimeError, match=r"\[send\] rank \d: invalid dst rank 2"):
        dist.send(t, dst=2)
    with pytest.raises(NotImplementedError, match=r"\[all_to_all_single\].*equal splits"):
        dist.all_to_all_single(kiln.zeros(4), kiln.ones(4), input_split_sizes=[1, 3])
    # mismatched shapes: every rank learns what every rank called
    mine = kiln.ones(2, 3) if rank == 0 else kiln.ones(3)
    with pytest.raises(RuntimeError, match=r"\[all_reduce\]") as info:
        dist.all_reduce(mine)
    assert "rank 0: all_reduce(SUM) with float32 [2, 3]" in str(info.value)
    assert "rank 1: all_reduce(SUM) with float32 [3]" in str(info.value)
    # different collectives on different ranks
    with pytest.raises(RuntimeError, match=r"rank 1: broadcast\(root=0\)"):
        if rank == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, src=0)
    # the group still works afterwards
    dist.all_reduce(t)
    check(t, np.full((2, 3), float(world)))
    # a rank that dies: the survivor fails fast with the rank and op named
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"\[all_reduce\] rank 0"):
        dist.all_reduce(t)
    assert time.monotonic() - start < 5.5
    with pytest.raises(RuntimeError, match=r"\[monitored_barrier\] rank 0: ranks \[1\] did not"):
        dist.monitored_barrier(timeout=0.5)


def case_nccl(rank, world, port):
    kiln.cuda.set_device(rank)
    init(rank, world, backend="nccl", port=port)
    dev = kiln.device("cuda", rank)
    for kd in (kiln.float32, kiln.bfloat16):
        x = [data(r, (4, 6), np.float32, 11) for r in range(world)]
        t = kiln.tensor(x[rank]).to(kd).to(dev)
        dist.all_reduce(t)
        check(t.cpu(), np.sum(np.stack(x), axis=0))
        t = kiln.tensor(x[rank]).to(kd).to(dev)
        dist.broadcast(t, src=1)
        check(t.cpu(), x[1])
        outs = [kiln.zeros(4, 6, dtype=kd, device=dev) for _ in range(world)]
        dist.all_gather(outs, kiln.tensor(x[rank]).to(kd).to(dev))
        for r in range(world):
            check(outs[r].cpu(), x[r])
        out = kiln.zeros(4 // world, 6, dtype=kd, device=dev)
        dist.reduce_scatter_tensor(out, kiln.tensor(x[rank]).to(kd).to(dev))
        n = 4 // world
        check(out.cpu(), np.sum(np.stack(x), axis=0)[rank * n:(rank + 1) * n])
    # non-contiguous, async, avg
    base = kiln.tensor(x[rank]).to(dev)
    work = dist.all_reduce(base.t(), op=dist.ReduceOp.AVG, async_op=True)
    work.wait()
    check(base.cpu(), np.mean(np.stack(x), axis=0), atol=1e-6)
    # a CPU tensor on the nccl backend names both
    with pytest.raises(RuntimeError, match=r"\[all_reduce\] rank \d: the nccl backend carries"):
        dist.all_reduce(kiln.ones(2))
    dist.barrier()
    try:
        import torch
        import torch.distributed as tdist
    except ImportError:
        torch = None
    if torch is not None:
        # the same all_reduce in PyTorch on the same data agrees
        torch_port = [free_port() if rank == 0 else None]
        dist.broadcast_object_list(torch_port, src=0)
        tdist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{torch_port[0]}",
                                 rank=rank, world_size=world,
                                 device_id=torch.device("cuda", rank))
        x = [data(r, (4, 6), np.float32, 12) for r in range(world)]
        ours = kiln.tensor(x[rank]).to(dev)
        theirs = torch.tensor(x[rank], device=f"cuda:{rank}")
        dist.all_reduce(ours)
        tdist.all_reduce(theirs)
        np.testing.assert_allclose(ours.cpu().numpy(), theirs.cpu().numpy())
        tdist.destroy_process_group()
    # the communicator is destroyed with the group, without hanging
    dist.destroy_process_group()


def case_nccl_dead_peer(rank, world, port):
    kiln.cuda.set_device(rank)
    init(rank, world, backend="nccl", port=port, timeout=3)
    t = kiln.ones(1024, device=kiln.device("cuda", rank))
    dist.all_reduce(t)
    kiln.cuda.synchronize()
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"\[all_reduce\] rank 0 of 2 \(cuda:0\)"):
        dist.all_reduce(t, async_op=True).synchronize()
    assert time.monotonic() - start < 10
    # the aborted group refuses further work at once
    with pytest.raises(RuntimeError, match=r"\[all_reduce\] rank 0: the NCCL communicator"):
        dist.all_reduce(t)
    os._exit(0)  # skip teardown of the aborted communicator


def check_composed(rank, world, device):
    """gather / scatter / reduce_scatter / all_to_all / scatter_object_list on `device`."""
    x = [data(r, (2, 3), np.float32, 11) for r in range(world)]
    t = kiln.tensor(x[rank]).to(device)
    # gather to the last rank
    dst = world - 1
    outs = [kiln.zeros(2, 3, device=device) for _ in range(world)] if rank == dst else None
    dist.gather(t, outs, dst=dst)
    if rank == dst:
        for r in range(world):
            check(outs[r], x[r])
    # scatter from rank 1 (async)
    parts = [kiln.tensor(x[r] * 10).to(device) for r in range(world)] if rank == 1 else None
    got = kiln.zeros(2, 3, device=device)
    dist.scatter(got, parts, src=1, async_op=True).wait()
    check(got, x[rank] * 10)
    # reduce_scatter over a list: rank r gets sum over ranks s of their list[r]
    lists = [[data(s, (2, 3), np.float32, 20 + r) for r in range(world)] for s in range(world)]
    out = kiln.zeros(2, 3, device=device)
    dist.reduce_scatter(out, [kiln.tensor(a).to(device) for a in lists[rank]])
    check(out, np.sum([lists[s][rank] for s in range(world)], axis=0), atol=1e-5)
    # all_to_all, equal shapes: rank r's input[s] lands in rank s's output[r]
    ins = [kiln.tensor(lists[rank][s]).to(device) for s in range(world)]
    outs = [kiln.zeros(2, 3, device=device) for _ in range(world)]
    dist.all_to_all(outs, ins)
    for s in range(world):
        check(outs[s], lists[s][rank])
    objs = [None]
    dist.scatter_object_list(objs, [{"rank": r} for r in range(world)] if rank == 0 else None)
    assert objs == [{"rank": rank}]


def case_composed(rank, world, port):
    init(rank, world, port=port)
    check_composed(rank, world, kiln.device("cpu"))
    # all_to_all with a different size per pair (Gloo: point-to-point)
    ins = [kiln.full((rank + 1, s + 1), float(10 * rank + s)) for s in range(world)]
    outs = [kiln.zeros(r + 1, rank + 1) for r in range(world)]
    dist.all_to_all(outs, ins)
    for r in range(world):
        check(outs[r], np.full((r + 1, rank + 1), 10.0 * r + rank))
    # bad lists name the rank
    if rank == 0:
        with pytest.raises(ValueError, match=r"\[gather\] rank 0: gather_list must hold one tensor"):
            dist.gather(kiln.zeros(2), [kiln.zeros(2)], dst=0)
    else:
        with pytest.raises(ValueError, match=r"\[gather\] rank \d: gather_list must not"):
            dist.gather(kiln.zeros(2), [kiln.zeros(2)], dst=0)
    assert dist.is_torchelastic_launched() is False
    assert dist.get_node_local_rank(fallback_rank=rank) == rank
    dist.destroy_process_group()


def case_nccl_composed(rank, world, port):
    kiln.cuda.set_device(rank)
    init(rank, world, backend="nccl", port=port)
    check_composed(rank, world, kiln.device("cuda", rank))
    with pytest.raises(NotImplementedError, match=r"\[all_to_all\] .*batched"):
        dist.all_to_all([kiln.zeros(1, device="cuda"), kiln.zeros(2, device="cuda")],
                        [kiln.zeros(3, device="cuda"), kiln.zeros(1, device="cuda")])
    dist.destroy_process_group()


def case_nccl_same_device(rank, world, port):
    # Neither rank calls set_device: both would use cuda:0.
    with pytest.raises(RuntimeError, match=r"\[init_process_group\] rank \d and rank\(s\) "
                                           r"\[\d\] all use cuda:0 .*set_device"):
        init(rank, world, backend="nccl", port=port)


# --- tests -------------------------------------------------------------------------------
def test_uninitialized_calls_raise():
    assert not dist.is_initialized()
    for call in (lambda: dist.all_reduce(kiln.ones(2)), lambda: dist.barrier(),
                 lambda: dist.get_rank(), lambda: dist.broadcast(kiln.ones(2), src=0)):
        with pytest.raises(RuntimeError, match=r"\] Default process group has not been initial"):
            call()
        with pytest.raises(ValueError, match=r"init_process_group"):  # PyTorch 2.x's type
            call()
    if not kiln.cuda.is_available():
        with pytest.raises(RuntimeError, match=r"\[init_process_group\] .*nccl"):
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    with pytest.raises(ValueError, match=r"\[Backend\] unknown backend 'mpi'"):
        dist.init_process_group("mpi", store=dist.HashStore(), rank=0, world_size=1)
    assert not dist.is_initialized()


def test_single_rank_with_store():
    if not dist.is_gloo_available():
        pytest.skip("kiln built without Gloo")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = kiln.arange(6.0).reshape(2, 3)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        check(t, np.arange(6.0).reshape(2, 3))
        assert dist.get_backend() == dist.Backend.GLOO
        sub = dist.new_group(backend="cpu:gloo")
        assert dist.get_backend(sub) == "cpu:gloo"
        x = kiln.ones(3, dtype=kiln.int32)
        dist.all_reduce(x, op=dist.ReduceOp.MAX, group=sub)
        check(x, [1, 1, 1])
        with pytest.raises(ValueError, match="twice"):
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    finally:
        dist.destroy_process_group()


@needs_gloo
@pytest.mark.parametrize("world", [2, 3])
def test_collectives_match_numpy(world):
    spawn("collectives", world)


@needs_gloo
@pytest.mark.parametrize("world", [2, 3])
def test_gather_scatter_and_list_collectives(world):
    spawn("composed", world)


@needs_gloo
def test_groups_send_recv_objects():
    spawn("groups_p2p_objects", 3)


@needs_gloo
def test_errors_name_ranks_and_fail_fast():
    results = spawn("errors", 2, expect_ok=False)
    assert results[0][0] == 0, results[0][1]
    assert results[1][0] == 0, results[1][1]


@needs_two_gpus
def test_nccl_collectives():
    spawn("nccl", 2, timeout=60)


@needs_two_gpus
def test_nccl_dead_peer_fails_fast():
    spawn("nccl_dead_peer", 2, timeout=60)


@needs_two_gpus
def test_nccl_gather_scatter_and_list_collectives():
    spawn("nccl_composed", 2, timeout=60)


@needs_two_gpus
def test_nccl_ranks_on_one_gpu_are_named():
    spawn("nccl_same_device", 2, timeout=60)


if __name__ == "__main__":
    case, rank, world, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    globals()["case_" + case](rank, world, port)
