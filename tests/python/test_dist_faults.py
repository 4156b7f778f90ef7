"""Fault injection for distributed jobs on Gloo (issue 18): a rank that raises, one killed with
SIGKILL mid-step, one that stalls outside a collective, and a store master that dies. Every
job ends well inside its timeout, the launcher names the rank that failed first (by the time
of its failure, not by rank order), a timeout names the rank that did not arrive, and no
worker outlives the launcher."""

import os
import signal
import subprocess
import sys
import time

import pytest

import kiln.distributed as dist
from helpers import free_port
from test_dist_launcher import PYTHON_DIR, alive, launch, write

pytestmark = pytest.mark.skipif(not dist.is_gloo_available(), reason="kiln was built without Gloo")

# Each rank all-reduces in a loop; the rank BAD misbehaves (MODE) at step 5. Every worker
# writes its pid first, so the test can check that none survives the launcher.
STEP_SCRIPT = """
import os, signal, sys, time
from datetime import timedelta
import kiln, kiln.distributed as dist

out, mode, bad, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
rank = dist.get_rank()
open(os.path.join(out, f"pid{rank}"), "w").write(str(os.getpid()))
x = kiln.ones(1000)
for step in range(100000):
    if rank == bad and step == 5:
        if mode == "raise":
            raise RuntimeError(f"rank {rank} found a bad batch")
        if mode == "kill":
            print(f"rank {rank} about to be killed", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "stall":
            time.sleep(600)
        if mode == "store":
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
    if mode == "store" and step == 5:
        dist.monitored_barrier(timeout=timedelta(seconds=timeout))  # waits on the store
    dist.all_reduce(x)
    x.fill_(1.0)
"""


def run_job(tmp_path, mode, bad, nproc=3, timeout=30.0, bound=40):
    script = write(tmp_path, "step.py", STEP_SCRIPT)
    code, _, err, seconds = launch(["--nproc-per-node", nproc, "--standalone", script,
                                    str(tmp_path), mode, bad, timeout], timeout=bound)
    pids = [int((tmp_path / f"pid{r}").read_text()) for r in range(nproc)
            if (tmp_path / f"pid{r}").exists()]
    assert len(pids) == nproc, err
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids), f"orphan workers: {pids}\n{err}"
    report = err[err.index("[kiln.distributed.run] worker failed"):]
    return code, report, seconds


@pytest.mark.parametrize("bad", [1, 2])
def test_the_rank_that_raised_first_is_blamed_not_rank_zero(tmp_path, bad):
    # Its peers fail too, a moment later (the connection closed); rank order would blame 0.
    code, report, seconds = run_job(tmp_path, "raise", bad)
    assert code == 1
    assert seconds < 20, f"took {seconds:.1f} s"
    first = report.splitlines()[0]
    assert f"global rank {bad} (local rank {bad}" in first, report
    assert f"RuntimeError: rank {bad} found a bad batch" in report


def test_a_rank_killed_mid_step_is_named_with_its_signal(tmp_path):
    code, report, seconds = run_job(tmp_path, "kill", 1)
    assert code == 1
    assert seconds < 20, f"took {seconds:.1f} s"
    assert "global rank 1 (local rank 1" in report.splitlines()[0]
    assert "was killed by SIGKILL (9)" in report.splitlines()[0]
    assert "rank 1 about to be killed" in report


def test_a_stalled_rank_is_named_by_the_peers_timeout(tmp_path):
    # Rank 2 never reaches its all_reduce: the others time out after 3 s and their error
    # names rank 2 (Note [Naming the ranks that did not arrive]).
    code, report, seconds = run_job(tmp_path, "stall", 2, timeout=3.0)
    assert code == 1
    assert seconds < 3.0 + 15, f"took {seconds:.1f} s"
    first = report.splitlines()[0]
    assert "global rank 0 " in first or "global rank 1 " in first, report
    assert "timed out: rank(s) [2] did not arrive" in report


def test_a_dead_store_master_fails_the_others_fast(tmp_path):
    # Rank 0 hosts the store and dies while the others wait on it in monitored_barrier (a
    # 30 s timeout): they must see the closed connection at once, not wait the timeout out.
    code, report, seconds = run_job(tmp_path, "store", 0, timeout=30.0)
    assert code == 1
    assert seconds < 20, f"took {seconds:.1f} s"
    assert "global rank 0 (local rank 0" in report.splitlines()[0]
    assert "was killed by SIGKILL" in report.splitlines()[0]


def test_without_a_launcher_peers_of_a_dead_master_fail_within_the_timeout(tmp_path):
    # No launcher stops the others here: their own store errors must end them.
    port = free_port()
    script = write(tmp_path, "step.py", STEP_SCRIPT)
    procs = []
    start = time.monotonic()
    for rank in range(3):
        env = {k: v for k, v in os.environ.items()}
        env.update(PYTHONPATH=PYTHON_DIR, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   WORLD_SIZE="3", RANK=str(rank), LOCAL_RANK=str(rank), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, script, str(tmp_path), "store", "0",
                                       "30"], env=env, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    try:
        errs = [p.communicate(timeout=40)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    seconds = time.monotonic() - start
    assert seconds < 30, f"took {seconds:.1f} s: a peer waited the store timeout out"
    assert procs[0].returncode == -signal.SIGKILL
    for rank in (1, 2):
        assert procs[rank].returncode == 1, errs[rank]
        assert "[TCPStore]" in errs[rank] and "master" in errs[rank], errs[rank]


def test_default_timeouts_are_pytorchs():
    from kiln.distributed import distributed_c10d as c10d

    assert dist.default_pg_timeout.total_seconds() == 30 * 60
    assert c10d.default_pg_nccl_timeout.total_seconds() == 10 * 60
