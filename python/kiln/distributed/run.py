"""``python -m kiln.distributed.run``: torchrun's command line for kiln.

Note [Launcher design]
The launcher starts ``nproc_per_node`` worker processes with torchrun's environment (RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*, ...) and then watches them.
Unlike torchrun, whose agent notices a failed worker only at its next health check and then
leaves the report to an error file the worker may never have written, the first worker that
exits non-zero (or dies from a signal) ends the whole group at once:

  1. every other worker gets SIGTERM and, after ``--kill-grace-period`` seconds, SIGKILL (each
     worker runs in its own session, so its child processes, e.g. data-loader workers, go too);
  2. one report goes to stderr: the global and local rank, pid, exit code or signal name, the
     time since start and the last ``--tail-lines`` lines of that worker's stderr;
  3. the launcher exits with the worker's exit code (1 for a signal), or restarts the whole
     group while ``--max-restarts`` allows (TORCHELASTIC_RESTART_COUNT counts the attempts).

Each worker's stderr (and stdout with ``--tee 3``) is piped through the launcher: printed live
with a "[rankN]:" prefix and kept in a bounded buffer for the report. SIGINT/SIGTERM/SIGHUP to
the launcher are forwarded to the workers, which get the same grace period.

Rendezvous is plain: rank 0 hosts the TCPStore at MASTER_ADDR:MASTER_PORT
(kiln.distributed.rendezvous), so the launcher keeps no store of its own. Elastic membership
(``--nnodes MIN:MAX`` with MIN < MAX) is not supported, and restarts are per node: with several
nodes, a failure elsewhere reaches this node's workers as a collective or store error, which
then fails (or restarts) this node's group in turn.
"""

import argparse
import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from kiln.distributed.elastic.multiprocessing.errors import ERROR_FILE_ENV, read_error_file

__all__ = ["main", "parse_args", "run", "get_args_parser"]

_PREFIX = "[kiln.distributed.run]"


def _log(message):
    sys.stderr.write(f"{_PREFIX} {message}\n")
    sys.stderr.flush()


def get_args_parser():
    """torchrun's arguments (both --dash-case and --snake_case spellings) plus kiln's own."""
    p = argparse.ArgumentParser(
        prog="python -m kiln.distributed.run",
        description="Start one process per rank with torchrun's environment; the first worker "
        "that fails stops the others at once and is reported with its stderr tail.",
    )

    def opt(*names, **kw):
        spelled = list(names)
        for n in names:
            if n.startswith("--") and "-" in n[2:]:
                spelled.append("--" + n[2:].replace("-", "_"))
        p.add_argument(*spelled, **kw)

    opt("--nnodes", default="1", help="number of nodes, N or N:N (elastic ranges unsupported)")
    opt("--nproc-per-node", default="1",
        help="workers per node: an integer, 'gpu' (one per visible CUDA device), 'cpu' or 'auto'")
    opt("--node-rank", type=int, default=0, help="this node's rank among --nnodes")
    opt("--master-addr", default="127.0.0.1", help="host of rank 0 (the TCPStore master)")
    opt("--master-port", type=int, default=29500, help="port of rank 0's TCPStore")
    opt("--rdzv-endpoint", default="", help="host[:port]; overrides --master-addr/--master-port")
    opt("--rdzv-backend", default="static",
        help="accepted for compatibility; kiln always uses rank 0's store")
    opt("--rdzv-id", default="none", help="job id, exported as TORCHELASTIC_RUN_ID")
    opt("--rdzv-conf", default="", help="accepted for compatibility; ignored")
    opt("--standalone", action="store_true",
        help="single node: 127.0.0.1 and a free port picked by the launcher")
    opt("--max-restarts", type=int, default=0, help="restart the whole group up to N times")
    opt("--monitor-interval", type=float, default=0.1, help="seconds between worker checks")
    opt("--start-method", default="spawn", choices=["spawn", "fork", "forkserver"],
        help="accepted for compatibility: workers are always fresh processes")
    opt("--role", default="default", help="exported as ROLE_NAME")
    opt("--run-path", action="store_true",
        help="run the script through runpy.run_path (same result as running it as a script)")
    opt("-m", "--module", action="store_true", help="run the script argument as `python -m`")
    opt("--no-python", action="store_true", help="run the script argument as an executable")
    opt("--tee", "-t", default="2", choices=["0", "1", "2", "3"],
        help="streams piped through the launcher with a [rankN]: prefix: 0 none, 1 stdout, "
        "2 stderr (default; the failure report needs it), 3 both")
    opt("--kill-grace-period", type=float, default=5.0,
        help="seconds between SIGTERM and SIGKILL when stopping workers")
    opt("--tail-lines", type=int, default=20, help="stderr lines of a failed worker to report")
    p.add_argument("training_script", help="the script (or module with -m) every worker runs")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def parse_args(args=None):
    return get_args_parser().parse_args(args)


