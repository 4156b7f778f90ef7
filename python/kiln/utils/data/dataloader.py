"""DataLoader: batches from a dataset, in the main process or in worker processes."""

import itertools
import multiprocessing
import pickle
import queue
import signal
import time
import warnings

import kiln
from kiln.utils.data import worker as _worker
from kiln.utils.data.collate import default_collate, default_convert
from kiln.utils.data.dataset import IterableDataset
from kiln.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


class _InfiniteConstantSampler(Sampler):
    """Index source for iterable datasets: the worker's iterator decides when to stop."""

    def __iter__(self):
        while True:
            yield None


def pin_memory(data):
    """`data` with every tensor inside (dicts, lists, tuples, namedtuples) in pinned memory."""
    if isinstance(data, kiln.Tensor):
        return data.pin_memory()
    if isinstance(data, dict):
        pinned = {k: pin_memory(v) for k, v in data.items()}
        try:
            return type(data)(pinned)
        except TypeError:
            return pinned
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(pin_memory(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(pin_memory(d) for d in data)
    return data


class DataLoader:
    """Iterates over a dataset in batches, optionally shuffled, optionally loading
    in `num_workers` worker processes. Arguments and defaults follow PyTorch."""

    _frozen_after_init = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                          "persistent_workers")

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(
                "[DataLoader] num_workers option should be non-negative; use num_workers=0 to "
                f"disable multiprocessing; got num_workers={num_workers!r}"
            )
        if timeout < 0:
            raise ValueError(f"[DataLoader] timeout option should be non-negative; got {timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "[DataLoader] prefetch_factor option could only be specified in multiprocessing: "
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor "
                f"to None; got prefetch_factor={prefetch_factor!r}"
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and (not isinstance(prefetch_factor, int)
                                            or prefetch_factor < 1):
            raise ValueError(
                f"[DataLoader] prefetch_factor option should be a positive integer; got "
                f"prefetch_factor={prefetch_factor!r}"
            )
        if persistent_workers and num_workers == 0:
            raise ValueError("[DataLoader] persistent_workers option needs num_workers > 0")

        if isinstance(dataset, IterableDataset):
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(
                        f"[DataLoader] with IterableDataset: expected unspecified {name} option, "
                        f"but got {name}={value!r}"
                    )
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("[DataLoader] sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "[DataLoader] batch_sampler option is mutually exclusive with batch_size, "
                    "shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "[DataLoader] batch_size=None option disables auto-batching and is mutually "
                "exclusive with drop_last"
            )

        if sampler is None:
            if isinstance(dataset, IterableDataset):
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        if pin_memory and not kiln.cuda.is_available():
            warnings.warn("[DataLoader] pin_memory=True but no CUDA device is available; "
                          "batches will not be pinned")
            pin_memory = False

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batch_sampler is not None else default_convert)
        self.multiprocessing_context = multiprocessing_context
        self._iterator = None
        self._initialized = True

    def __setattr__(self, name, value):
        if getattr(self, "_initialized", False) and name in self._frozen_after_init:
            raise ValueError(
                f"[DataLoader] {name} attribute should not be set after DataLoader is initialized"
            )
        super().__setattr__(name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _context(self):
        ctx = self.multiprocessing_context
        if ctx is None:
            return multiprocessing.get_context()
        return multiprocessing.get_context(ctx) if isinstance(ctx, str) else ctx

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        if self._iterator is None or self._iterator.shut_down:  # first epoch, or after a failure
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator._reset(first_epoch=False)
        return self._iterator

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            length = len(self.dataset)
            if self.batch_size is None:
                return length
            if self.drop_last:
                return length // self.batch_size
            return -(-length // self.batch_size)
        return len(self._index_sampler)


class _BaseIter:
    def __init__(self, loader):
        self.loader = loader
        self.dataset = loader.dataset
        self.iterable = isinstance(loader.dataset, IterableDataset)
        self.fetcher_cls = _worker.IterableFetcher if self.iterable else _worker.MapFetcher
        # Drawn with or without workers, so a seeded generator gives the same shuffle either way.
        self.base_seed = int(
            kiln.empty((), dtype=kiln.int64).random_(generator=loader.generator).item())

    def _new_epoch(self):
        self.sampler_iter = iter(self.loader._index_sampler)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.loader)

    def _finish(self, data):
        return pin_memory(data) if self.loader.pin_memory else data


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._new_epoch()
        self.fetcher = self.fetcher_cls(loader.dataset, loader._auto_collation,
                                        loader.collate_fn, loader.drop_last)

    def __next__(self):
        index = next(self.sampler_iter)
        return self._finish(self.fetcher.fetch(index))


def _describe_exit(code):
    if code is not None and code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with exit code {code}"


class _MultiProcessIter(_BaseIter):
    """Keeps prefetch_factor * num_workers tasks outstanding and hands results
    back in sampler order (see Note [Worker protocol] in worker.py)."""

    def __init__(self, loader):
        super().__init__(loader)
        self.num_workers = loader.num_workers
        self.prefetch = loader.prefetch_factor * loader.num_workers
        ctx = loader._context()
        self.data_queue = ctx.Queue()
        self.done_event = ctx.Event()
        self.index_queues, self.workers = [], []
        self.shut_down = False
        for worker_id in range(self.num_workers):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()
            w = ctx.Process(
                target=_worker.worker_loop,
                args=(loader.dataset, self.fetcher_cls, index_queue, self.data_queue,
                      self.done_event, loader._auto_collation, loader.collate_fn,
                      loader.drop_last, self.base_seed, loader.worker_init_fn, worker_id,
                      self.num_workers),
                daemon=True,
            )
            w.start()
            self.index_queues.append(index_queue)
            self.workers.append(w)
        self._reset(first_epoch=True)

    def _reset(self, first_epoch):
        self._new_epoch()
        self.send_idx = 0  # next task id to hand out
        self.rcvd_idx = 0  # next task id to return to the caller
        self.tasks = {}  # task id -> [worker id] or [worker id, result]
        self.active = [True] * self.num_workers
        self.worker_cycle = itertools.cycle(range(self.num_workers))
        if not first_epoch:
            for q in self.index_queues:
                q.put(_worker.ResumeIteration())
            pending = self.num_workers
            while pending > 0:
                task_id, _ = self._get()
                if isinstance(task_id, _worker.ResumeIteration):
                    pending -= 1
        for _ in range(self.prefetch):
            self._put_task()

    def _put_task(self):
        if len(self.tasks) >= self.prefetch:
            return
        try:
            index = next(self.sampler_iter)
        except StopIteration:
            return
        for _ in range(self.num_workers):
            worker_id = next(self.worker_cycle)
            if self.active[worker_id]:
                break
        else:
            return
        self.index_queues[worker_id].put((self.send_idx, index))
        self.tasks[self.send_idx] = [worker_id]
        self.send_idx += 1

    def _get(self):
        """The next (task id, result) from any worker; raises if a worker died or
        `timeout` passed. Polls so that a dead worker is noticed within a second."""
        waited = 0.0
        timeout = self.loader.timeout
        while True:
            interval = _worker.STATUS_CHECK_INTERVAL
            if timeout > 0:
                interval = min(interval, timeout - waited)
            try:
                task_id, payload = self.data_queue.get(timeout=interval)
                return task_id, (None if payload is None else pickle.loads(payload))
            except queue.Empty:
                waited += interval
            dead = [(i, w) for i, w in enumerate(self.workers) if not w.is_alive()]
            if dead:
                self._shutdown()
                details = "; ".join(f"worker {i} (pid {w.pid}) {_describe_exit(w.exitcode)}"
                                    for i, w in dead)
                raise RuntimeError(f"[DataLoader] worker process exited unexpectedly: {details}")
            if timeout > 0 and waited >= timeout:
                self._shutdown()
                raise RuntimeError(f"[DataLoader] timed out after {timeout} seconds waiting for "
                                   "a batch from the worker processes")

    def __next__(self):
        while True:
            # Skip tasks that went to workers whose iterable dataset ran out.
            while self.rcvd_idx < self.send_idx:
                entry = self.tasks[self.rcvd_idx]
                if len(entry) == 2 or self.active[entry[0]]:
                    break
                del self.tasks[self.rcvd_idx]
                self.rcvd_idx += 1
            else:
                if not self.loader.persistent_workers:
                    self._shutdown()
                raise StopIteration
            entry = self.tasks[self.rcvd_idx]
            if len(entry) == 2:
                del self.tasks[self.rcvd_idx]
                return self._deliver(entry[1])
            task_id, data = self._get()
            if isinstance(data, _worker.IterableDatasetStopIteration):
                # Its unanswered tasks, this one included, are skipped at the top of the loop.
                self.active[data.worker_id] = False
                self._put_task()
                continue
            if task_id != self.rcvd_idx:
                self.tasks[task_id].append(data)
                continue
            del self.tasks[task_id]
            return self._deliver(data)

    def _deliver(self, data):
        self.rcvd_idx += 1
        self._put_task()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return self._finish(data)

    def _shutdown(self):
        if self.shut_down:
            return
        self.shut_down = True
        self.done_event.set()
        for q in self.index_queues:
            try:
                q.put(None)
            except ValueError:
                pass  # closed by its finalizer when this iterator is garbage-collected
        deadline = time.monotonic() + 2 * _worker.STATUS_CHECK_INTERVAL
        for w in self.workers:
            w.join(timeout=max(0.0, deadline - time.monotonic()))
            if w.is_alive():
                w.terminate()
                w.join()
        for q in self.index_queues:
            q.close()
        self.data_queue.cancel_join_thread()
        self.data_queue.close()

    def __del__(self):
        self._shutdown()
