"""The DataLoader worker process: its loop, its identity (get_worker_info) and
how its results and errors travel back to the main process.

Note [Worker protocol]
Each worker has its own index queue; all share one result queue. The main
process puts (task id, index or list of indices) on a worker's index queue; the
worker answers (task id, pickled result). None on an index queue stops the
worker; a _ResumeIteration starts a new epoch on a persistent worker, which
echoes it back so the main process knows every older result has been drained.
Results are pickled in the worker, before they reach the queue: a result that
cannot be pickled then becomes an error reported to the main process, instead
of being dropped by the queue's feeder thread and leaving the main process waiting.
"""

import os
import pickle
import queue
import random
import sys
import traceback

import numpy as np

import kiln

# How often a waiting process checks that its peer is still alive, in seconds.
STATUS_CHECK_INTERVAL = 0.5


class WorkerInfo:
    """What a worker process knows about itself: id, num_workers, seed, dataset."""

    def __init__(self, id, num_workers, seed, dataset):
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset

    def __setattr__(self, name, value):
        if hasattr(self, name):
            raise RuntimeError(f"[WorkerInfo] cannot assign attribute {name!r}")
        super().__setattr__(name, value)

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_worker_info = None


def get_worker_info():
    """This process's WorkerInfo inside a DataLoader worker; None in the main process."""
    return _worker_info


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process with its traceback text."""

    def __init__(self, where):
        exc_type, exc, _ = sys.exc_info()
        try:
            pickle.dumps(exc_type)
            self.exc_type = exc_type
        except Exception:  # e.g. a class defined inside a function: the text still travels
            self.exc_type = RuntimeError
        self.message = (
            f"Caught {exc_type.__name__} {where}.\nOriginal "
            + "".join(traceback.format_exception(exc_type, exc, exc.__traceback__))
        )

    def reraise(self):
        message = self.message
        if self.exc_type is KeyError:
            # KeyError shows its argument with repr(), which would mangle the traceback text.
            message = KeyError(message)
        try:
            error = self.exc_type(message)
        except Exception:
            raise RuntimeError(message) from None
        raise error


class ResumeIteration:
    """Sent to a persistent worker to start a new epoch; echoed back as an acknowledgement."""


class IterableDatasetStopIteration:
    """A worker's IterableDataset copy is exhausted for this epoch."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn

    def fetch(self, index):
        if self.auto_collation:
            return self.collate_fn([self.dataset[i] for i in index])
        return self.collate_fn(self.dataset[index])


class IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        batch = []
        for _ in index:
            try:
                batch.append(next(self.iterator))
            except StopIteration:
                break
        if not batch or (self.drop_last and len(batch) < len(index)):
            raise StopIteration
        return self.collate_fn(batch)


def _single_threaded_openmp():
    """Note [OpenMP after fork]: GNU OpenMP's thread pool does not survive fork(), and
    the first parallel region in a forked child waits forever for threads that are
    gone. A worker needs no intra-op parallelism (the workers are the parallelism),
    so it limits OpenMP to one thread, which never touches the pool."""
    kiln.set_num_threads(1)


def _seed_worker(seed):
    random.seed(seed)
    kiln.manual_seed(seed)
    np.random.seed(np.random.SeedSequence(seed).generate_state(4))


def worker_loop(dataset, fetcher_cls, index_queue, data_queue, done_event, auto_collation,
                collate_fn, drop_last, base_seed, init_fn, worker_id, num_workers):
    """The body of one worker process (see Note [Worker protocol])."""
    global _worker_info
    _single_threaded_openmp()
    parent = os.getppid()
    seed = base_seed + worker_id
    _seed_worker(seed)
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    where = f"in DataLoader worker process {worker_id}"

    init_error = None
    fetcher = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = fetcher_cls(dataset, auto_collation, collate_fn, drop_last)
    except Exception:
        init_error = ExceptionWrapper(where)

    iteration_end = False
    try:
        while os.getppid() == parent:
            try:
                task = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                if done_event.is_set():
                    break  # the main process may be gone before its None arrives
                continue
            if task is None:
                break
            if isinstance(task, ResumeIteration):
                data_queue.put((task, None))
                iteration_end = False
                try:
                    fetcher = fetcher_cls(dataset, auto_collation, collate_fn, drop_last)
                except Exception:
                    init_error = ExceptionWrapper(where)
                continue
            if done_event.is_set() or iteration_end:
                continue
            task_id, index = task
            if init_error is not None:
                result, init_error = init_error, None
            else:
                try:
                    result = fetcher.fetch(index)
                except StopIteration:
                    if fetcher_cls is not IterableFetcher:
                        result = ExceptionWrapper(where)
                    else:
                        result = IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                except Exception:
                    result = ExceptionWrapper(where)
            try:
                payload = pickle.dumps(result, pickle.HIGHEST_PROTOCOL)
            except Exception:
                payload = pickle.dumps(ExceptionWrapper(where + " (pickling its result)"))
            data_queue.put((task_id, payload))
            del result, payload
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        # The main process may never read what is still queued; exit without waiting for it.
        data_queue.cancel_join_thread()
        data_queue.close()