def _nproc(value):
    if value in ("gpu", "auto"):
        import kiln.cuda

        count = kiln.cuda.device_count()
        if count > 0:
            return count
        if value == "gpu":
            raise ValueError(f"{_PREFIX} --nproc-per-node gpu: no CUDA device is visible")
        return os.cpu_count() or 1
    if value == "cpu":
        return os.cpu_count() or 1
    try:
        n = int(value)
    except ValueError:
        raise ValueError(
            f"{_PREFIX} --nproc-per-node must be an integer, 'gpu', 'cpu' or 'auto', got "
            f"{value!r}"
        ) from None
    if n < 1:
        raise ValueError(f"{_PREFIX} --nproc-per-node must be at least 1, got {n}")
    return n


def _nnodes(value):
    low, _, high = str(value).partition(":")
    try:
        low, high = int(low), int(high or low)
    except ValueError:
        raise ValueError(f"{_PREFIX} --nnodes must be N or N:N, got {value!r}") from None
    if low != high:
        raise ValueError(
            f"{_PREFIX} --nnodes {value}: elastic node ranges are not supported; pass a fixed "
            f"node count"
        )
    if low < 1:
        raise ValueError(f"{_PREFIX} --nnodes must be at least 1, got {value!r}")
    return low


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class _Worker:
    def __init__(self, local_rank, rank, proc, tail_lines):
        self.local_rank = local_rank
        self.rank = rank
        self.proc = proc
        self.end = None  # when the launcher's waiter saw the process exit (time.monotonic())
        self.tail = collections.deque(maxlen=max(tail_lines, 1))
        self.readers = []
        self.error_file = None  # where @record writes the worker's exception
        self.reported = False  # returned by _Group.poll already
        self.raised_at = None  # when its stderr began a Python traceback (time.monotonic())


class _Group:
    """One attempt: the workers of this node, started together and stopped together."""

    def __init__(self, config, restart_count):
        self.config = config
        self.workers = []
        self._out_lock = threading.Lock()
        self.error_dir = tempfile.mkdtemp(prefix="kiln-run-errors-")
        try:
            self._start(restart_count)
        except BaseException:
            self.stop(signal.SIGKILL)
            shutil.rmtree(self.error_dir, ignore_errors=True)
            raise

    def _start(self, restart_count):
        config = self.config
        for local_rank in range(config.nproc):
            rank = config.node_rank * config.nproc + local_rank
            env = dict(os.environ)
            env.update(config.worker_env(local_rank, rank, restart_count))
            error_file = os.path.join(self.error_dir, f"rank{rank}.json")
            env[ERROR_FILE_ENV] = error_file
            tee = int(config.tee)
            proc = subprocess.Popen(
                config.command,
                env=env,
                stdout=subprocess.PIPE if tee in (1, 3) else None,
                stderr=subprocess.PIPE if tee in (2, 3) else None,
                start_new_session=True,
            )
            w = _Worker(local_rank, rank, proc, config.tail_lines)
            w.error_file = error_file
            # Note [Blaming the first failure]: when one rank fails, its peers fail moments
            # later (a closed connection, a store gone), and a monitor loop that polls every
            # --monitor-interval sees them together: ordered by rank, the report would blame
            # rank 0 for rank 2's exception. Nor is the exit order the failure order: the
            # rank that raised first may still be tearing down (its sockets already closed)
            # when a peer has raised and exited. What orders them causally is when each
            # began its traceback on stderr (the peer's error needs the first rank's closed
            # connection, which comes after that rank printed its traceback), so the pump
            # stamps the first traceback line; a worker without one (a signal, an exit code)
            # counts from its exit, stamped by a waiter thread the moment it happens.
            threading.Thread(target=self._wait_for_exit, args=(w,), daemon=True).start()
            streams = ((proc.stdout, "stdout", False), (proc.stderr, "stderr", True))
            for stream, sink, keep in streams:
                if stream is not None:
                    t = threading.Thread(
                        target=self._pump, args=(w, stream, sink, keep), daemon=True
                    )
                    t.start()
                    w.readers.append(t)
            self.workers.append(w)

    def _pump(self, worker, stream, sink, keep):
        prefix = f"[rank{worker.rank}]:".encode()
        out = getattr(sys, sink)
        out = getattr(out, "buffer", None) or out
        for line in iter(stream.readline, b""):
            if keep:
                if worker.raised_at is None and line.startswith(b"Traceback (most recent call"):
                    worker.raised_at = time.monotonic()
                worker.tail.append(line.decode(errors="replace").rstrip("\n"))
            if not line.endswith(b"\n"):
                line += b"\n"
            with self._out_lock:
                try:
                    out.write(prefix + line)
                    out.flush()
                except (OSError, ValueError):
                    pass
        stream.close()

    @staticmethod
    def _wait_for_exit(worker):
        worker.proc.wait()
        worker.end = time.monotonic()

    def poll(self):
        """Returns the workers that exited since the last call, the first to exit first."""
        done = [w for w in self.workers if w.end is not None and not w.reported]
        for w in done:
            w.reported = True
        return sorted(done, key=lambda w: w.end)

    def running(self):
        return [w for w in self.workers if w.end is None]

    def signal_all(self, signum):
        # Exited workers too: their children (data-loader workers, say) share the session and
        # may still hold the stderr pipe open.
        for w in self.workers:
            try:
                os.killpg(w.proc.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self, signum=signal.SIGTERM):
        """Sends `signum` to every worker, then SIGKILL after the grace period; returns the
        workers that needed SIGKILL."""
        self.signal_all(signum)
        deadline = time.monotonic() + self.config.kill_grace_period
        while self.running() and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.01)
        killed = self.running()
        self.signal_all(signal.SIGKILL)
        for w in killed:
            try:
                # Bounded: a process stuck in a driver call can outlive SIGKILL for a while.
                w.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _log(f"rank {w.rank} (pid {w.proc.pid}) did not exit 30 s after SIGKILL")
        self.poll()
        return killed

    def drain(self, timeout=2.0):
        """Waits (bounded: a grandchild may hold a pipe open) until the output readers end."""
        deadline = time.monotonic() + timeout
        for w in self.workers:
            for t in w.readers:
                t.join(max(0.0, deadline - time.monotonic()))


