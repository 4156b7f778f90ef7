"""kiln.utils: data loading (kiln.utils.data), activation checkpointing
(kiln.utils.checkpoint) and DLPack exchange (kiln.utils.dlpack)."""

from kiln.utils import checkpoint, data, dlpack  # noqa: F401
