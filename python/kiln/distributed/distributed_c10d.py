"""PyTorch's torch.distributed collectives API on kiln's process groups.

Note [Process groups in Python]
A group is a Python ``ProcessGroup`` holding one C++ backend group per device type: "gloo"
carries CPU tensors, "nccl" CUDA tensors, and "cpu:gloo,cuda:nccl" keeps one of each, picked
by the tensor's device. Ranks given to collectives (``src``, ``dst``) are global ranks, as in
PyTorch, translated to the group's ranks here. Every rank must create groups in the same order
(non-members of a ``new_group`` too): the order numbers the groups, and the number prefixes
each group's keys in the store, so bootstrap data of different groups never mixes.
"""

import pickle
import socket
from datetime import timedelta

import numpy as np

import kiln
from kiln._C import _distributed as _C
from kiln.distributed import _stalls

ReduceOp = _C.ReduceOp
Work = _C.Work

__all__ = [
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all_single", "barrier",
    "broadcast", "broadcast_object_list", "destroy_process_group", "gather_object", "get_backend",
    "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "group", "init_process_group", "irecv", "is_available",
    "is_gloo_available", "is_initialized", "is_nccl_available", "isend", "monitored_barrier",
    "new_group", "recv",
    "reduce", "reduce_scatter_tensor", "send",
]

# PyTorch's default collective timeouts: 30 minutes, and 10 for NCCL groups.
default_pg_timeout = timedelta(minutes=30)
default_pg_nccl_timeout = timedelta(minutes=10)


