"""Products and reductions with sparse COO operands, as compositions of dense kiln ops
(Note [Sparse COO tensors] in _coo.py)."""

import kiln
from kiln.sparse._coo import SparseTensor, _fail, _linear_index


def _check_sparse(op, s):
    if not isinstance(s, SparseTensor):
        _fail(op, f"expected a sparse COO tensor, got {type(s).__name__}", TypeError)


def _check_matrix(op, s):
    _check_sparse(op, s)
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


def mm(mat1, mat2, reduce="sum", *, _op="mm"):
    """sparse @ dense or dense @ sparse → dense; sparse @ sparse → sparse (kiln.mm,
    kiln.sparse.mm, kiln.spmm)."""
    if reduce != "sum":
        _fail("sparse.mm", f"reduce={reduce!r} is not supported; only 'sum' is",
              NotImplementedError)
    if isinstance(mat1, SparseTensor):
        if isinstance(mat2, SparseTensor):
            # Through a dense copy of mat2 (k×n): simple and differentiable in both
            # operands' values, not a sparse-sparse kernel.
            _check_matrix(_op, mat2)
            return _sparse_dense_mm(_op, mat1, mat2.to_dense()).to_sparse()
        return _sparse_dense_mm(_op, mat1, mat2)
    if not kiln.is_tensor(mat1) or mat1.dim() != 2:
        _fail(_op, "expected a 2-D dense Tensor as the first operand", TypeError)
    _check_matrix(_op, mat2)
    if mat1.shape[1] != mat2.shape[0]:
        _fail(_op, f"dense matrix of shape {tuple(mat1.shape)} and sparse matrix of shape "
                   f"{tuple(mat2.shape)} cannot be multiplied ({mat1.shape[1]} != "
                   f"{mat2.shape[0]})")
    # d @ s = (sᵀ @ dᵀ)ᵀ
    return _sparse_dense_mm(_op, mat2.t(), mat1.t()).t()


def matmul(input, other):
    """kiln.matmul with a sparse operand: matrix @ matrix and matrix @ vector."""
    if isinstance(input, SparseTensor) and kiln.is_tensor(other) and other.dim() == 1:
        return mm(input, other.unsqueeze(1), _op="matmul").squeeze(1)
    if isinstance(other, SparseTensor) and kiln.is_tensor(input) and input.dim() == 1:
        return mm(input.unsqueeze(0), other, _op="matmul").squeeze(0)
    return mm(input, other, _op="matmul")


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2) with a sparse mat1; beta=0 ignores input."""
    product = mm(mat1, mat2, _op="addmm")
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input * beta if beta != 1 else input)


def hspmm(mat1, mat2):
    """sparse @ dense as a hybrid sparse tensor: one dense row per nonempty row of mat1."""
    _check_sparse("hspmm", mat1)
    product = mm(mat1, mat2, _op="hspmm")
    rows = kiln.unique(mat1._indices()[0], sorted=True)
    return SparseTensor(rows.unsqueeze(0), product.index_select(0, rows), product.shape, True)


def sum(input, dim=None, dtype=None):
    """kiln.sparse.sum: a 0-d dense tensor without dim; with dim, a sparse tensor over the
    remaining sparse dims, or a dense one when every sparse dim is summed."""
    _check_sparse("sparse.sum", input)
    values = input._values() if dtype is None else input._values().to(dtype)
    if dim is None:
        return values.sum()
    if not isinstance(dim, (int, tuple, list)):
        _fail("sparse.sum", f"dim must be an int or a sequence of ints, got "
                            f"{type(dim).__name__}", TypeError)
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


def _softmax(input, dim, dtype, log):
    op = "sparse.log_softmax" if log else "sparse.softmax"
    _check_sparse(op, input)
    s = input.coalesce()
    values = s._values() if dtype is None else s._values().to(dtype)
    if not values.is_floating_point():
        _fail(op, f"expected a floating-point tensor, got {values.dtype}")
    d = s._wrap_dim(dim, op)
    nsparse = s.sparse_dim()
    if d >= nsparse:  # a dense dim: every stored slice on its own
        dense_dim = d - nsparse + 1
        out = values.log_softmax(dense_dim) if log else values.softmax(dense_dim)
        return s._with_values(out)
    # Entries that differ only in index d form one group; unstored entries count as -inf,
    # so each group is softmaxed over its stored entries only.
    others = [k for k in range(nsparse) if k != d]
    sizes = [s.shape[k] for k in others]
    indices = s._indices().index_select(0, kiln.tensor(others, dtype=kiln.int64,
                                                       device=s.device))
    _, group = kiln.unique(_linear_index(indices, sizes), sorted=True, return_inverse=True)
    ngroups = int(group.max().item()) + 1 if group.numel() else 0
    shape = (ngroups,) + tuple(values.shape[1:])
    expanded = group.reshape((-1,) + (1,) * (values.dim() - 1)).expand(*values.shape)
    # Shifting by each group's max changes no result (so it needs no gradient) and keeps
    # exp finite.
    peak = kiln.full(shape, float("-inf"), dtype=values.dtype, device=values.device)
    peak = peak.scatter_reduce(0, expanded, values.detach(), "amax")
    shifted = values - peak.index_select(0, group)
    total = kiln.zeros(shape, dtype=values.dtype, device=values.device)
    total = total.index_add(0, group, shifted.exp()).index_select(0, group)
    out = shifted - total.log() if log else shifted.exp() / total
    return s._with_values(out)


def softmax(input, dim, *, dtype=None):
    """kiln.sparse.softmax: softmax over the stored entries along dim (unstored ones are
    -inf, not 0), with the coalesced input's pattern."""
    return _softmax(input, dim, dtype, log=False)


def log_softmax(input, dim, *, dtype=None):
    return _softmax(input, dim, dtype, log=True)
