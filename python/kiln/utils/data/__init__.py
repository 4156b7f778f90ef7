"""Datasets, samplers and the DataLoader, with PyTorch's API (torch.utils.data)."""

from kiln.utils.data.collate import default_collate, default_convert  # noqa: F401
from kiln.utils.data.dataloader import DataLoader  # noqa: F401
from kiln.utils.data.distributed import DistributedSampler  # noqa: F401
from kiln.utils.data.dataset import (  # noqa: F401
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from kiln.utils.data.sampler import (  # noqa: F401
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from kiln.utils.data.worker import WorkerInfo, get_worker_info  # noqa: F401
