"""kiln.distributed stores (HashStore, PrefixStore, TCPStore) and rendezvous (env://, tcp://).

Processes meet on 127.0.0.1 with ports picked by the OS; every wait has a short timeout and
every subprocess is killed in a finally block, so a broken store fails the test instead of
hanging it."""

import os
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

import kiln
import kiln.distributed as dist
from kiln.distributed.rendezvous import rendezvous
from helpers import free_port

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))
SHORT = timedelta(seconds=10)


def master(world_size=None, timeout=SHORT, wait_for_workers=False):
    return dist.TCPStore("127.0.0.1", 0, world_size, True, timeout,
                         wait_for_workers=wait_for_workers)


def run_threads(fns, timeout=15):
    """Runs each fn on a thread; re-raises the first exception; fails if one does not end."""
    errors = []

    def wrap(fn):
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(f,), daemon=True) for f in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a store thread did not finish"
    if errors:
        raise errors[0]


def spawn(code, *args):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs, timeout=20):
    """Waits for every process (killing all of them on timeout); returns their outputs."""
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            outs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


def make_store(kind, keep):
    """A store of `kind`; `keep` holds the TCP master so it outlives the test body."""
    if kind in ("tcp", "prefix-tcp"):
        keep.append(master())
        client = dist.TCPStore("127.0.0.1", keep[0].port, timeout=SHORT)
        return client if kind == "tcp" else dist.PrefixStore("pre", client)
    return dist.HashStore() if kind == "hash" else dist.PrefixStore("pre", dist.HashStore())


@pytest.mark.parametrize("kind", ["hash", "tcp", "prefix-hash", "prefix-tcp"])
def test_store_basics(kind):
    keep = []
    store = make_store(kind, keep)
    store.set("s", "text")
    store.set("b", b"\x00\xffbin")
    assert store.get("s") == b"text"
    assert store.get("b") == b"\x00\xffbin"
    assert isinstance(store.get("s"), bytes)
    assert store.add("n", 5) == 5
    assert store.add("n", -7) == -2
    assert store.get("n") == b"-2"
    assert store.check(["s", "n"]) and not store.check(["s", "missing"])
    assert store.delete_key("s") is True
    assert store.delete_key("s") is False
    assert not store.check(["s"])
    assert store.compare_set("c", "", "first") == b"first"
    assert store.compare_set("c", "wrong", "x") == b"first"
    assert store.compare_set("c", b"first", b"second") == b"second"
    assert store.get("c") == b"second"
    # PyTorch: a missing key with a non-empty expected value returns it and stores nothing.
    assert store.compare_set("absent", "e", "d") == b"e"
    assert not store.check(["absent"])
    with pytest.raises(RuntimeError, match=r"b'.*not an integer: '\\x00\\xffbin'"):
        store.add("b", 1)
    with pytest.raises(TypeError, match=r"\[store\] set: expected str or bytes, got int"):
        store.set("k", 3)


def test_num_keys_and_timeout_property():
    store = dist.HashStore()
    assert store.num_keys() == 0
    store.set("a", "1")
    store.add("b", 1)
    assert store.num_keys() == 2
    m = master(timeout=timedelta(seconds=7))
    assert m.timeout == timedelta(seconds=7)
    m.set_timeout(timedelta(milliseconds=250))
    assert m.timeout == timedelta(milliseconds=250)
    assert m.host == "127.0.0.1" and 0 < m.port < 65536
    p = dist.PrefixStore("x", store)
    assert p.underlying_store is store
    assert isinstance(m, dist.Store) and isinstance(p, dist.Store)


@pytest.mark.parametrize("kind", ["hash", "tcp"])
def test_wait_and_get_timeouts_name_the_keys(kind):
    store = dist.HashStore() if kind == "hash" else master()
    store.set("present", "1")
    prefix = r"\[store\]" if kind == "hash" else r"\[TCPStore\]"
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=prefix + r".*100 ms.*'present', 'absent'.*"
                       r"missing: \['absent'\]") as info:
        store.wait(["present", "absent"], timedelta(milliseconds=100))
    assert isinstance(info.value, dist.DistStoreError)
    store.set_timeout(timedelta(milliseconds=80))
    with pytest.raises(dist.DistStoreError, match=r"80 ms.*'nothing'"):
        store.get("nothing")
    assert time.monotonic() - start < 5
    if kind == "tcp":
        with pytest.raises(RuntimeError, match=f"127.0.0.1:{store.port}"):
            store.wait(["absent"], timedelta(milliseconds=10))
    store.wait(["present"])  # still usable after the timeouts


