"""Samplers: the order in which a DataLoader visits dataset indices."""

import kiln


class Sampler:
    """Iterates over dataset indices (or batches of indices); subclasses define __iter__."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _fresh_generator(generator):
    """`generator`, or a new one seeded from the default generator, so that
    kiln.manual_seed makes unseeded shuffling reproducible."""
    if generator is not None:
        return generator
    seed = int(kiln.empty((), dtype=kiln.int64).random_().item())
    g = kiln.Generator()
    g.manual_seed(seed)
    return g


class RandomSampler(Sampler):
    """A random permutation of the indices, or `num_samples` draws with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(
                f"[RandomSampler] replacement should be a boolean value, but got "
                f"replacement={replacement!r}"
            )
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or (
            self.num_samples <= 0
        ):
            raise ValueError(
                "[RandomSampler] num_samples should be a positive integer value, but got "
                f"num_samples={self.num_samples!r}"
            )

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = _fresh_generator(self.generator)
        if self.replacement:
            for start in range(0, self.num_samples, 32):
                count = min(32, self.num_samples - start)
                yield from kiln.randint(0, n, (count,), generator=g).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from kiln.randperm(n, generator=g).tolist()
        yield from kiln.randperm(n, generator=g).tolist()[: self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        g = _fresh_generator(self.generator)
        for i in kiln.randperm(len(self.indices), generator=g).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probability proportional to `weights`."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(
                "[WeightedRandomSampler] num_samples should be a positive integer value, but got "
                f"num_samples={num_samples!r}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                "[WeightedRandomSampler] replacement should be a boolean value, but got "
                f"replacement={replacement!r}"
            )
        weights = kiln.tensor(weights, dtype=kiln.float64) if not isinstance(
            weights, kiln.Tensor) else weights.to(kiln.float64)
        if weights.dim() != 1:
            raise ValueError(
                "[WeightedRandomSampler] weights should be a 1-d sequence, but got weights of "
                f"shape {list(weights.shape)}"
            )
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        drawn = kiln.multinomial(self.weights, self.num_samples, self.replacement,
                                 generator=self.generator)
        return iter(drawn.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of `batch_size`."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                "[BatchSampler] batch_size should be a positive integer value, but got "
                f"batch_size={batch_size!r}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(
                "[BatchSampler] drop_last should be a boolean value, but got "
                f"drop_last={drop_last!r}"
            )
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
