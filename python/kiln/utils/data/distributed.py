"""DistributedSampler: each of num_replicas processes reads its own share of a dataset.

The index assignment follows torch.utils.data.distributed.DistributedSampler:
the (optionally shuffled) index list is padded with its own leading indices to a
multiple of num_replicas (or cut down to one with drop_last), and replica r takes
every num_replicas-th index starting at r. Shuffling draws from a kiln.Generator
seeded with seed + epoch, so every replica sees the same permutation in an epoch
(kiln's permutation for a seed differs from PyTorch's: the Philox streams differ).
"""

import math

import kiln
from kiln.utils.data.sampler import Sampler


def _process_group_value(name, getter):
    try:
        import kiln.distributed as dist
    except ImportError:
        raise RuntimeError(
            f"[DistributedSampler] {name} was not given and this kiln has no kiln.distributed "
            f"package to read it from; pass num_replicas and rank explicitly") from None
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            f"[DistributedSampler] {name} was not given and the default process group has not "
            "been initialized (kiln.distributed.init_process_group); pass num_replicas and rank")
    return getattr(dist, getter)()


class DistributedSampler(Sampler):
    """Indices of `dataset` for replica `rank` of `num_replicas`; call set_epoch(e) before
    each epoch when shuffling so the permutation changes between epochs."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None:
            num_replicas = _process_group_value("num_replicas", "get_world_size")
        if rank is None:
            rank = _process_group_value("rank", "get_rank")
        if num_replicas <= 0:
            raise ValueError(
                f"[DistributedSampler] num_replicas must be positive, got {num_replicas}")
        if rank < 0 or rank >= num_replicas:
            raise ValueError(f"[DistributedSampler] Invalid rank {rank}, rank should be in the "
                             f"interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # Every replica gets the same count, the tail that does not divide is dropped.
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = kiln.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = kiln.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[: self.total_size]
        else:
            pad = self.total_size - len(indices)
            if pad > 0:
                # Repeat the list as often as needed (more than once when n < num_replicas).
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        own = indices[self.rank : self.total_size : self.num_replicas]
        return iter(own)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Sets the epoch that seeds this epoch's shuffle (seed + epoch)."""
        self.epoch = epoch