class Backend(str):
    """A backend name: ``Backend("GLOO") == "gloo"``; also accepts "cpu:gloo,cuda:nccl"."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    backend_list = [UNDEFINED, GLOO, NCCL]
    default_device_backend_map = {"cpu": GLOO, "cuda": NCCL}

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"[Backend] backend name must be a string, got {name!r}")
        value = name.lower()
        if ":" not in value and value not in cls.backend_list:
            raise ValueError(
                f"[Backend] unknown backend {name!r}: kiln supports 'gloo', 'nccl' and "
                f"device maps like 'cpu:gloo,cuda:nccl'"
            )
        return str.__new__(cls, value)


def is_available():
    return True


def is_gloo_available():
    return _C.is_gloo_available()


def is_nccl_available():
    return _C.is_nccl_available()


class ProcessGroup:
    """The ranks of a group and its backend group per device type."""

    def __init__(self, name, backend, ranks, group_rank, backends, timeout):
        self.group_name = name
        self._timeout = timeout  # seconds
        self._monitored_barriers = 0
        self._backend = backend
        self._ranks = list(ranks)
        self._rank = group_rank
        self._backends = backends  # {"cpu": _C.ProcessGroup, "cuda": _C.ProcessGroup}

    def rank(self):
        return self._rank

    def size(self):
        return len(self._ranks)

    def name(self):
        return self._backend

    def _get_backend(self, device):
        return self._backends[kiln.device(device).type]

    def __repr__(self):
        return (f"ProcessGroup(name={self.group_name!r}, backend={self._backend!r}, "
                f"ranks={self._ranks})")


class GroupMember:
    """``GroupMember.WORLD`` is the default group; NON_GROUP_MEMBER stands for groups this
    rank is not part of."""

    WORLD = None
    NON_GROUP_MEMBER = object()


class _GroupAlias:
    @property
    def WORLD(self):
        return GroupMember.WORLD


group = _GroupAlias()


class _World:
    store = None
    rank = -1
    world_size = -1
    group_count = 0  # never reset: keeps store prefixes of re-created groups apart
    groups = []


class _NotInitializedError(ValueError, RuntimeError):
    """Current PyTorch raises ValueError here and older releases RuntimeError; code written
    for either catches this."""


def _not_initialized(op):
    return _NotInitializedError(
        f"[{op}] Default process group has not been initialized, please make sure to call "
        f"init_process_group."
    )


def is_initialized():
    return GroupMember.WORLD is not None


def _parse_backend(backend):
    """{device type: backend name} for a backend spec."""
    if backend is None or backend == Backend.UNDEFINED:
        backend = Backend.NCCL if kiln.cuda.is_available() else Backend.GLOO
    spec = Backend(backend)
    if ":" not in spec:
        device = "cuda" if spec == Backend.NCCL else "cpu"
        return spec, {device: str(spec)}
    devices = {}
    for part in spec.split(","):
        device, _, name = part.partition(":")
        device, name = device.strip(), name.strip()
        if device not in ("cpu", "cuda") or name not in (Backend.GLOO, Backend.NCCL):
            raise ValueError(
                f"[init_process_group] cannot parse backend {backend!r}: expected entries like "
                f"'cpu:gloo' or 'cuda:nccl'"
            )
        devices[device] = name
    return spec, devices


def _timeout_seconds(timeout):
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _new_backend_group(store, name, device, backend, rank, size, timeout, device_id):
    prefixed = _C.PrefixStore(f"{name}/{device}", store)
    if backend == Backend.GLOO:
        return _C._new_gloo_group(prefixed, rank, size, timeout)
    if _C.is_nccl_available() and not kiln.cuda.is_available():
        raise RuntimeError(
            f"[init_process_group] rank {_World.rank}: the nccl backend needs a CUDA device, but "
            f"none is available (use backend='gloo' for CPU tensors)"
        )
    index = -1
    if device_id is not None:
        index = device_id if isinstance(device_id, int) else kiln.device(device_id).index
    if index is None or index < 0:
        index = kiln.cuda.current_device()
    _check_distinct_devices(prefixed, rank, size, index)
    return _C._new_nccl_group(prefixed, rank, size, timeout, index)


def _check_distinct_devices(store, rank, size, index):
    """NCCL needs one GPU per rank; two ranks of one host on the same device make
    ncclCommInitRank fail with a bare "invalid usage". Every rank publishes host:device through
    the store first, so the error can say which ranks collide and how to fix it."""
    me = f"{socket.gethostname()}:{index}"
    store.set(f"device/{rank}", me)
    others = [r for r in range(size)
              if r != rank and store.get(f"device/{r}").decode() == me]
    if others:
        raise RuntimeError(
            f"[init_process_group] rank {rank} and rank(s) {others} all use cuda:{index} on "
            f"{socket.gethostname()}: NCCL needs one GPU per rank. Call "
            f"kiln.cuda.set_device(local_rank) (LOCAL_RANK from the launcher) or pass "
            f"device_id before init_process_group")


def _make_group(ranks, backend, timeout, device_id):
    name = str(_World.group_count)
    _World.group_count += 1
    spec, devices = _parse_backend(backend)
    if _World.rank not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    group_rank = ranks.index(_World.rank)

    def seconds(b):
        if timeout is None and b == Backend.NCCL:
            return default_pg_nccl_timeout.total_seconds()
        return _timeout_seconds(timeout)

    backends = {
        device: _new_backend_group(
            _World.store, name, device, b, group_rank, len(ranks), seconds(b), device_id
        )
        for device, b in devices.items()
    }
    pg = ProcessGroup(name, str(spec), ranks, group_rank, backends,
                      max(seconds(b) for b in devices.values()))
    _World.groups.append(pg)
    return pg


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Joins this process to the job's default group (PyTorch's signature)."""
    if GroupMember.WORLD is not None:
        raise ValueError(
            "[init_process_group] trying to initialize the default process group twice!"
        )
    if store is not None and init_method is not None:
        raise ValueError("[init_process_group] cannot specify both init_method and store")
    if store is not None:
        if world_size <= 0 or rank < 0:
            raise ValueError(
                f"[init_process_group] with store= give world_size > 0 and rank >= 0, got "
                f"world_size={world_size}, rank={rank}"
            )
    else:
        from kiln.distributed.rendezvous import rendezvous

        rdzv_timeout = timedelta(seconds=_timeout_seconds(timeout))
        store, rank, world_size = rendezvous(init_method or "env://", rank, world_size,
                                             rdzv_timeout)
    _World.store = store
    _World.rank = rank
    _World.world_size = world_size
    try:
        GroupMember.WORLD = _make_group(list(range(world_size)), backend, timeout, device_id)
    except BaseException:
        _World.store = None
        _World.rank = _World.world_size = -1
        raise


