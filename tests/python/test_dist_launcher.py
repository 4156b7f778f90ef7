"""python -m kiln.distributed.run: torchrun's environment, and fast failure (the first worker
that fails stops the others at once and is reported with its stderr tail).

Every launch runs under a timeout and is killed in a finally block; workers that should be
stopped by the launcher sleep far longer than the test's time bound, so a launcher that waits
for them fails the test instead of passing slowly."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import kiln
from kiln.distributed import run as launcher
from helpers import free_port

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))

ENV_SCRIPT = """
import json, os, sys
names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
         "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
         "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
         "OMP_NUM_THREADS", "NCCL_DEBUG", "NCCL_SOCKET_IFNAME"]
out = sys.argv[1]
env = {n: os.environ.get(n) for n in names}
env["argv"] = sys.argv[2:]
with open(os.path.join(out, f"rank{env['RANK']}.json"), "w") as f:
    json.dump(env, f)
sys.stdout.write(f"stdout of rank {env['RANK']}\\n")  # one write: lines of ranks can't mix
print(f"stderr of rank {env['RANK']}", file=sys.stderr)
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def env_for(extra=None, drop=("OMP_NUM_THREADS",)):
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = PYTHON_DIR
    env.update(extra or {})
    return env


def launch(args, timeout=30, env=None):
    """Runs the launcher; returns (exit code, stdout, stderr, seconds)."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "kiln.distributed.run", *map(str, args)],
                            env=env or env_for(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err, time.monotonic() - start


def alive(pid):
    """False for a finished process, zombies included (a container's init may not reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read_envs(out_dir, n):
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(n)]


def test_every_worker_gets_torchruns_environment(tmp_path):
    script = write(tmp_path, "env.py", ENV_SCRIPT)
    port = free_port()
    code, out, err, _ = launch(
        ["--nproc-per-node", 3, "--master-port", port, script, str(tmp_path), "--lr", "0.1"],
        env=env_for({"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "lo"}),
    )
    assert code == 0, err
    envs = read_envs(tmp_path, 3)
    for r, env in enumerate(envs):
        assert env == {
            "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "3",
            "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(r),
            "ROLE_WORLD_SIZE": "3", "ROLE_NAME": "default", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port), "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "none",
            "OMP_NUM_THREADS": "1", "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "lo",
            "argv": ["--lr", "0.1"],
        }
    # stdout passes through untouched; stderr is teed with a rank prefix.
    assert sorted(out.splitlines()) == [f"stdout of rank {r}" for r in range(3)], repr(out)
    for r in range(3):
        assert f"[rank{r}]:stderr of rank {r}" in err.splitlines()
    assert "OMP_NUM_THREADS=1" in err


def test_underscore_flags_multi_node_ranks_and_a_set_omp(tmp_path):
    script = write(tmp_path, "env.py", ENV_SCRIPT)
    code, out, err, _ = launch(
        ["--nproc_per_node=2", "--nnodes=2:2", "--node_rank=1", "--master_addr=10.1.2.3",
         "--master_port=1234", "--rdzv_id=job7", "--max_restarts=0", "--tee=3", script,
         str(tmp_path)],
        env=env_for({"OMP_NUM_THREADS": "4"}, drop=()),
    )
    assert code == 0, err
    envs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (2, 3)]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1"]
    assert {(e["WORLD_SIZE"], e["GROUP_RANK"], e["GROUP_WORLD_SIZE"], e["MASTER_ADDR"],
             e["MASTER_PORT"], e["TORCHELASTIC_RUN_ID"], e["OMP_NUM_THREADS"]) for e in envs} == {
        ("4", "1", "2", "10.1.2.3", "1234", "job7", "4")}
    assert "OMP_NUM_THREADS=1" not in err
    # --tee 3 pipes stdout through the launcher too, one whole line at a time.
    assert sorted(out.splitlines()) == ["[rank2]:stdout of rank 2", "[rank3]:stdout of rank 3"]


FAIL_SCRIPT = """
import os, sys, time
rank = int(os.environ["RANK"])
if rank == 1:
    for i in range(30):
        print(f"rank 1 log line {i}", file=sys.stderr)
    print("ValueError: the loss is nan", file=sys.stderr)
    sys.exit(3)
time.sleep(60)
"""


