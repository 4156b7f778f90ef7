"""How the processes of one job find each other (torch.distributed.rendezvous).

``rendezvous(init_method, rank, world_size, timeout)`` turns an ``init_method`` URL into a
connected store plus this process's rank and the world size. Rank 0 hosts the TCPStore server;
every rank (rank 0 included) is a client of it. The master waits for all ``world_size`` ranks
to connect, so a missing rank surfaces as one clear timeout naming host:port instead of a
collective that hangs later.

Supported schemes: ``env://`` (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; the launcher
``python -m kiln.distributed.run`` sets them) and ``tcp://host:port``. Both accept
``?rank=R&world_size=W`` in the URL; explicit arguments win over the URL, which wins over the
environment.
"""

import os
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

from kiln._C._distributed import TCPStore

__all__ = ["rendezvous", "register_rendezvous_handler"]

# PyTorch's default process-group timeout.
default_timeout = timedelta(minutes=30)

_handlers = {}


def register_rendezvous_handler(scheme, handler):
    """Registers ``handler(url, rank, world_size, timeout) -> (store, rank, world_size)``."""
    if scheme in _handlers:
        raise RuntimeError(f"[rendezvous] a handler for {scheme}:// is already registered")
    _handlers[scheme] = handler


def _query_int(url, name):
    values = parse_qs(urlparse(url).query).get(name)
    if not values:
        return None
    try:
        return int(values[-1])
    except ValueError:
        raise ValueError(
            f"[rendezvous] {name}={values[-1]!r} in {url!r} is not an integer"
        ) from None


def _env(name, scheme="env://"):
    value = os.environ.get(name)
    if value is None or value == "":
        raise ValueError(
            f"Error initializing kiln.distributed using {scheme} rendezvous: environment "
            f"variable {name} expected, but not set (the launcher "
            f"`python -m kiln.distributed.run` sets it)"
        )
    return value


def _env_int(name):
    value = _env(name)
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"[rendezvous] environment variable {name}={value!r} is not an integer"
        ) from None


def _check_rank(rank, world_size):
    if world_size < 1:
        raise ValueError(f"[rendezvous] world_size must be at least 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(
            f"[rendezvous] rank {rank} is out of range for world_size {world_size}: "
            f"ranks are 0..{world_size - 1}"
        )


def _pick(arg, url, name):
    """An explicit argument (not None / -1) wins over the URL's query parameter."""
    if arg is not None and arg != -1:
        return int(arg)
    return _query_int(url, name)


def _connect(host, port, rank, world_size, timeout):
    _check_rank(rank, world_size)
    if not 0 < port < 65536:
        raise ValueError(f"[rendezvous] port {port} is out of range [1, 65535]")
    store = TCPStore(host, port, world_size, rank == 0, timeout, wait_for_workers=True)
    return store, rank, world_size


def _env_handler(url, rank, world_size, timeout):
    rank = _pick(rank, url, "rank")
    world_size = _pick(world_size, url, "world_size")
    if rank is None:
        rank = _env_int("RANK")
    if world_size is None:
        world_size = _env_int("WORLD_SIZE")
    host = _env("MASTER_ADDR")
    port_text = _env("MASTER_PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"[rendezvous] MASTER_PORT={port_text!r} is not an integer") from None
    return _connect(host, port, rank, world_size, timeout)


def _tcp_handler(url, rank, world_size, timeout):
    parsed = urlparse(url)
    rank = _pick(rank, url, "rank")
    world_size = _pick(world_size, url, "world_size")
    if rank is None or world_size is None:
        missing = "rank" if rank is None else "world_size"
        raise ValueError(
            f"[rendezvous] {url!r}: tcp:// needs {missing} (pass rank= and world_size= or add "
            f"?rank=R&world_size=W to the URL)"
        )
    try:
        port = parsed.port
    except ValueError:
        port = None
    if not parsed.hostname or port is None:
        raise ValueError(f"[rendezvous] {url!r}: expected tcp://host:port")
    return _connect(parsed.hostname, port, rank, world_size, timeout)


register_rendezvous_handler("env", _env_handler)
register_rendezvous_handler("tcp", _tcp_handler)


def rendezvous(init_method, rank=-1, world_size=-1, timeout=default_timeout):
    """Returns ``(store, rank, world_size)`` for ``init_method`` (env:// or tcp://host:port)."""
    if not isinstance(init_method, str):
        raise TypeError(
            f"[rendezvous] init_method must be a str URL, got {type(init_method).__name__}"
        )
    scheme = urlparse(init_method).scheme
    handler = _handlers.get(scheme)
    if handler is None:
        supported = ", ".join(f"{s}://" for s in sorted(_handlers))
        raise RuntimeError(
            f"[rendezvous] no rendezvous handler for {scheme}:// (from {init_method!r}); kiln "
            f"supports {supported}"
        )
    if isinstance(timeout, (int, float)):
        timeout = timedelta(seconds=timeout)
    return handler(init_method, rank, world_size, timeout)