def destroy_process_group(group=None):
    """Drops the group (all groups and the store when ``group`` is None or WORLD)."""
    if group is None or group is GroupMember.WORLD:
        _World.groups = []
        GroupMember.WORLD = None
        _World.store = None
        _World.rank = _World.world_size = -1
    elif group in _World.groups:
        _World.groups.remove(group)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None):
    """A group of some ranks; every rank of the world must call it, members or not."""
    if GroupMember.WORLD is None:
        raise _not_initialized("new_group")
    if ranks is None:
        ranks = list(range(_World.world_size))
    ranks = sorted(int(r) for r in ranks)
    for r in ranks:
        if not 0 <= r < _World.world_size:
            raise ValueError(
                f"[new_group] rank {r} is out of range for world size {_World.world_size}"
            )
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"[new_group] ranks must be distinct, got {ranks}")
    if backend is None:
        backend = GroupMember.WORLD._backend
    return _make_group(ranks, backend, timeout, device_id)


def _resolve(group, op):
    if GroupMember.WORLD is None:
        raise _not_initialized(op)
    return GroupMember.WORLD if group is None else group


def get_rank(group=None):
    g = _resolve(group, "get_rank")
    return -1 if g is GroupMember.NON_GROUP_MEMBER else g.rank()


def get_world_size(group=None):
    g = _resolve(group, "get_world_size")
    return -1 if g is GroupMember.NON_GROUP_MEMBER else g.size()


def get_backend(group=None):
    g = _resolve(group, "get_backend")
    if g is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("[get_backend] this rank is not part of the group")
    return Backend(g.name())


def get_process_group_ranks(group):
    g = _resolve(group, "get_process_group_ranks")
    return list(g._ranks)


def get_group_rank(group, global_rank):
    g = _resolve(group, "get_group_rank")
    if global_rank not in g._ranks:
        raise ValueError(f"[get_group_rank] global rank {global_rank} is not part of the group "
                         f"(ranks {g._ranks})")
    return g._ranks.index(global_rank)


def get_global_rank(group, group_rank):
    g = _resolve(group, "get_global_rank")
    if not 0 <= group_rank < len(g._ranks):
        raise ValueError(f"[get_global_rank] group rank {group_rank} is out of range for a group "
                         f"of size {len(g._ranks)}")
    return g._ranks[group_rank]


def _group_peer(g, op, global_rank, group_rank, what):
    """The group rank of a src/dst given as a global rank (or directly as group_<what>)."""
    if group_rank is not None:
        if global_rank is not None and g._ranks[group_rank] != global_rank:
            raise ValueError(f"[{op}] {what}={global_rank} and group_{what}={group_rank} disagree")
        return group_rank
    if global_rank is None:
        raise ValueError(f"[{op}] {what} or group_{what} is required")
    if g is GroupMember.WORLD:
        return global_rank  # out-of-range ranks get the backend's RuntimeError
    if global_rank not in g._ranks:
        raise ValueError(
            f"[{op}] global rank {global_rank} is not part of the group (ranks {g._ranks})"
        )
    return g._ranks.index(global_rank)


def _root(g, op, global_rank, group_rank, what):
    """The group rank of a collective's root; when neither form is given, the group's first
    rank (global rank 0 for the default group, where PyTorch also defaults to 0)."""
    if global_rank is None and group_rank is None:
        global_rank = g._ranks[0]
    return _group_peer(g, op, global_rank, group_rank, what)


def _backend(g, tensor, op):
    if not isinstance(tensor, kiln.Tensor):
        raise TypeError(f"[{op}] expected a kiln.Tensor, got {type(tensor).__name__}")
    pg = g._backends.get(tensor.device.type)
    if pg is None:
        if len(g._backends) == 1:
            return next(iter(g._backends.values()))  # the backend names the device mismatch
        raise RuntimeError(
            f"[{op}] rank {_World.rank}: group {g.group_name} ({g._backend}) has no backend for "
            f"{tensor.device.type} tensors (got {tensor.dtype} {list(tensor.shape)} on "
            f"{tensor.device})"
        )
    return pg


