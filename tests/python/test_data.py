"""kiln.utils.data: datasets, samplers, collation, the DataLoader (in-process and
with worker processes) and Tensor pickling, which carries batches between processes."""

import collections
import os
import pickle
import signal
import time

import numpy as np
import pytest

import kiln
from kiln.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)
from helpers import requires_gpu, rerun_without_cuda

Point = collections.namedtuple("Point", ["x", "y"])


class Squares(Dataset):
    """Sample i: (a float32 tensor filled with i, i, i squared as a float)."""

    def __init__(self, n=23):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return kiln.full((2, 3), float(i)), i, float(i * i)


class Range(IterableDataset):
    """0..n-1, split between workers by get_worker_info() when `shard` is set."""

    def __init__(self, n, shard=True):
        self.n = n
        self.shard = shard

    def __len__(self):
        return self.n

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class Failing(Squares):
    def __getitem__(self, i):
        if i == 5:
            raise ValueError("sample five is broken")
        if i == 6:
            raise KeyError("missing")
        return super().__getitem__(i)


class Dying(Squares):
    def __init__(self, how):
        super().__init__()
        self.how = how

    def __getitem__(self, i):
        if i == 7:
            if self.how == "exit":
                os._exit(3)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(i)


class WhoAmI(Dataset):
    """Reports which worker process produced each sample, and a random draw made there."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return {"worker": info.id, "seed": info.seed, "pid": os.getpid(),
                "num_workers": info.num_workers, "draw": float(kiln.rand(()).item())}


class Sleepy(Squares):
    def __getitem__(self, i):
        time.sleep(30)


def _values(loader):
    return [b[1].tolist() for b in loader]


# ----------------------------------------------------------------------------- datasets


def test_tensor_dataset_subset_concat():
    x, y = kiln.arange(10).reshape(5, 2), kiln.arange(5) * 10
    ds = TensorDataset(x, y)
    assert len(ds) == 5
    a, b = ds[3]
    assert a.tolist() == [6, 7] and b.item() == 30
    with pytest.raises(ValueError, match=r"\[TensorDataset\].*\[\[5, 2\], \[4\]\]"):
        TensorDataset(x, kiln.arange(4))

    sub = Subset(ds, [4, 0])
    assert len(sub) == 2 and sub[0][1].item() == 40 and sub[1][1].item() == 0

    cat = ConcatDataset([Squares(3), Squares(4)])
    assert len(cat) == 7
    assert [cat[i][1] for i in range(7)] == [0, 1, 2, 0, 1, 2, 3]
    assert cat[-1][1] == 3 and cat[-7][1] == 0
    assert [s[1] for s in Squares(2) + Squares(1)] == [0, 1, 0]
    with pytest.raises(IndexError, match=r"\[ConcatDataset\] index 7"):
        cat[7]
    with pytest.raises(ValueError, match=r"\[ConcatDataset\] index -8"):
        cat[-8]
    with pytest.raises(ValueError, match="empty"):
        ConcatDataset([])
    with pytest.raises(TypeError, match="IterableDataset"):
        ConcatDataset([Squares(2), Range(3)])


def test_chain_dataset():
    chained = Range(3) + Range(2)
    assert isinstance(chained, ChainDataset) and list(chained) == [0, 1, 2, 0, 1]
    assert len(chained) == 5
    with pytest.raises(TypeError, match=r"\[ChainDataset\].*Squares"):
        list(ChainDataset([Range(1), Squares(2)]))


def test_random_split():
    ds = Squares(10)
    parts = random_split(ds, [3, 7], generator=kiln.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    again = random_split(ds, [3, 7], generator=kiln.Generator().manual_seed(1))
    assert again[0].indices == parts[0].indices
    other = random_split(ds, [3, 7], generator=kiln.Generator().manual_seed(2))
    assert other[0].indices + other[1].indices != parts[0].indices + parts[1].indices

    # Fractions: floor of each, the remainder dealt to the first splits.
    fractions = random_split(Squares(11), [0.5, 0.3, 0.2])
    assert [len(p) for p in fractions] == [6, 3, 2]
    assert [len(p) for p in random_split(Squares(10), [0.25, 0.75])] == [3, 7]

    with pytest.raises(ValueError, match=r"\[random_split\].*len\(dataset\)=10"):
        random_split(ds, [3, 3])
    with pytest.raises(ValueError, match=r"\[random_split\]"):
        random_split(ds, [0.5, 0.2])


# ----------------------------------------------------------------------------- samplers


def test_sequential_and_random_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    data = range(10)
    perm = list(RandomSampler(data, generator=kiln.Generator().manual_seed(3)))
    assert sorted(perm) == list(range(10)) and perm != list(range(10))
    assert list(RandomSampler(data, generator=kiln.Generator().manual_seed(3))) == perm

    # Unseeded samplers draw their seed from the default generator.
    kiln.manual_seed(5)
    first = list(RandomSampler(data))
    kiln.manual_seed(5)
    assert list(RandomSampler(data)) == first

    more = list(RandomSampler(data, num_samples=25))
    assert len(more) == 25 and sorted(more[:20]) == sorted(list(range(10)) * 2)
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=100))
    assert len(drawn) == 100 and set(drawn) == {0, 1, 2}
    assert len(RandomSampler(data, num_samples=4)) == 4

    with pytest.raises(TypeError, match="replacement"):
        RandomSampler(data, replacement=1)
    with pytest.raises(ValueError, match="num_samples=0"):
        RandomSampler(data, num_samples=0)
    with pytest.raises(ValueError, match="num_samples=0"):
        RandomSampler([])


def test_weighted_random_sampler():
    g = kiln.Generator().manual_seed(0)
    drawn = list(WeightedRandomSampler([0.0, 1.0, 3.0], 400, generator=g))
    counts = np.bincount(drawn, minlength=3)
    assert counts[0] == 0 and 60 < counts[1] < 140 and counts[1] + counts[2] == 400
    once = list(WeightedRandomSampler(kiln.tensor([1.0, 2.0, 3.0]), 3, replacement=False))
    assert sorted(once) == [0, 1, 2]
    with pytest.raises(ValueError, match="num_samples=0"):
        WeightedRandomSampler([1.0], 0)
    with pytest.raises(ValueError, match="replacement=1"):
        WeightedRandomSampler([1.0], 1, replacement=1)
    with pytest.raises(ValueError, match=r"shape \[1, 2\]"):
        WeightedRandomSampler([[1.0, 2.0]], 1)


def test_subset_random_and_batch_sampler():
    picked = list(SubsetRandomSampler([7, 3, 9], generator=kiln.Generator().manual_seed(0)))
    assert sorted(picked) == [3, 7, 9]

    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3
    assert len(BatchSampler(range(7), 3, True)) == 2
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="batch_size"):
            BatchSampler(range(7), bad, False)
    with pytest.raises(ValueError, match="drop_last"):
        BatchSampler(range(7), 2, 1)


# ----------------------------------------------------------------------------- collate


def test_default_collate_leaves():
    t = default_collate([kiln.ones(2, 3), kiln.zeros(2, 3)])
    assert t.shape == (2, 2, 3) and t.dtype == kiln.float32 and t[0].sum().item() == 6

    a = default_collate([np.arange(3, dtype=np.int16), np.arange(3, dtype=np.int16) + 5])
    assert a.dtype == kiln.int16 and a.tolist() == [[0, 1, 2], [5, 6, 7]]
    s = default_collate([np.float32(1.5), np.float32(2.5)])
    assert s.dtype == kiln.float32 and s.tolist() == [1.5, 2.5]

    ints, floats, bools = default_collate([1, 2]), default_collate([1.5, 2.0]), default_collate(
        [True, False])
    assert ints.dtype == kiln.int64 and ints.tolist() == [1, 2]
    assert floats.dtype == kiln.float64 and floats.tolist() == [1.5, 2.0]
    assert bools.dtype == kiln.bool and bools.tolist() == [True, False]
    assert default_collate(["a", "b"]) == ["a", "b"]

    with pytest.raises(TypeError, match=r"\[default_collate\].*object"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match=r"\[default_collate\].*dtype <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_default_collate_structures():
    batch = [
        {"x": kiln.ones(2), "meta": ("a", 1), "p": Point(1.0, np.int64(2))},
        {"x": kiln.zeros(2), "meta": ("b", 2), "p": Point(3.0, np.int64(4))},
    ]
    out = default_collate(batch)
    assert out["x"].tolist() == [[1, 1], [0, 0]]
    assert isinstance(out["meta"], list) and out["meta"][0] == ["a", "b"]
    assert out["meta"][1].tolist() == [1, 2]
    assert isinstance(out["p"], Point) and out["p"].x.tolist() == [1.0, 3.0]
    assert out["p"].y.dtype == kiln.int64

    ordered = default_collate([collections.OrderedDict(b=1, a=2)] * 2)
    assert isinstance(ordered, collections.OrderedDict) and list(ordered) == ["b", "a"]

    # A batch of lists is transposed: one collated entry per position.
    lists = default_collate([[1, 2.0], [3, 4.0]])
    assert isinstance(lists, list) and lists[0].tolist() == [1, 3]
    assert lists[1].dtype == kiln.float64

    with pytest.raises(RuntimeError, match="equal size.*\\[2, 3\\]"):
        default_collate([[1, 2], [1, 2, 3]])


def test_default_convert():
    out = default_convert({"a": np.arange(3), "b": (np.float32(2.0), "s"), "c": [1, kiln.ones(1)]})
    assert isinstance(out["a"], kiln.Tensor) and out["a"].dtype == kiln.int64
    assert isinstance(out["b"], list) and out["b"][0].dtype == kiln.float32 and out["b"][1] == "s"
    assert out["c"][0] == 1 and isinstance(out["c"][1], kiln.Tensor)
    assert default_convert(Point(np.ones(1), 2)).x.tolist() == [1.0]


# ----------------------------------------------------------------------------- DataLoader


def test_loader_batches_len_drop_last():
    loader = DataLoader(Squares(10), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    x, i, sq = batches[2]
    assert x.shape == (2, 2, 3) and i.tolist() == [8, 9] and sq.dtype == kiln.float64
    dropped = DataLoader(Squares(10), batch_size=4, drop_last=True)
    assert len(dropped) == 2 and _values(dropped) == [[0, 1, 2, 3], [4, 5, 6, 7]]

    # batch_size=None: samples one at a time, converted but not stacked.
    single = list(DataLoader(TensorDataset(kiln.arange(3)), batch_size=None))
    assert len(single) == 3 and single[1][0].shape == () and single[1][0].item() == 1

    by_sampler = DataLoader(Squares(10), batch_sampler=[[9, 1], [4]])
    assert _values(by_sampler) == [[9, 1], [4]] and len(by_sampler) == 2


def test_loader_shuffle_is_seeded():
    def order(seed):
        return sum(_values(DataLoader(Squares(12), batch_size=5, shuffle=True,
                                      generator=kiln.Generator().manual_seed(seed))), [])

    assert sorted(order(0)) == list(range(12)) and order(0) != list(range(12))
    assert order(0) == order(0) and order(0) != order(1)


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_workers=-1), "num_workers"),
    (dict(timeout=-1), "timeout"),
    (dict(prefetch_factor=2), "prefetch_factor"),
    (dict(num_workers=1, prefetch_factor=0), "prefetch_factor"),
    (dict(persistent_workers=True), "persistent_workers"),
    (dict(shuffle=True, sampler=SequentialSampler(range(3))), "sampler.*shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler"),
    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler"),
    (dict(batch_size=None, drop_last=True), "drop_last"),
])
def test_loader_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=r"\[DataLoader\].*" + match):
        DataLoader(Squares(3), **kwargs)


def test_loader_iterable_argument_errors_and_frozen_attributes():
    for name, value in (("shuffle", True), ("sampler", [0]), ("batch_sampler", [[0]])):
        with pytest.raises(ValueError, match=f"IterableDataset.*{name}={value!r}".replace(
                "[", r"\[").replace("]", r"\]")):
            DataLoader(Range(3), **{name: value})
    loader = DataLoader(Squares(3))
    with pytest.raises(ValueError, match="batch_size attribute"):
        loader.batch_size = 3


def test_loader_iterable_dataset_in_process():
    loader = DataLoader(Range(10), batch_size=4)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert len(loader) == 3
    assert len(DataLoader(Range(10), batch_size=4, drop_last=True)) == 2
    assert [b.tolist() for b in DataLoader(Range(10), batch_size=4, drop_last=True)] == [
        [0, 1, 2, 3], [4, 5, 6, 7]]


def test_workers_match_single_process_in_order():
    def run(num_workers):
        loader = DataLoader(Squares(23), batch_size=3, shuffle=True, num_workers=num_workers,
                            generator=kiln.Generator().manual_seed(4))
        return [[t.tolist() for t in b] for b in loader]

    single, multi = run(0), run(2)
    assert multi == single and len(multi) == 8


def test_workers_keep_prefetch_bound_and_shut_down():
    loader = DataLoader(Squares(23), batch_size=2, num_workers=2, prefetch_factor=3)
    it = iter(loader)
    assert len(it.tasks) == 6  # prefetch_factor * num_workers tasks in flight, no more
    assert next(it)[1].tolist() == [0, 1]
    assert len(it.tasks) <= 6
    workers = list(it.workers)
    assert all(w.is_alive() for w in workers)
    assert sum(len(b[1]) for b in it) == 21
    assert not any(w.is_alive() for w in workers)  # joined at the end of the epoch

    # Abandoning an epoch halfway shuts the workers down too.
    it = iter(loader)
    next(it)
    workers = list(it.workers)
    del it
    assert not any(w.is_alive() for w in workers)


def test_worker_info_seeds_and_init_fn():
    loader = DataLoader(WhoAmI(), batch_size=None, num_workers=2,
                        generator=kiln.Generator().manual_seed(9),
                        worker_init_fn=lambda worker_id: kiln.manual_seed(1000 + worker_id))
    samples = list(loader)
    assert get_worker_info() is None
    assert [s["worker"] for s in samples] == [0, 1] * 4
    assert {s["num_workers"] for s in samples} == {2}
    seeds = {s["worker"]: s["seed"] for s in samples}
    assert seeds[1] == seeds[0] + 1
    # worker_init_fn ran in each worker: its seeding decides the draws.
    kiln.manual_seed(1000)
    expected = [float(kiln.rand(()).item()) for _ in range(4)]
    assert [s["draw"] for s in samples if s["worker"] == 0] == expected
    assert len({s["pid"] for s in samples}) == 2 and os.getpid() not in {s["pid"] for s in samples}


def test_worker_errors_are_reraised_with_the_worker_traceback():
    loader = DataLoader(Failing(), batch_size=2, num_workers=2)
    with pytest.raises(ValueError, match="(?s)in DataLoader worker process 0.*sample five is broken"
                       ) as info:
        list(loader)
    assert "__getitem__" in str(info.value) and "Traceback" in str(info.value)
    loader = DataLoader(Failing(), batch_size=None, sampler=[6], num_workers=1)
    with pytest.raises(KeyError, match="missing"):
        list(loader)
    # An exception class that cannot be pickled still brings its message, as a RuntimeError.
    class Local(Exception):
        pass

    def raise_local(batch):
        raise Local("local failure")

    with pytest.raises(RuntimeError, match="(?s)Caught Local.*local failure"):
        list(DataLoader(Squares(4), batch_size=2, num_workers=1, collate_fn=raise_local))
    # A result that cannot be pickled is an error too, not a lost batch.
    loader = DataLoader(Squares(4), batch_size=2, num_workers=1, collate_fn=lambda b: lambda: b)
    with pytest.raises(Exception, match="pickling its result"):
        list(loader)


@pytest.mark.parametrize("how, match", [("exit", "exit code 3"), ("kill", "signal SIGKILL")])
def test_worker_death_raises_promptly(how, match):
    loader = DataLoader(Dying(how), batch_size=2, num_workers=2)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"\[DataLoader\].*worker 1 \(pid \d+\) .*" + match):
        list(loader)
    assert time.monotonic() - start < 5


def test_timeout():
    loader = DataLoader(Sleepy(), num_workers=1, timeout=0.3)
    with pytest.raises(RuntimeError, match="timed out after 0.3 seconds"):
        next(iter(loader))


def test_iterable_dataset_with_workers():
    loader = DataLoader(Range(10), batch_size=3, num_workers=2)
    batches = [b.tolist() for b in loader]
    assert sorted(sum(batches, [])) == list(range(10))
    assert batches[:2] == [[0, 2, 4], [1, 3, 5]]
    # Without sharding every worker yields the whole dataset.
    dup = list(DataLoader(Range(5, shard=False), batch_size=None, num_workers=2))
    assert sorted(dup) == sorted(list(range(5)) * 2)


def test_persistent_workers_reuse_processes():
    class Pids(Squares):
        def __getitem__(self, i):
            return i, os.getpid()

    loader = DataLoader(Pids(10), batch_size=3, shuffle=True, num_workers=2,
                        persistent_workers=True, generator=kiln.Generator().manual_seed(0))
    epochs = [list(loader) for _ in range(2)]
    it = iter(loader)
    next(it)  # abandon this epoch: its leftovers must not leak into the next one
    epochs.append(list(loader))
    pids = set()
    for batches in epochs:
        assert sorted(sum((b[0].tolist() for b in batches), [])) == list(range(10))
        pids |= {p for b in batches for p in b[1].tolist()}
    assert len(pids) == 2
    assert epochs[0][0][0].tolist() != epochs[1][0][0].tolist()

    iterable = DataLoader(Range(7), batch_size=2, num_workers=2, persistent_workers=True)
    for _ in range(2):
        assert sorted(sum((b.tolist() for b in iterable), [])) == list(range(7))


def test_pin_memory_without_cuda_warns():
    if kiln.cuda.is_available():
        return rerun_without_cuda(__file__, "test_pin_memory_without_cuda_warns")
    with pytest.warns(UserWarning, match="pin_memory"):
        loader = DataLoader(Squares(4), batch_size=2, pin_memory=True)
    assert not any(b[0].is_pinned() for b in loader)


@requires_gpu
@pytest.mark.parametrize("num_workers", [0, 2])
def test_pin_memory_pins_nested_batches(num_workers):
    class Nested(Squares):
        def __getitem__(self, i):
            x, j, sq = super().__getitem__(i)
            return {"x": x, "pair": (kiln.tensor(j), [kiln.ones(1)]), "name": str(i)}

    loader = DataLoader(Nested(5), batch_size=2, num_workers=num_workers, pin_memory=True)
    for batch in loader:
        assert batch["x"].is_pinned() and batch["pair"][0].is_pinned()
        assert batch["pair"][1][0].is_pinned() and isinstance(batch["name"], list)
        assert batch["x"].cuda(non_blocking=True).cpu().tolist() == batch["x"].tolist()


# ----------------------------------------------------------------------------- pickling


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64,
                                   kiln.int8, kiln.uint8, kiln.int16, kiln.int32, kiln.int64,
                                   kiln.bool])
def test_tensor_pickle_round_trip(dtype):
    base = kiln.from_numpy(np.random.default_rng(0).uniform(-50, 50, (3, 4)))
    t = base.to(dtype).t()  # non-contiguous
    u = pickle.loads(pickle.dumps(t))
    assert u.dtype == dtype and u.shape == (4, 3) and u.is_contiguous()
    assert bool((u == t).all())
    for shape in [(), (0, 3)]:
        e = kiln.zeros(shape, dtype=dtype)
        assert pickle.loads(pickle.dumps(e)).shape == shape


def test_tensor_pickle_keeps_requires_grad_and_is_independent():
    x = kiln.randn(3, requires_grad=True)
    y = pickle.loads(pickle.dumps(x))
    assert y.requires_grad and y.is_leaf and bool((y == x).all())
    z = pickle.loads(pickle.dumps(x * 2))  # a non-leaf arrives as a leaf
    assert z.requires_grad and z.is_leaf
    w = kiln.zeros(2)
    v = pickle.loads(pickle.dumps(w))
    v.add_(1)
    assert w.tolist() == [0, 0]


@requires_gpu
def test_tensor_pickle_cuda():
    t = kiln.randn(2, 3).cuda()
    u = pickle.loads(pickle.dumps(t))
    assert u.is_cuda and u.cpu().tolist() == t.cpu().tolist()