class _Config:
    def __init__(self, ns):
        self.nproc = _nproc(ns.nproc_per_node)
        self.nnodes = _nnodes(ns.nnodes)
        self.node_rank = ns.node_rank
        if not 0 <= self.node_rank < self.nnodes:
            raise ValueError(f"{_PREFIX} --node-rank {self.node_rank} is out of range for "
                             f"--nnodes {self.nnodes}")
        self.master_addr, self.master_port = ns.master_addr, ns.master_port
        if ns.rdzv_endpoint:
            host, _, port = ns.rdzv_endpoint.rpartition(":")
            if host and port.isdigit():
                self.master_addr, self.master_port = host.strip("[]"), int(port)
            else:
                self.master_addr = ns.rdzv_endpoint
        self.standalone = ns.standalone
        self.run_id = ns.rdzv_id
        if self.standalone:
            if self.nnodes != 1:
                raise ValueError(
                    f"{_PREFIX} --standalone runs on one node; got --nnodes {ns.nnodes}"
                )
            self.master_addr = "127.0.0.1"
            self.run_id = uuid.uuid4().hex
        if ns.max_restarts < 0:
            raise ValueError(f"{_PREFIX} --max-restarts must be >= 0, got {ns.max_restarts}")
        self.max_restarts = ns.max_restarts
        self.monitor_interval = max(ns.monitor_interval, 0.001)
        self.kill_grace_period = max(ns.kill_grace_period, 0.0)
        self.tail_lines = ns.tail_lines
        self.tee = ns.tee
        self.role = ns.role
        self.world_size = self.nnodes * self.nproc
        self.set_omp = "OMP_NUM_THREADS" not in os.environ and self.nproc > 1
        self.command = self._command(ns)

    @staticmethod
    def _command(ns):
        script, args = ns.training_script, list(ns.training_script_args)
        if args and args[0] == "--":
            args = args[1:]
        if ns.no_python:
            if ns.module:
                raise ValueError(f"{_PREFIX} --no-python and -m cannot be combined")
            return [script] + args
        if ns.module:
            return [sys.executable, "-m", script] + args
        if ns.run_path:
            code = ("import runpy, sys; sys.argv = sys.argv[1:]; "
                    "runpy.run_path(sys.argv[0], run_name='__main__')")
            return [sys.executable, "-c", code, script] + args
        return [sys.executable, script] + args

    def worker_env(self, local_rank, rank, restart_count):
        env = {
            "RANK": rank,
            "LOCAL_RANK": local_rank,
            "WORLD_SIZE": self.world_size,
            "LOCAL_WORLD_SIZE": self.nproc,
            "GROUP_RANK": self.node_rank,
            "GROUP_WORLD_SIZE": self.nnodes,
            "ROLE_NAME": self.role,
            "ROLE_RANK": rank,
            "ROLE_WORLD_SIZE": self.world_size,
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": self.master_port,
            "TORCHELASTIC_RESTART_COUNT": restart_count,
            "TORCHELASTIC_MAX_RESTARTS": self.max_restarts,
            "TORCHELASTIC_RUN_ID": self.run_id,
            "TORCHELASTIC_USE_AGENT_STORE": "False",
        }
        if self.set_omp:
            env["OMP_NUM_THREADS"] = 1
        return {k: str(v) for k, v in env.items()}


