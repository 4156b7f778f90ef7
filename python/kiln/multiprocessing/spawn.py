"""spawn / start_processes: run fn(i, *args) in nprocs processes and fail fast.

Note [Failing fast in spawn]
Each child runs fn(i, *args); an exception in it is formatted (with its traceback) and sent to
the parent over a per-child pipe before the child exits with status 1. The parent's join()
waits on every child's sentinel at once, so the first child to fail is seen as soon as it
exits, not after the others finish: the parent then terminates the rest (SIGTERM, then
SIGKILL after a grace period) and raises ProcessRaisedException carrying the failed child's
index, pid and traceback, or ProcessExitedException with its exit code or signal name when it
died without raising (os._exit, a signal, a crash). A rank that fails never leaves the others
blocked forever in a collective.
"""

import multiprocessing
import multiprocessing.connection
import signal
import sys
import time
import traceback

_GRACE_SECONDS = 5.0


class ProcessException(Exception):
    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A child raised: the message carries its traceback."""


class ProcessExitedException(ProcessException):
    """A child exited with a non-zero status (or a signal) without raising."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code,
                            self.signal_name)


def _wrap(fn, i, args, error_conn):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent stops the children; nothing to report
    except Exception:
        error_conn.send(traceback.format_exc())
        error_conn.close()
        sys.exit(1)


class ProcessContext:
    def __init__(self, processes, error_conns):
        self.processes = processes
        self.error_conns = error_conns
        self._sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        """Waits (up to timeout seconds) for the children. Returns True when all of them have
        finished successfully, False on timeout; raises for the first one that failed, after
        stopping the others."""
        if not self._sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self._sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            i = self._sentinels.pop(sentinel)
            self.processes[i].join()
            if self.processes[i].exitcode != 0 and failed is None:
                failed = i
        if failed is None:
            return not self._sentinels
        self._stop_the_rest()
        raise self._exception(failed)

    def _stop_the_rest(self):
        alive = [p for p in self.processes if p.is_alive()]
        for p in alive:
            p.terminate()
        deadline = time.monotonic() + _GRACE_SECONDS
        for p in alive:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
        self._sentinels.clear()

    def _exception(self, i):
        p, conn = self.processes[i], self.error_conns[i]
        tb = None
        if conn.poll():  # also true at end of file: a child that exited without raising
            try:
                tb = conn.recv()
            except EOFError:
                pass
        if tb is not None:
            return ProcessRaisedException(
                f"\n\n-- Process {i} (pid {p.pid}) terminated with the following error:\n{tb}",
                i, p.pid)
        code = p.exitcode
        if code < 0:
            name = signal.Signals(-code).name
            return ProcessExitedException(f"process {i} (pid {p.pid}) terminated with signal "
                                          f"{name}", i, p.pid, code, name)
        return ProcessExitedException(f"process {i} (pid {p.pid}) terminated with exit code "
                                      f"{code}", i, p.pid, code)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Starts nprocs processes running fn(i, *args); with join, waits for them (failing fast)
    and returns None, else returns the ProcessContext."""
    if nprocs < 1:
        raise ValueError(f"[spawn] nprocs must be at least 1, got {nprocs}")
    ctx = multiprocessing.get_context(start_method)
    processes, error_conns = [], []
    for i in range(nprocs):
        receiver, sender = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_wrap, args=(fn, i, args, sender), daemon=daemon)
        p.start()
        sender.close()
        processes.append(p)
        error_conns.append(receiver)
    context = ProcessContext(processes, error_conns)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """PyTorch's torch.multiprocessing.spawn: start_processes with the "spawn" method."""
    if start_method != "spawn":
        raise ValueError(f"[spawn] spawn() only supports start_method='spawn' (got "
                         f"{start_method!r}); use start_processes for other methods")
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
