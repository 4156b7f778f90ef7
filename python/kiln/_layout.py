"""kiln.layout and its values (kiln.strided, kiln.sparse_coo, ...), and the dense
Tensor's side of the sparse API: .layout, .is_sparse, .to_sparse(), .to_dense().

Kept tiny because import kiln loads it; the sparse implementation itself
(kiln.sparse) loads on first use (Note [Lazy submodules] in kiln/__init__.py).
"""

from kiln._C import Tensor


class layout:
    """A tensor's memory layout; compare with `is` or `==` (one object per layout)."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"kiln.{self._name}"

    def __reduce__(self):  # pickles by name, so unpickling finds the same object
        return self._name


layout.__module__ = "kiln"

# PyTorch's layouts. kiln has tensors of the first two; the rest exist so that
# programs comparing against them (x.layout == torch.sparse_csr) run.
strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
_mkldnn = layout("_mkldnn")
jagged = layout("jagged")

LAYOUTS = {
    "layout": layout, "strided": strided, "sparse_coo": sparse_coo, "sparse_csr": sparse_csr,
    "sparse_csc": sparse_csc, "sparse_bsr": sparse_bsr, "sparse_bsc": sparse_bsc,
    "_mkldnn": _mkldnn, "jagged": jagged,
}


def _to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    from kiln.sparse._coo import dense_to_sparse

    return dense_to_sparse(self, sparse_dim, layout, blocksize, dense_dim)


def _to_sparse_coo(self, sparse_dim=None):
    from kiln.sparse._coo import dense_to_sparse

    return dense_to_sparse(self, sparse_dim, None, None, None)


def _to_dense(self, dtype=None, *, masked_grad=None):
    return self if dtype is None else self.to(dtype)


def _needs_sparse(name):
    def method(self, *args, **kwargs):
        raise RuntimeError(f"[Tensor.{name}] expected a sparse COO tensor, got a strided one "
                           "(convert with .to_sparse())")

    method.__name__ = name
    return method


Tensor.layout = property(lambda self: strided)
Tensor.is_sparse = property(lambda self: False)
Tensor.is_sparse_csr = property(lambda self: False)
Tensor.to_sparse = _to_sparse
Tensor.to_sparse_coo = _to_sparse_coo
Tensor.to_dense = _to_dense
Tensor.sparse_dim = lambda self: 0
Tensor.dense_dim = lambda self: self.dim()
for _name in ("coalesce", "is_coalesced", "indices", "values", "_indices", "_values", "_nnz"):
    setattr(Tensor, _name, _needs_sparse(_name))