def _describe_exit(w):
    code = w.proc.returncode
    if code < 0:
        return f"was killed by {_signal_name(-code)} ({-code})"
    return f"exited with code {code}"


def _first_failure(failed, stopped):
    """The worker that failed first (Note [Blaming the first failure]) and the others that
    failed: those seen failing, and stopped ones that had already raised."""
    candidates = failed + [w for w in stopped if w.raised_at is not None]

    def when(w):
        return w.raised_at if w.raised_at is not None else w.end

    # A death by a signal the launcher did not send is never a consequence of a peer's
    # failure, but its exit is stamped only when the waiter thread wakes, which may be after
    # the peers it disconnected have printed their tracebacks: within a second of the first
    # failure, such a death comes first.
    t0 = min(when(w) for w in candidates)
    candidates.sort(key=lambda w: (not (w in failed and w.proc.returncode < 0
                                        and when(w) <= t0 + 1.0), when(w)))
    return candidates[0], [w for w in candidates[1:] if w in failed]


def _report(failed, also_failed, stopped, killed, attempt_start):
    lines = [
        f"{_PREFIX} worker failed: global rank {failed.rank} (local rank {failed.local_rank}, "
        f"pid {failed.proc.pid}) {_describe_exit(failed)} "
        f"{failed.end - attempt_start:.2f} s after start"
    ]
    for w in also_failed:
        lines.append(f"{_PREFIX} then global rank {w.rank} {_describe_exit(w)}")
    if stopped:
        ranks = ", ".join(str(w.rank) for w in stopped)
        lines.append(f"{_PREFIX} stopped the other workers (ranks {ranks})"
                     + (f"; ranks {', '.join(str(w.rank) for w in killed)} needed SIGKILL"
                        if killed else ""))
    recorded = read_error_file(failed.error_file) if failed.error_file else None
    if recorded is not None:
        message, callstack = recorded
        lines.append(f"{_PREFIX} root cause (recorded by @record): {message}")
        if not failed.tail:
            lines.extend(f"  {line}" for line in callstack.rstrip().splitlines())
    if failed.tail:
        lines.append(f"{_PREFIX} last {len(failed.tail)} lines of rank {failed.rank}'s stderr:")
        lines.extend(f"  {line}" for line in failed.tail)
    elif failed.proc.stderr is not None:
        lines.append(f"{_PREFIX} rank {failed.rank} wrote nothing to stderr")
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


class _SignalForwarder:
    """Turns SIGINT/SIGTERM/SIGHUP to the launcher into a request to stop the workers."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.received = None
        self._old = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.received is None:
            self.received = signum

    def __exit__(self, *exc):
        for s, old in self._old.items():
            signal.signal(s, old)


def run(ns):
    """Runs the workers described by parsed arguments `ns`; returns the exit code."""
    config = _Config(ns)
    if config.set_omp:
        _log("OMP_NUM_THREADS is not set: each worker gets OMP_NUM_THREADS=1 so "
             f"{config.nproc} workers do not oversubscribe the CPU cores; set it to tune.")
    with _SignalForwarder() as forwarder:
        for attempt in range(config.max_restarts + 1):
            if config.standalone:
                config.master_port = _free_port()
            code, failed = _run_attempt(config, attempt, forwarder)
            if not failed or attempt == config.max_restarts:
                return code
            _log(f"restarting the workers (restart {attempt + 1} of {config.max_restarts})")
    return 1


def _run_attempt(config, attempt, forwarder):
    """Returns (exit code, whether a worker failed)."""
    start = time.monotonic()
    group = _Group(config, attempt)
    try:
        while True:
            if forwarder.received is not None:
                signum = forwarder.received
                _log(f"received {_signal_name(signum)}: stopping the workers")
                group.stop(signum)
                group.drain()
                return 128 + signum, False
            failures = [w for w in group.poll() if w.proc.returncode != 0]
            if failures:
                stopped = group.running()
                killed = group.stop(signal.SIGTERM)
                group.drain()
                first, others = _first_failure(failures, stopped)
                _report(first, others, [w for w in stopped if w is not first], killed, start)
                code = first.proc.returncode
                return (code if code > 0 else 1), True
            if not group.running():
                group.drain()
                return 0, False
            time.sleep(config.monitor_interval)
    finally:
        if group.running():
            group.stop(signal.SIGKILL)
        shutil.rmtree(group.error_dir, ignore_errors=True)


def main(args=None):
    """Entry point of ``python -m kiln.distributed.run``; returns the exit code."""
    ns = parse_args(args)
    try:
        return run(ns)
    except ValueError as e:
        _log(str(e).replace(_PREFIX + " ", ""))
        return 2
    except OSError as e:
        _log(f"cannot start the workers: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
