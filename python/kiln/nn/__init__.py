"""kiln.nn: modules arrive with the training API; functional ops are here now."""

from kiln.nn import functional  # noqa: F401