def test_a_failed_worker_stops_the_others_at_once(tmp_path):
    script = write(tmp_path, "fail.py", FAIL_SCRIPT)
    code, _, err, seconds = launch(["--nproc-per-node", 3, "--standalone", script])
    assert code == 3, err
    assert seconds < 10, f"the launcher took {seconds:.1f} s: it waited for the sleeping workers"
    report = err[err.index("[kiln.distributed.run] worker failed"):]
    assert "global rank 1 (local rank 1, pid " in report
    assert "exited with code 3" in report
    assert "stopped the other workers (ranks 0, 2)" in report
    assert "last 20 lines of rank 1's stderr:" in report
    assert "  ValueError: the loss is nan" in report
    assert "  rank 1 log line 11\n" in report and "rank 1 log line 10\n" not in report
    # The lines were also shown live, prefixed.
    assert "[rank1]:rank 1 log line 0" in err


RECORD_SCRIPT = """
import os, sys
from kiln.distributed.elastic.multiprocessing.errors import record

@record
def main():
    if os.environ["RANK"] == "1":
        raise ValueError("the batch had 0 rows")

main()
"""


@pytest.mark.parametrize("tee", ["2", "0"])
def test_record_names_the_root_cause(tmp_path, tee):
    script = write(tmp_path, "record.py", RECORD_SCRIPT)
    code, _, err, _ = launch(["--nproc-per-node", 2, "--standalone", "--tee", tee, script])
    assert code == 1, err
    report = err[err.index("[kiln.distributed.run] worker failed"):]
    assert "root cause (recorded by @record): ValueError: the batch had 0 rows" in report
    # The traceback comes from the kept stderr (--tee 2) or, without it (--tee 0), from the
    # recorded error file.
    assert "Traceback" in report and "in main" in report


def test_children_of_a_failed_worker_are_stopped_too(tmp_path):
    # The grandchild inherits the worker's stderr: left alive it would also keep the pipe open.
    script = write(tmp_path, "parent.py", """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(os.path.join(sys.argv[1], "child"), "w").write(str(child.pid))
sys.exit(2)
""")
    code, _, err, seconds = launch(["--standalone", script, str(tmp_path)])
    assert code == 2, err
    assert seconds < 10
    assert not alive(int((tmp_path / "child").read_text()))


def test_a_signal_killed_worker_is_named_with_its_signal(tmp_path):
    script = write(tmp_path, "kill.py", """
import os, signal, sys, time
if os.environ["LOCAL_RANK"] == "0":
    print("about to die", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
""")
    code, _, err, seconds = launch(["--nproc-per-node", 2, "--standalone", script])
    assert code == 1, err
    assert seconds < 10
    assert "global rank 0 (local rank 0" in err
    assert "was killed by SIGKILL (9)" in err
    assert "  about to die" in err


def test_workers_that_ignore_sigterm_get_sigkill_after_the_grace_period(tmp_path):
    script = write(tmp_path, "stubborn.py", """
import os, signal, sys, time
if os.environ["RANK"] == "1":
    time.sleep(0.2)
    sys.exit(5)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(60)
""")
    code, _, err, seconds = launch(
        ["--nproc-per-node", 2, "--standalone", "--kill-grace-period", 0.5, script])
    assert code == 5, err
    assert seconds < 10
    assert "ranks 0 needed SIGKILL" in err


RESTART_SCRIPT = """
import os, sys
out, rank = sys.argv[1], os.environ["RANK"]
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
open(os.path.join(out, f"attempt{attempt}-rank{rank}"), "w").close()
if rank == "1" and (attempt == "0" or sys.argv[2] == "always"):
    sys.exit(7)
"""


def test_max_restarts_restarts_the_group(tmp_path):
    script = write(tmp_path, "restart.py", RESTART_SCRIPT)
    code, _, err, _ = launch(["--nproc-per-node", 2, "--max-restarts", 1, "--standalone",
                              script, str(tmp_path), "once"])
    assert code == 0, err
    assert "restarting the workers (restart 1 of 1)" in err
    assert err.count("worker failed") == 1
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("attempt"))
    assert names == ["attempt0-rank0", "attempt0-rank1", "attempt1-rank0", "attempt1-rank1"]


def test_restarts_run_out(tmp_path):
    script = write(tmp_path, "restart.py", RESTART_SCRIPT)
    code, _, err, _ = launch(["--nproc-per-node", 2, "--max-restarts", 2, "--standalone",
                              script, str(tmp_path), "always"])
    assert code == 7
    assert err.count("worker failed: global rank 1") == 3


