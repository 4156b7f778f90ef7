"""kiln.Size: the type of Tensor.shape, a tuple of ints like torch.Size."""


class Size(tuple):
    def __repr__(self):
        return f"kiln.Size({list(self)})"

    __str__ = __repr__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):
        r = super().__getitem__(key)
        return Size(r) if isinstance(key, slice) else r
