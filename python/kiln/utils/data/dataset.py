"""Map-style and iterable datasets, and ways to combine and split them."""

import bisect
import math

import kiln


class Dataset:
    """A map-style dataset: subclasses define __getitem__(index) and usually __len__."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read as a stream: subclasses define __iter__. With DataLoader
    workers, every worker iterates its own copy; use get_worker_info() to shard."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Several iterable datasets read one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(
                    f"[ChainDataset] only supports IterableDataset; got {type(d).__name__}"
                )
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class TensorDataset(Dataset):
    """Sample i is the tuple of every tensor's row i."""

    def __init__(self, *tensors):
        sizes = [t.shape[0] if t.dim() > 0 else None for t in tensors]
        if not tensors or None in sizes or len(set(sizes)) != 1:
            shapes = [list(t.shape) for t in tensors]
            raise ValueError(
                "[TensorDataset] tensors need the same size in dim 0 (at least one tensor, none "
                f"0-d); got shapes {shapes}"
            )
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """The samples of several map-style datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("[ConcatDataset] datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError(
                    f"[ConcatDataset] does not support IterableDataset; got {type(d).__name__}"
                )
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        n = len(self)
        if index < 0:
            if -index > n:
                raise ValueError(
                    f"[ConcatDataset] index {index} is out of range for a dataset of length {n}"
                )
            index += n
        which = bisect.bisect_right(self.cumulative_sizes, index)
        if which == len(self.datasets):
            raise IndexError(
                f"[ConcatDataset] index {index} is out of range for a dataset of length {n}"
            )
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][index - start]


def random_split(dataset, lengths, generator=None):
    """Splits `dataset` into non-overlapping random Subsets of the given lengths.

    `lengths` may be fractions summing to 1: each split gets floor(fraction * len),
    and the remainder goes one sample at a time to the first splits.
    """
    generator = kiln.default_generator if generator is None else generator
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(0 <= f <= 1 for f in lengths) and math.isclose(sum(lengths), 1):
        counts = [int(math.floor(f * n)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if any(not isinstance(x, int) or x < 0 for x in lengths) or sum(lengths) != n:
        raise ValueError(
            "[random_split] sum of input lengths does not equal the length of the input dataset "
            f"(or fractions do not sum to 1): lengths={lengths}, len(dataset)={n}"
        )
    order = kiln.randperm(n, generator=generator).tolist()
    splits, offset = [], 0
    for length in lengths:
        splits.append(Subset(dataset, order[offset:offset + length]))
        offset += length
    return splits