def test_standalone_workers_rendezvous_through_env(tmp_path):
    script = write(tmp_path, "rdzv.py", """
import os, sys
from datetime import timedelta
from kiln.distributed.rendezvous import rendezvous
store, rank, world_size = rendezvous("env://", timeout=timedelta(seconds=20))
store.add("joined", 1)
store.set(f"rank{rank}", os.environ["TORCHELASTIC_RUN_ID"])
store.wait([f"rank{r}" for r in range(world_size)])
ids = {store.get(f"rank{r}") for r in range(world_size)}
sys.stdout.write(f"{rank} {world_size} {len(ids)} {os.environ['MASTER_PORT']} "
                 f"{os.environ['TORCHELASTIC_RUN_ID']}\\n")
store.set(f"done{rank}", "1")
if rank == 0:
    store.wait([f"done{r}" for r in range(world_size)])
""")
    code, out, err, _ = launch(["--standalone", "--nproc-per-node", 3, script])
    assert code == 0, err
    rows = sorted(line.split() for line in out.splitlines())
    assert [r[:3] for r in rows] == [[str(r), "3", "1"] for r in range(3)]
    ports, run_ids = {r[3] for r in rows}, {r[4] for r in rows}
    assert len(ports) == 1 and len(run_ids) == 1
    assert run_ids != {"none"}


def test_sigint_to_the_launcher_stops_the_workers(tmp_path):
    script = write(tmp_path, "wait.py", """
import os, sys, time
open(os.path.join(sys.argv[1], f"pid{os.environ['RANK']}"), "w").write(str(os.getpid()))
time.sleep(60)
""")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kiln.distributed.run", "--nproc-per-node", "2", "--standalone",
         script, str(tmp_path)], env=env_for(), stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while len(list(tmp_path.glob("pid*"))) < 2 or any(
                not p.read_text() for p in tmp_path.glob("pid*")):
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.02)
        pids = [int(p.read_text()) for p in tmp_path.glob("pid*")]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
        assert proc.returncode == 128 + signal.SIGINT
        assert "received SIGINT: stopping the workers" in err
        assert not any(alive(pid) for pid in pids)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_module_and_no_python_modes(tmp_path):
    (tmp_path / "mypkg").mkdir()
    write(tmp_path / "mypkg", "__init__.py", "")
    write(tmp_path / "mypkg", "job.py", """
import os, sys
sys.stdout.write(f"module {os.environ['RANK']} {sys.argv[1:]}\\n")
""")
    code, out, err, _ = launch(["--nproc-per-node", 2, "--standalone", "-m", "mypkg.job", "x"],
                               env=env_for({"PYTHONPATH": f"{tmp_path}:{PYTHON_DIR}"}))
    assert code == 0, err
    assert sorted(out.splitlines()) == ["module 0 ['x']", "module 1 ['x']"]
    code, out, err, _ = launch(["--standalone", "--no-python", "sh", "-c", "echo rank=$RANK"])
    assert code == 0, err
    assert out.strip() == "rank=0"


@pytest.mark.parametrize("args, message", [
    (["--nproc-per-node", "0"], "--nproc-per-node must be at least 1, got 0"),
    (["--nproc-per-node", "lots"], "--nproc-per-node must be an integer, 'gpu', 'cpu' or 'auto'"),
    (["--nnodes", "1:4"], "elastic node ranges are not supported"),
    (["--nnodes", "2", "--node-rank", "2"], "--node-rank 2 is out of range for --nnodes 2"),
    (["--standalone", "--nnodes", "2"], "--standalone runs on one node"),
])
def test_bad_arguments(args, message, capsys):
    assert launcher.main([*args, "script.py"]) == 2
    assert message in capsys.readouterr().err


def test_nproc_per_node_gpu_and_cpu(tmp_path, capsys, monkeypatch):
    if kiln.cuda.device_count() == 0:
        assert launcher.main(["--nproc-per-node", "gpu", "script.py"]) == 2
        assert "--nproc-per-node gpu: no CUDA device is visible" in capsys.readouterr().err
    if (os.cpu_count() or 1) > 8:
        pytest.skip("one worker per CPU core would be slow here")
    monkeypatch.setenv("PYTHONPATH", PYTHON_DIR)
    script = write(tmp_path, "n.py", "import os, sys\n"
                   "open(os.path.join(sys.argv[1], os.environ['RANK']), 'w').write("
                   "os.environ['LOCAL_WORLD_SIZE'])\n")
    assert launcher.main(["--nproc-per-node", "cpu", "--standalone", script, str(tmp_path)]) == 0
    files = sorted(p.name for p in tmp_path.iterdir() if p.name.isdigit())
    assert files == [str(r) for r in range(os.cpu_count())]
    assert (tmp_path / "0").read_text() == str(os.cpu_count())


def test_main_runs_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", PYTHON_DIR)
    script = write(tmp_path, "ok.py", "import os\nassert os.environ['WORLD_SIZE'] == '2'\n")
    assert launcher.main(["--nproc-per-node", "2", "--standalone", script]) == 0
    failing = write(tmp_path, "bad.py", "raise SystemExit(4)\n")
    assert launcher.main(["--nproc-per-node", "1", "--standalone", failing]) == 4
