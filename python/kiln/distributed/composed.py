"""The torch.distributed collectives that kiln builds from the process group's primitives:
gather / scatter from point-to-point sends, reduce_scatter and all_to_all over lists from the
flat-tensor collectives, scatter_object_list from broadcast_object_list, and the launcher
queries (is_torchelastic_launched, get_node_local_rank).

NCCL runs each send and receive as its own call on the group's stream, without PyTorch's
batched (grouped) point-to-point, so only patterns where no two ranks wait on each other's
send are built from them: gather and scatter (every transfer involves the root, which takes
them one at a time). all_to_all with unequal sizes exchanges in both directions and needs
batching, so on NCCL it is refused; Gloo's sends do not block and carry it.
"""

import os

import kiln
from kiln.distributed.distributed_c10d import (
    ReduceOp,
    _backend,
    _finish,
    _root,
    _member,
    _World,
    all_to_all_single,
    broadcast_object_list,
    irecv,
    isend,
    reduce_scatter_tensor,
)

__all__ = ["all_to_all", "gather", "get_node_local_rank", "is_torchelastic_launched",
           "reduce_scatter", "scatter", "scatter_object_list"]


class _Works:
    """Several Works as one: wait() waits for all, then runs `then` (copies out of staging)."""

    def __init__(self, works, then=None):
        self._works = [w for w in works if w is not None]
        self._then = then

    def is_completed(self):
        return all(w.is_completed() for w in self._works)

    def wait(self, timeout=None):
        for w in self._works:
            w.wait() if timeout is None else w.wait(timeout)
        if self._then is not None:
            self._then()
            self._then = None
        return True

    def synchronize(self):
        for w in self._works:
            w.synchronize()
        self.wait()


def _check_list(op, tensors, n, ref, name):
    if tensors is None or len(tensors) != n:
        got = "None" if tensors is None else f"{len(tensors)} tensors"
        raise ValueError(f"[{op}] rank {_World.rank}: {name} must hold one tensor per rank of "
                         f"the group ({n}), got {got}")
    for t in tensors:
        if t.dtype != ref.dtype or t.shape != ref.shape:
            raise ValueError(
                f"[{op}] rank {_World.rank}: every tensor of {name} must match "
                f"{ref.dtype} {list(ref.shape)}, got {t.dtype} {list(t.shape)}")


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Collects every rank's ``tensor`` into ``gather_list`` on ``dst``."""
    g = _member(group, "gather")
    if g is None:
        return None
    root = _root(g, "gather", dst, group_dst, "dst")
    if g.rank() != root:
        if gather_list:
            raise ValueError(f"[gather] rank {_World.rank}: gather_list must not be given on a "
                             f"rank that is not the destination")
        return _finish(isend(tensor, group=group, group_dst=root), async_op)
    _check_list("gather", gather_list, g.size(), tensor, "gather_list")
    works = [irecv(out, group=group, group_src=r)
             for r, out in enumerate(gather_list) if r != root]
    gather_list[root].copy_(tensor)
    return _finish(_Works(works), async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Fills every rank's ``tensor`` with its entry of ``scatter_list`` on ``src``."""
    g = _member(group, "scatter")
    if g is None:
        return None
    root = _root(g, "scatter", src, group_src, "src")
    if g.rank() != root:
        if scatter_list:
            raise ValueError(f"[scatter] rank {_World.rank}: scatter_list must not be given on "
                             f"a rank that is not the source")
        return _finish(irecv(tensor, group=group, group_src=root), async_op)
    _check_list("scatter", scatter_list, g.size(), tensor, "scatter_list")
    works = [isend(part.contiguous(), group=group, group_dst=r)
             for r, part in enumerate(scatter_list) if r != root]
    tensor.copy_(scatter_list[root])
    return _finish(_Works(works), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank r gets the reduction over ranks of their ``input_list[r]``."""
    g = _member(group, "reduce_scatter")
    if g is None:
        return None
    _check_list("reduce_scatter", input_list, g.size(), output, "input_list")
    flat = kiln.cat([t.reshape(-1) for t in input_list])
    return reduce_scatter_tensor(output, flat, op, group=group, async_op=async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank r's ``input_tensor_list[s]`` lands in rank s's ``output_tensor_list[r]``."""
    g = _member(group, "all_to_all")
    if g is None:
        return None
    n, me = g.size(), g.rank()
    for name, tensors in (("output_tensor_list", output_tensor_list),
                          ("input_tensor_list", input_tensor_list)):
        if len(tensors) != n:
            raise ValueError(f"[all_to_all] rank {_World.rank}: {name} must hold one tensor "
                             f"per rank of the group ({n}), got {len(tensors)}")
    ref = input_tensor_list[0]
    equal = all(t.dtype == ref.dtype and t.shape == ref.shape
                for t in list(input_tensor_list) + list(output_tensor_list))
    if equal:
        flat_in = kiln.cat([t.reshape(-1) for t in input_tensor_list])
        flat_out = kiln.empty_like(flat_in)
        work = all_to_all_single(flat_out, flat_in, group=group, async_op=True)

        def copy_out():
            for out, part in zip(output_tensor_list, flat_out.chunk(n)):
                out.copy_(part.view(out.shape))

        return _finish(_Works([work], copy_out), async_op)
    if _backend(g, ref, "all_to_all").name() == "nccl":
        raise NotImplementedError(
            f"[all_to_all] rank {_World.rank}: tensors of different shapes need batched "
            f"point-to-point, which kiln's NCCL group does not have; pad them to one shape")
    works = []
    for r in range(n):
        if r != me:
            works.append(isend(input_tensor_list[r].contiguous(), group=group, group_dst=r))
            works.append(irecv(output_tensor_list[r], group=group, group_src=r))
    output_tensor_list[me].copy_(input_tensor_list[me])
    return _finish(_Works(works), async_op)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None):
    """``scatter_object_output_list[0]`` on rank r becomes ``scatter_object_input_list[r]``
    of ``src`` (the list is broadcast: objects are small)."""
    g = _member(group, "scatter_object_list")
    if g is None:
        return None
    root = _root(g, "scatter_object_list", src, group_src, "src")
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("[scatter_object_list] scatter_object_output_list must be a list "
                         "with at least one element")
    objects = [None] * g.size()
    if g.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != g.size():
            raise ValueError(f"[scatter_object_list] rank {_World.rank}: on src, "
                             f"scatter_object_input_list must hold {g.size()} objects")
        objects = list(scatter_object_input_list)
    broadcast_object_list(objects, group=group, group_src=root)
    scatter_object_output_list[0] = objects[g.rank()]
    return None


def is_torchelastic_launched():
    """True inside a worker started by kiln's launcher (or torchrun)."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def get_node_local_rank(fallback_rank=None):
    """This process's rank on its node: LOCAL_RANK from the launcher, else ``fallback_rank``."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("[get_node_local_rank] LOCAL_RANK is not set (start the process with "
                       "python -m kiln.distributed.run) and no fallback_rank was given")
