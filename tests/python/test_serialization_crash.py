"""kiln.save under crashes: a writer killed at any point, a full disk, and the
temporary files killed writers leave behind (Note [Checkpoint temporary files])."""

import errno
import io
import os
import random
import signal
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln import serialization

TEMP_MARK = ".kiln-tmp-"


def _state(seed):
    rng = np.random.default_rng(seed)
    return {f"layer{i}.weight": kiln.from_numpy(rng.standard_normal(256 * 1024).astype(np.float32))
            for i in range(4)}  # 4 MiB


def _equal(a, b):
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)


def _temps(path):
    """Every file next to `path` but `path` itself."""
    return sorted(n for n in os.listdir(path.parent) if n != path.name)


# A fork server: it imports kiln once, then per line on stdin (a delay in seconds, or -1) forks
# a child that saves the new state over the target, SIGKILLs the child after the delay, reaps
# it and prints its pid, wait status and lifetime. Forking costs milliseconds where starting
# Python and kiln costs ~0.3 s per kill. The server kills before it reaps, so the pid it
# kills is still the child's even when the child has already exited.
_SERVER = r"""
import os, signal, sys, time
sys.path[:0] = sys.argv[2:]
import test_serialization_crash as t
import kiln
new = t._state(1)
for line in sys.stdin:
    delay = float(line)
    begin = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        kiln.save(new, sys.argv[1])
        os._exit(0)
    if delay >= 0:
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    print(pid, status, time.perf_counter() - begin, flush=True)
"""


def test_a_killed_save_leaves_the_old_or_the_new_checkpoint_and_no_lasting_temp_file(tmp_path):
    path = tmp_path / "ck.safetensors"
    old, new = _state(0), _state(1)
    kiln.save(old, path)
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(path), os.path.dirname(__file__), *sys.path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        def save_in_child(kill_after):
            server.stdin.write(f"{kill_after}\n")
            server.stdin.flush()
            pid, status, seconds = server.stdout.readline().split()
            return int(pid), int(status), float(seconds)

        _, status, full = save_in_child(-1)  # an unkilled save, to time one
        assert os.waitstatus_to_exitcode(status) == 0
        assert _equal(kiln.load(path), new)

        rng = random.Random(18)
        outcomes = {"old": 0, "new": 0, "killed mid-write": 0}
        for _ in range(60):
            kiln.save(old, path)  # removes what the previous kill left behind
            assert _temps(path) == []
            pid, status, _ = save_in_child(rng.uniform(0, 1.2 * full))
            if os.WIFSIGNALED(status):
                left = _temps(path)
                assert all(TEMP_MARK in n and f"-{pid}-" in n for n in left)
                outcomes["killed mid-write"] += bool(left)
            # Loaded from bytes, so that only the next save cleans up.
            loaded = kiln.load(io.BytesIO(path.read_bytes()))
            assert _equal(loaded, old) or _equal(loaded, new)
            outcomes["old" if _equal(loaded, old) else "new"] += 1
        kiln.save(old, path)
        assert _temps(path) == []
        # The delays span the whole save, so some kills must have hit each phase.
        assert all(outcomes.values()), outcomes
    finally:
        server.stdin.close()
        server.wait(timeout=10)


class _DiskFillsUp(io.FileIO):
    """A file on a disk that has room for `room` more bytes; writing past it raises `error`."""

    def __init__(self, fd, room, error):
        super().__init__(fd, "w")
        self.room = room
        self.error = error

    def write(self, data):
        if self.room < len(data):
            self.room -= super().write(memoryview(data)[:self.room])
            raise self.error
        self.room -= len(data)
        return super().write(data)


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
                                   KeyboardInterrupt()], ids=["ENOSPC", "KeyboardInterrupt"])
def test_a_full_disk_or_ctrl_c_raises_and_keeps_the_old_checkpoint(error, tmp_path, monkeypatch):
    path = tmp_path / "ck.safetensors"
    kiln.save(_state(0), path)
    before = path.read_bytes()
    files = []

    def fdopen(fd, mode):
        files.append(_DiskFillsUp(fd, room=(1 << 20) + 123, error=error))
        return files[-1]

    monkeypatch.setattr(serialization.os, "fdopen", fdopen)
    with pytest.raises(type(error)) as info:
        kiln.save(_state(1), path)
    assert info.value is error
    assert len(files) == 1 and files[0].room == 0  # the disk filled up partway through
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ck.safetensors"]


def test_saving_to_a_file_object_writes_no_temp_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    buf = io.BytesIO()
    kiln.save(_state(0), buf)
    buf.seek(0)
    assert _equal(kiln.load(buf), _state(0))
    assert os.listdir(tmp_path) == []


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped, so os.kill(pid, 0) raises ProcessLookupError
    return child.pid


def test_the_next_save_removes_dead_writers_temp_files_and_keeps_live_ones(tmp_path):
    path = tmp_path / "ck.safetensors"
    host = os.uname().nodename
    prefix = f".ck.safetensors{TEMP_MARK}"
    dead = tmp_path / f"{prefix}{host}-{_dead_pid()}-0123456789ab"
    live = tmp_path / f"{prefix}{host}-{os.getpid()}-0123456789ab"
    elsewhere = tmp_path / f"{prefix}other-host-{_dead_pid()}-0123456789ab"
    other_target = tmp_path / f".other.safetensors{TEMP_MARK}{host}-{_dead_pid()}-0123456789ab"
    not_a_pid = tmp_path / f"{prefix}{host}-{2**70}-0123456789ab"
    for f in (dead, live, elsewhere, other_target, not_a_pid):
        f.write_bytes(b"partial checkpoint")

    kiln.save(_state(0), path)
    assert not dead.exists()
    assert all(f.exists() for f in (live, elsewhere, other_target, not_a_pid))

    dead.write_bytes(b"partial checkpoint")
    assert _equal(kiln.load(path), _state(0))  # loading cleans up too
    assert not dead.exists()
    assert all(f.exists() for f in (live, elsewhere, other_target, not_a_pid))
