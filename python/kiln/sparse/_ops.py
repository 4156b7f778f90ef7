"""Products and reductions with sparse COO operands, as compositions of dense kiln ops
(Note [Sparse COO tensors] in _coo.py)."""

import kiln
from kiln.sparse._coo import SparseTensor, _fail


def _check_matrix(op, s):
    if s.sparse_dim() != 2 or s.dense_dim() != 0:
        _fail(op, f"expects a 2-D sparse matrix (sparse_dim 2, dense_dim 0), got sparse_dim "
                  f"{s.sparse_dim()} and dense_dim {s.dense_dim()} (size {tuple(s.shape)})")


def _sparse_dense_mm(op, s, d):
    """s (sparse m×k) @ d (dense k×n) → dense m×n: out[i] += v * d[j] for each entry (i, j, v).
    Gradients reach s's values (through the gathered rows) and d (through index_select)."""
    _check_matrix(op, s)
    if not kiln.is_tensor(d):
        _fail(op, f"expected a dense Tensor as the second operand, got {type(d).__name__}",
              TypeError)
    if d.dim() != 2:
        _fail(op, f"expected a 2-D dense matrix, got a {d.dim()}-D tensor of shape "
                  f"{tuple(d.shape)}")
    m, k = s.shape
    if d.shape[0] != k:
        _fail(op, f"sparse matrix of shape {tuple(s.shape)} and dense matrix of shape "
                  f"{tuple(d.shape)} cannot be multiplied ({k} != {d.shape[0]})")
    if d.dtype != s.dtype:
        _fail(op, f"expected both operands to have the same dtype, got {s.dtype} (sparse) and "
                  f"{d.dtype} (dense)")
    if d.device != s.device:
        _fail(op, f"expected both operands on the same device, got {s.device} (sparse) and "
                  f"{d.device} (dense)")
    rows, cols = s._indices()[0], s._indices()[1]
    contributions = d.index_select(0, cols) * s._values().unsqueeze(1)
    out = kiln.zeros((m, d.shape[1]), dtype=d.dtype, device=d.device)
    return out.index_add(0, rows, contributions)


def mm(mat1, mat2):
    """sparse @ dense or dense @ sparse → dense (kiln.mm, kiln.sparse.mm, kiln.spmm)."""
    if isinstance(mat1, SparseTensor):
        if isinstance(mat2, SparseTensor):
            _fail("mm", "sparse @ sparse is not supported; convert one operand with .to_dense()",
                  NotImplementedError)
        return _sparse_dense_mm("mm", mat1, mat2)
    if not kiln.is_tensor(mat1) or mat1.dim() != 2:
        _fail("mm", "expected a 2-D dense Tensor as the first operand", TypeError)
    _check_matrix("mm", mat2)
    # d @ s = (sᵀ @ dᵀ)ᵀ
    return _sparse_dense_mm("mm", mat2.t(), mat1.t()).t()


def matmul(input, other):
    """kiln.matmul with a sparse operand: matrix @ matrix and matrix @ vector."""
    if isinstance(input, SparseTensor) and kiln.is_tensor(other) and other.dim() == 1:
        return mm(input, other.unsqueeze(1)).squeeze(1)
    if isinstance(other, SparseTensor) and kiln.is_tensor(input) and input.dim() == 1:
        return mm(input.unsqueeze(0), other).squeeze(0)
    return mm(input, other)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2) with a sparse mat1; beta=0 ignores input."""
    product = mm(mat1, mat2)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input * beta if beta != 1 else input)


def hspmm(mat1, mat2):
    """sparse @ dense as a hybrid sparse tensor: one dense row per nonempty row of mat1."""
    product = mm(mat1, mat2)
    rows = kiln.unique(mat1._indices()[0], sorted=True)
    return SparseTensor(rows.unsqueeze(0), product.index_select(0, rows), product.shape, True)


def sum(input, dim=None, dtype=None):
    """kiln.sparse.sum: a 0-d dense tensor without dim; with dim, a sparse tensor over the
    remaining sparse dims, or a dense one when every sparse dim is summed."""
    values = input._values() if dtype is None else input._values().to(dtype)
    if dim is None:
        return values.sum()
    dims = [dim] if isinstance(dim, int) else list(dim)
    dims = sorted({input._wrap_dim(d, "sparse.sum") for d in dims})
    nsparse = input.sparse_dim()
    sparse_dims = [d for d in dims if d < nsparse]
    dense_dims = [d - nsparse + 1 for d in dims if d >= nsparse]
    if dense_dims:
        values = values.sum(dim=dense_dims)
    keep = [d for d in range(nsparse) if d not in sparse_dims]
    size = [input.shape[d] for d in range(input.dim()) if d not in dims]
    if not keep:
        return values.sum(dim=0)
    indices = input._indices().index_select(0, kiln.tensor(keep, device=input.device))
    return SparseTensor(indices, values, size, False).coalesce()
