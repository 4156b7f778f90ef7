"""kiln.sparse: PyTorch's torch.sparse for COO tensors (Note [Sparse COO tensors] in _coo.py).

Loaded on first use (kiln.sparse, kiln.sparse_coo_tensor, Tensor.to_sparse()), not by
import kiln.
"""

from kiln.sparse._coo import (  # noqa: F401
    SparseTensor,
    check_sparse_tensor_invariants,
    sparse_coo_tensor,
)
from kiln.sparse._ops import addmm, hspmm, log_softmax, matmul, mm, softmax, sum  # noqa: F401,A004

spmm = mm  # torch.spmm

__all__ = ["SparseTensor", "addmm", "check_sparse_tensor_invariants", "hspmm", "log_softmax",
           "mm", "softmax", "sum"]