def test_get_blocks_until_another_thread_sets():
    m = master()
    client = dist.TCPStore("127.0.0.1", m.port, timeout=SHORT)
    got = []
    run_threads([lambda: got.append(client.get("late")), lambda: m.set("late", "v")])
    assert got == [b"v"]


def test_tcp_store_clients_in_threads_count_atomically():
    m = master()
    clients = [dist.TCPStore("127.0.0.1", m.port, timeout=SHORT) for _ in range(4)]

    def work(c):
        return lambda: [c.add("count", 1) for _ in range(50)]

    run_threads([work(c) for c in clients])
    assert m.add("count", 0) == 200
    assert m.get("count") == b"200"


def test_tcp_store_master_waits_for_workers_in_threads():
    port = free_port()
    stores = {}

    def rank(r):
        def fn():
            stores[r] = dist.TCPStore("127.0.0.1", port, 3, r == 0, SHORT)
            stores[r].set(f"rank{r}", str(r))
            stores[r].wait([f"rank{i}" for i in range(3)])
        return fn

    run_threads([rank(r) for r in range(3)])
    assert [stores[0].get(f"rank{i}") for i in range(3)] == [b"0", b"1", b"2"]


CLIENT = """
import sys
from datetime import timedelta
import kiln.distributed as dist
port, rank = int(sys.argv[1]), int(sys.argv[2])
s = dist.TCPStore("127.0.0.1", port, 3, rank == 0, timedelta(seconds=10))
s.add("joined", 1)
s.set(f"from{rank}", f"hello {rank}")
s.wait(["from0", "from1", "from2"])
print(s.get(f"from{(rank + 1) % 3}").decode(), s.get("joined").decode())
s.set(f"done{rank}", "1")
if rank == 0:  # the master's server must outlive the clients' last request
    s.wait(["done0", "done1", "done2"])
"""


def test_tcp_store_across_processes():
    # Rank 0 (the master) starts last: clients retry connecting until it is up.
    port = free_port()
    procs = [spawn(CLIENT, port, r) for r in (1, 2)]
    procs.append(spawn(CLIENT, port, 0))
    outs = finish(procs)
    for code, out, err in outs:
        assert code == 0, err
    assert sorted(out.split()[1] for _, out, _ in outs) == ["0", "1", "2"]
    assert all(out.split()[2] == "3" for _, out, _ in outs)


def test_client_fails_fast_when_the_master_process_dies():
    code = """
import time, kiln.distributed as dist
s = dist.TCPStore("127.0.0.1", 0, None, True)
print(s.port, flush=True)
time.sleep(60)
"""
    proc = spawn(code)
    try:
        port = int(proc.stdout.readline())
        client = dist.TCPStore("127.0.0.1", port, timeout=timedelta(seconds=30))
        proc.kill()
        proc.wait(10)
        start = time.monotonic()
        with pytest.raises(RuntimeError, match=r"\[TCPStore\].*rank 0"):
            client.get("never")
        assert time.monotonic() - start < 5
    finally:
        finish([proc])


def test_connect_timeout_names_host_and_port():
    port = free_port()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"could not connect .*127.0.0.1:{port} within 200 ms")\
            as info:
        dist.TCPStore("127.0.0.1", port, timeout=timedelta(milliseconds=200))
    assert isinstance(info.value, dist.DistNetworkError)
    assert time.monotonic() - start < 5


def test_master_times_out_waiting_for_workers():
    with pytest.raises(dist.DistNetworkError, match=r"world_size=3.*1 connected"):
        master(world_size=3, timeout=timedelta(milliseconds=100), wait_for_workers=True)


def test_bad_ports():
    with pytest.raises(ValueError, match=r"\[TCPStore\] port 70000 is out of range"):
        dist.TCPStore("127.0.0.1", 70000, is_master=True)
    m = master()
    with pytest.raises(RuntimeError, match=rf"cannot listen on port {m.port}"):
        dist.TCPStore("127.0.0.1", m.port, is_master=True)


