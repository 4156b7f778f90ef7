"""kiln.multiprocessing.spawn: children run fn(i, *args); the first failure stops the others
and is raised with its index, pid and traceback (Note [Failing fast in spawn])."""

import os
import signal
import time

import pytest

import kiln
import kiln.multiprocessing as mp
from helpers import free_port


def _write_index(i, folder, tag):
    with open(os.path.join(folder, f"{i}.txt"), "w") as f:
        f.write(f"{tag}:{i}")


def _one_raises(i, folder):
    if i == 1:
        time.sleep(0.2)
        raise ValueError(f"bad batch on rank {i}")
    with open(os.path.join(folder, f"pid{i}"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)


def _exits(i, code):
    if i == 0:
        os._exit(code)
    time.sleep(60)


def _killed(i):
    if i == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)


def _sleeps(i, seconds):
    time.sleep(seconds)


def _all_reduce(i, world, port, folder):
    import datetime

    import kiln.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=i,
                            world_size=world, timeout=datetime.timedelta(seconds=20))
    t = kiln.tensor([float(i + 1)])
    dist.all_reduce(t)
    with open(os.path.join(folder, f"{i}.txt"), "w") as f:
        f.write(str(t.item()))
    dist.destroy_process_group()


def test_every_child_runs_with_its_index(tmp_path):
    assert mp.spawn(_write_index, args=(str(tmp_path), "ok"), nprocs=3) is None
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["ok:0", "ok:1", "ok:2"]


def test_a_raising_child_stops_the_others_and_brings_its_traceback(tmp_path):
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(_one_raises, args=(str(tmp_path),), nprocs=3)
    assert time.monotonic() - start < 20  # not the sleepers' 60 s
    err = info.value
    assert err.error_index == 1 and err.pid > 0
    assert "Process 1" in str(err) and "ValueError: bad batch on rank 1" in str(err)
    assert "_one_raises" in str(err)  # the child's traceback
    for name in ("pid0", "pid2"):  # the sleepers were stopped
        pid = int((tmp_path / name).read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_child_that_exits_is_named_with_its_code():
    with pytest.raises(mp.ProcessExitedException, match=r"process 0 .*exit code 3") as info:
        mp.spawn(_exits, args=(3,), nprocs=2)
    assert info.value.exit_code == 3 and info.value.error_index == 0


def test_a_killed_child_is_named_with_its_signal():
    with pytest.raises(mp.ProcessExitedException, match="SIGKILL") as info:
        mp.spawn(_killed, nprocs=2)
    assert info.value.signal_name == "SIGKILL" and info.value.error_index == 1


def test_join_false_returns_a_context_to_poll():
    context = mp.spawn(_sleeps, args=(0.5,), nprocs=2, join=False)
    assert len(context.pids()) == 2
    assert context.join(timeout=0.01) is False
    deadline = time.monotonic() + 20
    while not context.join(timeout=1):
        assert time.monotonic() < deadline


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"\[spawn\] nprocs"):
        mp.spawn(_sleeps, args=(0,), nprocs=0)
    with pytest.raises(ValueError, match=r"\[spawn\] .*start_method"):
        mp.spawn(_sleeps, args=(0,), nprocs=1, start_method="fork")


def test_python_multiprocessing_names_are_reexported():
    assert mp.get_context("spawn").Process is not None and callable(mp.set_start_method)


@pytest.mark.skipif(not kiln.distributed.is_gloo_available(), reason="needs Gloo")
def test_spawned_ranks_join_a_process_group(tmp_path):
    mp.spawn(_all_reduce, args=(2, free_port(), str(tmp_path)), nprocs=2)
    assert [float((tmp_path / f"{i}.txt").read_text()) for i in range(2)] == [3.0, 3.0]
