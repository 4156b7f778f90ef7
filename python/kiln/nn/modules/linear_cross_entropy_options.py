"""LinearCrossEntropyOptions: how F.linear_cross_entropy splits the batch into chunks."""

__all__ = ["LinearCrossEntropyOptions"]

_ACC_POLICIES = ("auto", "accurate", "compact")


class LinearCrossEntropyOptions:
    """PyTorch's options for the chunked linear_cross_entropy: passing an instance (instead of
    None) asks for the batch to be processed in chunks, so the full (N, num_classes) logits
    never exist at once.

    batch_chunk_size: rows per chunk (None: from chunking_method). chunking_method: "auto" or
    "aspect_ratio[:k]" (a chunk's logits about as large as the input, divided by k), or None.
    acc_policy / acc_dtype are validated and recorded; kiln computes each chunk in the input's
    dtype. allow_retain_graph: kiln's chunked backward always allows retain_graph.

    Immutable, compared by value, like PyTorch's frozen dataclass (written out by hand: the
    dataclasses module would add to every `import kiln`)."""

    _FIELDS = ("allow_retain_graph", "batch_chunk_size", "chunking_method", "acc_policy",
               "acc_dtype")

    def __init__(self, allow_retain_graph=False, batch_chunk_size=None, chunking_method="auto",
                 acc_policy="auto", acc_dtype=None):
        values = (allow_retain_graph, batch_chunk_size, chunking_method, acc_policy, acc_dtype)
        for name, value in zip(self._FIELDS, values):
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __setattr__(self, name, value):
        raise AttributeError(f"[LinearCrossEntropyOptions] cannot assign to field '{name}'")

    def __eq__(self, other):
        return type(other) is type(self) and all(
            getattr(self, f) == getattr(other, f) for f in self._FIELDS)

    def __hash__(self):
        return hash(tuple(getattr(self, f) for f in self._FIELDS))

    def __repr__(self):
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS)
        return f"LinearCrossEntropyOptions({fields})"

    def __post_init__(self):
        import kiln

        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"[LinearCrossEntropyOptions] invalid acc_policy: "
                             f"{self.acc_policy!r}; expected one of "
                             f"{', '.join(map(repr, _ACC_POLICIES))}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = self.chunking_method.partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"[LinearCrossEntropyOptions] invalid chunking_method: "
                                 f"{self.chunking_method!r}")
        if not (self.batch_chunk_size is None
                or (isinstance(self.batch_chunk_size, int) and self.batch_chunk_size > 0)):
            raise ValueError(f"[LinearCrossEntropyOptions] batch_chunk_size must be positive int "
                             f"or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in (
                kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64):
            raise ValueError(f"[LinearCrossEntropyOptions] acc_dtype must be one of {{None, "
                             f"kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64}}, got "
                             f"{self.acc_dtype!r}")

    def chunk_rows(self, num_batches, in_features, num_classes):
        """Rows per chunk for an (num_batches, in_features) input and num_classes logits."""
        if self.batch_chunk_size is not None:
            return self.batch_chunk_size
        factor = 1
        if self.chunking_method not in (None, "auto"):
            factor = int(self.chunking_method.partition(":")[2] or 1)
        if self.chunking_method is None:
            return num_batches
        # aspect ratio: a chunk's logits about the size of the whole input, as a power of two.
        ratio = -(-num_classes // max(in_features, 1))
        rows = max(1, -(-num_batches // ratio) // factor)
        return 1 << (rows - 1).bit_length()
