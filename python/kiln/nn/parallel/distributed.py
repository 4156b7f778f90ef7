"""DistributedDataParallel: data-parallel training over a process group (PyTorch's
torch.nn.parallel.DistributedDataParallel).

Note [DDP reducer]
Every rank holds a full replica and runs forward/backward on its own batch; after backward
each parameter's .grad must be the average of the ranks' gradients. Doing one all-reduce per
parameter after backward would serialise communication behind compute and pay a collective's
latency per tensor, so the gradients are reduced in buckets, while backward still runs:

- Buckets. At construction the parameters that require grad are assigned to buckets in
  reverse registration order (the order backward tends to produce their gradients), grouped
  by (device, dtype), each bucket closing once it holds bucket_cap_mb (the first only 1 MiB by
  default, so the first all-reduce starts early). A bucket owns one flat gradient buffer;
  each parameter has a slot in it (a view shaped like the parameter). After the first
  synchronised backward the buckets are rebuilt once in the order the gradients really
  arrived (rank 0's order, broadcast so every rank agrees).
- Hooks. A post-accumulate-grad hook on each parameter runs right after autograd wrote its
  .grad: it copies the gradient into its slot (with gradient_as_bucket_view the .grad *is* the
  slot, so nothing is copied) and counts the bucket down. When a bucket's last gradient has
  arrived, the bucket goes to an asynchronous all_reduce (ReduceOp.AVG: NCCL averages inside
  the collective), so it travels while autograd computes the gradients of earlier layers.
  Buckets are launched strictly in bucket order, so every rank issues the same sequence of
  collectives even if its hooks fire in another order.
- End of backward. The first hook of a backward pass queues a callback with the autograd
  engine (Variable._execution_engine.queue_callback), which runs after every node: it checks
  that every bucket was launched (a parameter that got no gradient would otherwise stall every
  rank: it raises naming those parameters), waits for each bucket's Work (for NCCL: makes the
  current stream wait, no host block) and copies the averaged slots back into .grad.
- Unused parameters. With find_unused_parameters=True the forward walks the autograd graph
  from the outputs; parameters it cannot reach will get no gradient, so they are marked ready
  right away (their slot holds zeros, or what no_sync() accumulated in .grad), and a small
  all-reduce of "used locally" flags tells which got a gradient on some rank: parameters no
  rank used keep their .grad untouched, as in PyTorch.
- no_sync(). Forward passes inside it disarm the hooks: gradients accumulate in .grad as in a
  single process, and the first synchronised backward afterwards reduces the accumulated sum.
"""

import weakref
from contextlib import contextmanager

import kiln
from kiln import _C
from kiln.autograd import Variable
from kiln.nn.modules.module import Module

_MIB = 1024 * 1024
_DEFAULT_FIRST_BUCKET_BYTES = 1 * _MIB
_DEFAULT_BUCKET_CAP_MB = 25
# Parameters and buffers are broadcast in flat chunks of at most this size.
_BROADCAST_BUCKET_BYTES = 250 * _MIB
_OP = "[DistributedDataParallel]"


def _dist():
    """kiln.distributed, imported lazily: kiln.nn must import without it."""
    import kiln.distributed as dist
    return dist


class _Comm:
    """The collectives DDP needs over its process group. None is kiln.distributed's default
    group; a group from kiln.distributed goes through kiln.distributed's functions; any other
    object is used through PyTorch's ProcessGroup methods (rank(), size(),
    allreduce([tensor]) and broadcast([tensor], root), each returning a Work)."""

    def __init__(self, group):
        self.group = group
        dist = None
        if group is None or not hasattr(group, "allreduce"):
            dist = _dist()
            if not dist.is_initialized():
                raise RuntimeError(f"{_OP} the default process group has not been initialized: "
                                   "call kiln.distributed.init_process_group() first")
        self._dist = dist
        if dist is None:
            self.rank, self.world_size, self._root = group.rank(), group.size(), 0
            return
        self.rank = dist.get_rank(group)
        if self.rank < 0:
            raise RuntimeError(f"{_OP} this process is not a member of process_group; only "
                               "its members may wrap a module in DistributedDataParallel")
        self.world_size = dist.get_world_size(group)
        self._root = 0 if group is None else dist.get_global_rank(group, 0)

    def all_reduce_sum(self, tensor, async_op):
        if self._dist is not None:
            return self._dist.all_reduce(tensor, op=self._dist.ReduceOp.SUM, group=self.group,
                                         async_op=async_op)
        work = self.group.allreduce([tensor])
        if async_op:
            return work
        work.wait()
        return None

    def all_reduce_mean_async(self, tensor):
        """The mean over ranks, in place: ReduceOp.AVG where kiln.distributed is used (NCCL
        averages inside the collective, no extra pass over the bucket), else divide then
        sum."""
        if self._dist is not None:
            return self._dist.all_reduce(tensor, op=self._dist.ReduceOp.AVG, group=self.group,
                                         async_op=True)
        if self.world_size > 1:
            tensor.div_(self.world_size)
        return self.group.allreduce([tensor])

    def broadcast_from_first(self, tensor):
        if self._dist is not None:
            self._dist.broadcast(tensor, src=self._root, group=self.group)
        else:
            self.group.broadcast([tensor], self._root).wait()