def test_prefix_store_keys():
    inner = dist.HashStore()
    outer = dist.PrefixStore("pg", inner)
    nested = dist.PrefixStore("sub", outer)
    outer.set("k", "1")
    nested.set("k", "2")
    assert inner.get("pg/k") == b"1"
    assert inner.get("pg/sub/k") == b"2"
    assert nested.check(["k"]) and not nested.check(["pg/k"])
    with pytest.raises(dist.DistStoreError, match=r"'pg/sub/missing'"):
        nested.wait(["missing"], timedelta(milliseconds=20))


# --- rendezvous ------------------------------------------------------------------------------

@pytest.fixture
def clean_env(monkeypatch):
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_env_rendezvous_single_rank(clean_env):
    port = free_port()
    clean_env.setenv("MASTER_ADDR", "127.0.0.1")
    clean_env.setenv("MASTER_PORT", str(port))
    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "1")
    store, rank, world_size = rendezvous("env://", timeout=SHORT)
    assert (rank, world_size) == (0, 1)
    assert isinstance(store, dist.TCPStore) and store.port == port
    store.set("k", "v")
    assert store.get("k") == b"v"


def test_env_rendezvous_two_ranks_in_threads(clean_env):
    clean_env.setenv("MASTER_ADDR", "127.0.0.1")
    clean_env.setenv("MASTER_PORT", str(free_port()))
    clean_env.setenv("WORLD_SIZE", "2")
    clean_env.setenv("RANK", "5")  # explicit arguments win over the environment
    results, stores = {}, []

    def rank(r):
        def fn():
            store, got_rank, ws = rendezvous("env://", rank=r, timeout=SHORT)
            stores.append(store)  # rank 0's store hosts the server: keep it until the end
            store.set(f"r{got_rank}", str(ws))
            store.wait(["r0", "r1"])
            results[r] = (got_rank, ws, store.get("r0"))
        return fn

    run_threads([rank(0), rank(1)])
    assert results == {0: (0, 2, b"2"), 1: (1, 2, b"2")}


@pytest.mark.parametrize("missing", ["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"])
def test_env_rendezvous_names_the_missing_variable(clean_env, missing):
    values = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "RANK": "0", "WORLD_SIZE": "1"}
    for name, value in values.items():
        if name != missing:
            clean_env.setenv(name, value)
    with pytest.raises(ValueError, match=f"environment variable {missing} expected, but not set"):
        rendezvous("env://", timeout=SHORT)


def test_rendezvous_bad_values(clean_env):
    clean_env.setenv("MASTER_ADDR", "127.0.0.1")
    clean_env.setenv("MASTER_PORT", "not-a-port")
    with pytest.raises(ValueError, match=r"MASTER_PORT='not-a-port' is not an integer"):
        rendezvous("env://", rank=0, world_size=1)
    clean_env.setenv("MASTER_PORT", "29500")
    with pytest.raises(ValueError, match=r"rank 2 is out of range for world_size 2"):
        rendezvous("env://", rank=2, world_size=2)
    with pytest.raises(ValueError, match=r"rank -3 is out of range"):
        rendezvous("tcp://127.0.0.1:29500", rank=-3, world_size=2)
    with pytest.raises(ValueError, match=r"world_size must be at least 1, got 0"):
        rendezvous("tcp://127.0.0.1:29500", rank=0, world_size=0)
    with pytest.raises(ValueError, match=r"tcp:// needs rank"):
        rendezvous("tcp://127.0.0.1:29500", world_size=2)
    with pytest.raises(ValueError, match=r"tcp:// needs world_size"):
        rendezvous("tcp://127.0.0.1:29500", rank=0)
    with pytest.raises(ValueError, match=r"expected tcp://host:port"):
        rendezvous("tcp://127.0.0.1", rank=0, world_size=1)
    with pytest.raises(RuntimeError, match=r"no rendezvous handler for file://.*env://, tcp://"):
        rendezvous("file:///tmp/x", rank=0, world_size=1)
    with pytest.raises(TypeError, match=r"init_method must be a str"):
        rendezvous(None)


def test_tcp_rendezvous_with_query_parameters():
    port = free_port()
    store, rank, world_size = rendezvous(f"tcp://127.0.0.1:{port}?rank=0&world_size=1",
                                         timeout=SHORT)
    assert (rank, world_size, store.port) == (0, 1, port)


def test_tcp_rendezvous_connect_failure_names_host_and_port():
    port = free_port()
    with pytest.raises(RuntimeError, match=rf"127.0.0.1:{port}"):
        rendezvous(f"tcp://127.0.0.1:{port}", rank=1, world_size=2,
                   timeout=timedelta(milliseconds=200))