def _finish(work, async_op, g=None, op=None):
    """Waits for a synchronous collective; on a timeout the error also names the ranks that
    did not arrive (Note [Naming the ranks that did not arrive])."""
    if async_op:
        return work
    try:
        work.wait()
    except RuntimeError as e:
        if g is None or _World.store is None or not _stalls.is_timeout(e):
            raise
        named = _stalls.describe_stalled_ranks(_World.store, g, op, _World.rank)
        if not named:
            raise
        raise type(e)(f"{e}\n{named}") from None
    return None


def _member(group, op):
    g = _resolve(group, op)
    return None if g is GroupMember.NON_GROUP_MEMBER else g


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    g = _member(group, "all_reduce")
    if g is None:
        return None
    return _finish(_backend(g, tensor, "all_reduce").allreduce([tensor], op), async_op, g,
                   "all_reduce")


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    g = _member(group, "broadcast")
    if g is None:
        return None
    root = _group_peer(g, "broadcast", src, group_src, "src")
    return _finish(_backend(g, tensor, "broadcast").broadcast([tensor], root), async_op, g,
                   "broadcast")


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    g = _member(group, "reduce")
    if g is None:
        return None
    root = _group_peer(g, "reduce", dst, group_dst, "dst")
    return _finish(_backend(g, tensor, "reduce").reduce([tensor], root, op), async_op, g,
                   "reduce")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    g = _member(group, "all_gather")
    if g is None:
        return None
    return _finish(_backend(g, tensor, "all_gather").allgather(list(tensor_list), tensor),
                   async_op, g, "all_gather")


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    g = _member(group, "all_gather_into_tensor")
    if g is None:
        return None
    pg = _backend(g, input_tensor, "all_gather_into_tensor")
    return _finish(pg.allgather_into_tensor(output_tensor, input_tensor), async_op, g,
                   "all_gather_into_tensor")


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    g = _member(group, "reduce_scatter_tensor")
    if g is None:
        return None
    pg = _backend(g, input, "reduce_scatter_tensor")
    return _finish(pg.reduce_scatter_tensor(output, input, op), async_op, g,
                   "reduce_scatter_tensor")


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    g = _member(group, "all_to_all_single")
    if g is None:
        return None
    n = g.size()
    for name, splits, t in (("output_split_sizes", output_split_sizes, output),
                            ("input_split_sizes", input_split_sizes, input)):
        if splits is None:
            continue
        splits = [int(s) for s in splits]
        rows = t.shape[0] if t.dim() > 0 else 0
        if len(splits) != n or any(s * n != rows for s in splits):
            raise NotImplementedError(
                f"[all_to_all_single] rank {_World.rank}: kiln supports equal splits only; "
                f"{name}={splits} for a tensor of {rows} rows in a group of {n} ranks"
            )
    pg = _backend(g, input, "all_to_all_single")
    return _finish(pg.alltoall_base(output, input), async_op, g, "all_to_all_single")


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    g = _member(group, "isend")
    if g is None:
        return None
    peer = _group_peer(g, "isend", dst, group_dst, "dst")
    return _backend(g, tensor, "send").send([tensor], peer, tag)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    g = _member(group, "irecv")
    if g is None:
        return None
    if src is None and group_src is None:
        raise NotImplementedError("[irecv] receiving from any source (src=None) is not supported")
    peer = _group_peer(g, "irecv", src, group_src, "src")
    return _backend(g, tensor, "recv").recv([tensor], peer, tag)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into ``tensor``; returns the sender's global rank."""
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    work.wait()
    g = _resolve(group, "recv")
    return g._ranks[group_src] if group_src is not None else src