class _Bucket:
    """One flat gradient buffer and the parameters (by index) whose slots it holds."""

    def __init__(self, indices, params):
        first = params[indices[0]]
        self.indices = indices
        self.buffer = kiln.zeros(sum(params[i].numel() for i in indices), dtype=first.dtype,
                                 device=first.device)
        self.views = {}
        offset = 0
        for i in indices:
            n = params[i].numel()
            self.views[i] = self.buffer.narrow(0, offset, n).view(params[i].shape)
            offset += n
        self.pending = len(indices)
        self.work = None


def _assign_buckets(params, limits, order):
    """Lists of parameter indices: parameters taken in `order` (the order their gradients are
    expected), one open bucket per (device, dtype), closed once it reaches its limit
    (limits[k] for its k-th bucket, the last limit after that); buckets ordered by where their
    first parameter comes in `order`."""
    open_buckets, closed, count = {}, [], {}
    for position, i in enumerate(order):
        p = params[i]
        key = (str(p.device), str(p.dtype))
        bucket = open_buckets.setdefault(key, {"indices": [], "bytes": 0, "first": position})
        bucket["indices"].append(i)
        bucket["bytes"] += p.numel() * p.element_size()
        k = count.get(key, 0)
        if bucket["bytes"] >= limits[min(k, len(limits) - 1)]:
            closed.append(bucket)
            count[key] = k + 1
            del open_buckets[key]
    closed += open_buckets.values()
    return [b["indices"] for b in sorted(closed, key=lambda b: b["first"])]


def _flat_broadcast(comm, tensors):
    """Broadcasts tensors from the group's first rank as a few flat buffers (one per device,
    dtype and _BROADCAST_BUCKET_BYTES) instead of one collective per tensor."""
    chunks = {}
    for t in tensors:
        key = (str(t.device), str(t.dtype))
        nbytes = t.numel() * t.element_size()
        group = chunks.setdefault(key, [[[], 0]])
        if group[-1][0] and group[-1][1] + nbytes > _BROADCAST_BUCKET_BYTES:
            group.append([[], 0])
        group[-1][0].append(t)
        group[-1][1] += nbytes
    with kiln.no_grad():
        for group in chunks.values():
            for chunk, _ in group:
                flat = kiln.cat([t.reshape(-1) for t in chunk])
                comm.broadcast_from_first(flat)
                if comm.rank == 0:
                    continue
                offset = 0
                for t in chunk:
                    t.copy_(flat.narrow(0, offset, t.numel()).view(t.shape))
                    offset += t.numel()


def _shape_text(shape):
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


def _tensors_in(obj):
    if isinstance(obj, kiln.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _tensors_in(item)]
    if isinstance(obj, dict):
        return [t for item in obj.values() for t in _tensors_in(item)]
    return []


