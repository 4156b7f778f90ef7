"""kiln.utils: data loading (kiln.utils.data) and activation checkpointing
(kiln.utils.checkpoint)."""

from kiln.utils import checkpoint, data  # noqa: F401