def barrier(group=None, async_op=False, device_ids=None):
    g = _member(group, "barrier")
    if g is None:
        return None
    # A host-side Gloo barrier when there is one; NCCL's barrier blocks the host on wait().
    pg = g._backends.get("cpu") or next(iter(g._backends.values()))
    return _finish(pg.barrier(), async_op, g, "barrier")


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier through the store that names every rank that did not arrive in time
    (all of them, whatever ``wait_all_ranks`` says)."""
    g = _member(group, "monitored_barrier")
    if g is None:
        return None
    seconds = g._timeout if timeout is None else _timeout_seconds(timeout)
    g._monitored_barriers += 1
    prefix = f"monitored_barrier/{g.group_name}/{g._monitored_barriers}"
    keys = [f"{prefix}/{r}" for r in range(g.size())]
    store = _World.store
    store.set(keys[g.rank()], b"1")
    try:
        store.wait(keys, timedelta(seconds=seconds))
    except RuntimeError as e:
        if not _stalls.is_timeout(e):
            raise  # the store itself failed (its master exited): nothing to count
        missing = [g._ranks[r] for r in range(g.size()) if not store.check([keys[r]])]
        if not missing:
            return None
        raise RuntimeError(
            f"[monitored_barrier] rank {_World.rank}: ranks {missing} did not reach "
            f"monitored_barrier within {seconds:g} s"
        ) from None
    return None


def _object_device(g):
    if "cpu" in g._backends:
        return kiln.device("cpu")
    return kiln.device("cuda", kiln.cuda.current_device())


def _to_tensor(obj, device):
    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8).copy()
    return kiln.from_numpy(data).to(device)


def _from_tensor(t, length):
    return pickle.loads(t.cpu().numpy()[:length].tobytes())


def all_gather_object(object_list, obj, group=None):
    """Fills ``object_list`` (one slot per rank) with every rank's picklable ``obj``."""
    g = _member(group, "all_gather_object")
    if g is None:
        return None
    device = _object_device(g)
    payload = _to_tensor(obj, device)
    n = g.size()
    size = kiln.tensor([payload.numel()], dtype=kiln.int64, device=device)
    sizes = [kiln.zeros(1, dtype=kiln.int64, device=device) for _ in range(n)]
    all_gather(sizes, size, group=group)
    lengths = [int(s.item()) for s in sizes]
    longest = max(lengths)
    padded = kiln.zeros(longest, dtype=kiln.uint8, device=device)
    padded[: payload.numel()] = payload
    outs = [kiln.zeros(longest, dtype=kiln.uint8, device=device) for _ in range(n)]
    all_gather(outs, padded, group=group)
    for i in range(n):
        object_list[i] = _from_tensor(outs[i], lengths[i])
    return None


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """Collects every rank's picklable ``obj`` into ``object_gather_list`` on ``dst``
    (an all-gather underneath: objects are small and it needs no extra collective)."""
    g = _member(group, "gather_object")
    if g is None:
        return None
    root = _root(g, "gather_object", dst, group_dst, "dst")
    if g.rank() == root and (object_gather_list is None or len(object_gather_list) != g.size()):
        raise ValueError(
            f"[gather_object] rank {_World.rank}: on dst, object_gather_list must be a list of "
            f"{g.size()} items (the group size)"
        )
    gathered = [None] * g.size()
    all_gather_object(gathered, obj, group=group)
    if g.rank() == root:
        object_gather_list[:] = gathered
    return None


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Replaces ``object_list``'s items on every rank with those of ``src``."""
    g = _member(group, "broadcast_object_list")
    if g is None:
        return None
    root = _group_peer(g, "broadcast_object_list", src, group_src, "src")
    device = kiln.device(device) if device is not None else _object_device(g)
    if g.rank() == root:
        payload = _to_tensor(list(object_list), device)
        size = kiln.tensor([payload.numel()], dtype=kiln.int64, device=device)
    else:
        size = kiln.zeros(1, dtype=kiln.int64, device=device)
    broadcast(size, group=group, group_src=root)
    length = int(size.item())
    if g.rank() != root:
        payload = kiln.zeros(length, dtype=kiln.uint8, device=device)
    broadcast(payload, group=group, group_src=root)
    if g.rank() != root:
        received = _from_tensor(payload, length)
        if len(received) != len(object_list):
            raise ValueError(
                f"[broadcast_object_list] rank {_World.rank}: object_list has "
                f"{len(object_list)} items but src sent {len(received)}"
            )
        object_list[:] = received
    return None