def _move_to(obj, device):
    if isinstance(obj, kiln.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_move_to(o, device) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move_to(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _move_to(v, device) for k, v in obj.items()}
    return obj


class DistributedDataParallel(Module):
    """Wraps `module` so that backward leaves every rank's .grad equal to the average over
    the process group's ranks (Note [DDP reducer]). Every rank must construct it with the
    same model; parameters and buffers start from rank 0's values. check_reduction is
    accepted and ignored (deprecated in PyTorch); static_graph=True lets parameters that the
    first iteration did not use stay unused, without walking the graph again."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError(f"{_OP} DistributedDataParallel is not needed when a module "
                               "doesn't have any parameter that requires a gradient.")
        devices = {str(p.device) for _, p in module.named_parameters()}
        device_types = {p.device.type for _, p in module.named_parameters()}
        if device_ids is not None or output_device is not None:
            if device_types != {"cuda"} or len(devices) != 1 or (
                    device_ids is not None and len(device_ids) != 1):
                raise ValueError(
                    f"{_OP} device_ids and output_device only work with single-device GPU "
                    f"modules, but got device_ids {device_ids}, output_device {output_device} "
                    f"and module parameters on {sorted(devices)}.")
        self.module = module
        self.device_ids = None if device_ids is None else [
            d if isinstance(d, int) else kiln.device(d).index for d in device_ids]
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.process_group = process_group
        if bucket_cap_mb is None:
            limits = [_DEFAULT_FIRST_BUCKET_BYTES, _DEFAULT_BUCKET_CAP_MB * _MIB]
        else:
            limits = [int(bucket_cap_mb * _MIB)]
        self.bucket_bytes_cap = limits[-1]
        # Plain attributes (not submodules or parameters): kept out of state_dict.
        d = self.__dict__
        d["_comm"] = _Comm(process_group)
        d["_param_names"] = [n for n, _ in named]
        d["_params"] = [p for _, p in named]
        self._verify_param_shapes_across_ranks()
        if self._comm.world_size > 1:
            _flat_broadcast(self._comm, [p.detach() for _, p in module.named_parameters()]
                            + list(module.buffers()))
        d["_bucket_limits"] = limits
        self._set_buckets(_assign_buckets(self._params, limits,
                                          list(reversed(range(len(self._params))))))
        # The order gradients arrive in during the first synchronised backward, or None once
        # the buckets were rebuilt from it.
        d["_ready_order"] = []
        d["_static_unused"] = None
        self._reset_iteration()
        this = weakref.ref(self)
        d["_hook_handles"] = [
            p.register_post_accumulate_grad_hook(DistributedDataParallel._make_hook(this, i))
            for i, p in enumerate(self._params)]

    def _set_buckets(self, assignment):
        d = self.__dict__
        d["_buckets"] = [_Bucket(indices, self._params) for indices in assignment]
        d["_bucket_of"] = {i: b for b in self._buckets for i in b.indices}

    def _rebuild_buckets(self):
        """After the first synchronised backward: buckets follow the order gradients actually
        arrived in (rank 0's, so all ranks agree), as PyTorch does, so a module whose forward
        uses its parameters in another order than it registered them still overlaps."""
        order = self._ready_order
        arrived = set(order)
        order += [i for i in range(len(self._params)) if i not in arrived]  # unused ones
        self.__dict__["_ready_order"] = None
        if self._comm.world_size > 1:
            flat = kiln.tensor(order, dtype=kiln.int64, device=self._params[0].device)
            self._comm.broadcast_from_first(flat)
            order = flat.cpu().tolist()
        assignment = _assign_buckets(self._params, self._bucket_limits, order)
        if assignment == [b.indices for b in self._buckets]:
            return
        old = self._bucket_of
        self._set_buckets(assignment)
        if not self.gradient_as_bucket_view:
            return
        with kiln.no_grad():
            for i, p in enumerate(self._params):
                view = self._bucket_of[i].views[i]
                if p.grad is not None and p.grad.data_ptr() == old[i].views[i].data_ptr():
                    view.copy_(p.grad)
                    p.grad = view

    def __del__(self):
        for handle in self.__dict__.get("_hook_handles", ()):
            handle.remove()

    # ---- construction checks --------------------------------------------------------------

    def _verify_param_shapes_across_ranks(self):
        """Every rank describes its parameter shapes as integers in its own row of a
        (world_size, n) table that a SUM all-reduce fills in everywhere (an all-gather through
        all_reduce); every rank then compares every row with rank 0's and raises the same
        error, naming the first rank and parameter that differ."""
        comm = self._comm
        if comm.world_size == 1:
            return
        mine = [len(self._params)]
        for p in self._params:
            mine += [p.dim()] + list(p.shape)
        device = self._params[0].device
        length = kiln.zeros(comm.world_size, dtype=kiln.int64, device=device)
        length[comm.rank] = len(mine)
        comm.all_reduce_sum(length, async_op=False)
        width = int(length.max().item())
        table = kiln.zeros(comm.world_size, width, dtype=kiln.int64, device=device)
        table[comm.rank, :len(mine)] = kiln.tensor(mine, dtype=kiln.int64, device=device)
        comm.all_reduce_sum(table, async_op=False)
        rows = [_parse_shapes(row) for row in table.cpu().tolist()]
        for rank, shapes in enumerate(rows[1:], start=1):
            if len(shapes) != len(rows[0]):
                raise RuntimeError(
                    f"{_OP} DDP expects the same model on every rank, but rank {rank} has "
                    f"{len(shapes)} parameters that require grad while rank 0 has "
                    f"{len(rows[0])} (seen from rank {comm.rank})")
            for i, (a, b) in enumerate(zip(rows[0], shapes)):
                if a != b:
                    raise RuntimeError(
                        f"{_OP} DDP expects the same model on every rank, but parameter "
                        f"'{self._param_names[i]}' (index {i}) has shape {_shape_text(b)} on "
                        f"rank {rank} and {_shape_text(a)} on rank 0 (seen from rank "
                        f"{comm.rank})")

    # ---- forward --------------------------------------------------------------------------

    def forward(self, *inputs, **kwargs):
        sync = kiln.is_grad_enabled() and self.require_backward_grad_sync
        self._reset_iteration()
        if self._ready_order is not None:
            self._ready_order.clear()  # an earlier iteration that failed or never finished
        # As in PyTorch: buffers follow rank 0 unless the previous forward ran without
        # gradient synchronisation (no_sync(), no_grad).
        if self.broadcast_buffers and self.require_forward_param_sync and \
                self._comm.world_size > 1:
            buffers = list(self.module.buffers())
            if buffers:
                _flat_broadcast(self._comm, buffers)
        if self.device_ids is not None:
            device = kiln.device("cuda", self.device_ids[0])
            inputs = _move_to(inputs, device)
            kwargs = _move_to(kwargs, device)
        output = self.module(*inputs, **kwargs)
        self.require_forward_param_sync = sync
        if sync:
            self.__dict__["_expect_hooks"] = True
            if self.find_unused_parameters or self.static_graph:
                self._mark_unused(output)
        return output

    @contextmanager
    def no_sync(self):
        """Forward/backward passes inside accumulate gradients locally; the first synchronised
        backward after it reduces the sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _reset_iteration(self):
        d = self.__dict__
        # Collectives launched by an iteration that never ran backward (find_unused) finish
        # first, so every rank's sequence of collectives stays the same.
        for bucket in self._buckets:
            if bucket.work is not None:
                bucket.work.wait()
            bucket.pending = len(bucket.indices)
            bucket.work = None
        if d.get("_used_work") is not None:
            d["_used_work"].wait()
        d["_expect_hooks"] = False
        d["_reduced"] = False
        d["_ready"] = [False] * len(self._params)
        d["_next_bucket"] = 0
        d["_callback_queued"] = False
        d["_used_work"] = None
        d["_used_flags"] = None

    def _mark_unused(self, output):
        """find_unused_parameters: parameters the autograd graph of `output` cannot reach get
        no gradient in this backward; they are ready now."""
        if self.static_graph and not self.find_unused_parameters and \
                self._static_unused is not None:
            unused = self._static_unused
        else:
            reached = set()
            seen = {}
            stack = []
            for t in _tensors_in(output):
                if t.grad_fn is not None:
                    stack.append(t.grad_fn)
                elif t.requires_grad:
                    reached.add(id(t))
            while stack:
                node = stack.pop()
                if id(node) in seen:
                    continue
                seen[id(node)] = node  # keeps the wrapper alive, so ids stay unique
                if isinstance(node, _C._AccumulateGrad):
                    reached.add(id(node.variable))
                    continue
                stack.extend(fn for fn, _ in node.next_functions if fn is not None)
            unused = [i for i, p in enumerate(self._params) if id(p) not in reached]
            self.__dict__["_static_unused"] = unused
        used = [1] * len(self._params)
        with kiln.no_grad():
            for i in unused:
                p = self._params[i]
                view = self._bucket_of[i].views[i]
                if p.grad is None:
                    used[i] = 0
                    view.zero_()
                elif p.grad.data_ptr() != view.data_ptr():
                    view.copy_(p.grad)  # gradients accumulated under no_sync()
        if self.find_unused_parameters or self.static_graph:
            flags = kiln.tensor(used, dtype=kiln.int32, device=self._params[0].device)
            self.__dict__["_used_flags"] = flags
            self.__dict__["_used_work"] = self._comm.all_reduce_sum(flags, async_op=True)
        for i in unused:
            self._ready[i] = True
            self._count_down(self._bucket_of[i])

    # ---- backward -------------------------------------------------------------------------

    @staticmethod
    def _make_hook(this, index):
        # A weak reference: the hook lives on the parameter, which must not keep the DDP
        # wrapper (and its buckets) alive.
        def hook(param):
            ddp = this()
            if ddp is None:
                return
            if ddp._expect_hooks:
                ddp._grad_ready(index, param)
            elif ddp._reduced:
                raise RuntimeError(
                    f"{_OP} parameter '{ddp._param_names[index]}' (index {index}) received a "
                    "gradient after this iteration's reduction finished: DDP reduces once per "
                    "forward, so a second backward through the same forward (retain_graph=True)"
                    " is not supported; run the forward again")
        return hook

    def _grad_ready(self, index, param):
        if self._ready_order is not None:
            self._ready_order.append(index)
        if not self._callback_queued:
            self.__dict__["_callback_queued"] = True
            Variable._execution_engine.queue_callback(self._finish_backward)
        bucket = self._bucket_of[index]
        view = bucket.views[index]
        grad = param.grad
        if grad.data_ptr() != view.data_ptr():
            view.copy_(grad)
            if self.gradient_as_bucket_view:
                param.grad = view
        self._ready[index] = True
        self._count_down(bucket)

    def _count_down(self, bucket):
        bucket.pending -= 1
        # Launch in bucket order only: all ranks then issue the same collectives in turn.
        while self._next_bucket < len(self._buckets) and \
                self._buckets[self._next_bucket].pending == 0:
            ready = self._buckets[self._next_bucket]
            ready.work = self._comm.all_reduce_mean_async(ready.buffer)
            self.__dict__["_next_bucket"] = self._next_bucket + 1

    def _finish_backward(self):
        """The end-of-backward callback: every bucket must have been launched; waits for them
        and writes the averaged gradients to .grad."""
        self.__dict__["_expect_hooks"] = False
        if self._next_bucket < len(self._buckets):
            missing = [i for i, r in enumerate(self._ready) if not r]
            self._reset_iteration()
            names = ", ".join(self._param_names[i] for i in missing)
            raise RuntimeError(
                f"{_OP} rank {self._comm.rank}: parameters that received no gradient in this "
                f"backward pass: {names} (indices {missing}). DDP needs a gradient for every "
                "parameter to finish its reduction. If your module has parameters that are "
                "unused in producing the loss, pass find_unused_parameters=True to "
                "DistributedDataParallel, and make sure all forward outputs take part in "
                "calculating the loss.")
        used = None
        if self._used_work is not None:
            self._used_work.wait()
            used = self._used_flags.cpu().tolist()
        with kiln.no_grad():
            for bucket in self._buckets:
                bucket.work.wait()
                for i in bucket.indices:
                    p, view = self._params[i], bucket.views[i]
                    if used is not None and used[i] == 0:
                        continue  # no rank used it: .grad stays as it was
                    if p.grad is None:
                        p.grad = view if self.gradient_as_bucket_view else view.clone()
                    elif p.grad.data_ptr() != view.data_ptr():
                        p.grad.copy_(view)
        self._reset_iteration()
        self.__dict__["_reduced"] = True
        if self._ready_order is not None:
            self._rebuild_buckets()


def _parse_shapes(row):
    count, pos, shapes = row[0], 1, []
    for _ in range(count):
        ndim = row[pos]
        shapes.append(tuple(row[pos + 1:pos + 1 + ndim]))
        pos += 1 + ndim
    return shapes
