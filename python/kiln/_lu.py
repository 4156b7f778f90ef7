"""LU factorization with partial pivoting (torch.lu, lu_unpack, lu_solve and
torch.linalg.lu_factor / lu_factor_ex / lu / lu_solve), batched, in kiln ops.

Note [LU in kiln ops]: Doolittle elimination, one column per step: pick the row
with the largest |value| in the column (argmax, batched), swap it up with a
gather, and rebuild the matrix from slices with cat instead of writing in place.
That is n small launches per step on any device, and every step is an ordinary
differentiable op, so gradients (and double backward) need no rule of their own.
Pivots follow LAPACK: 1-based, pivots[i] is the row swapped with row i. A zero
pivot leaves its column unscaled and is reported in `info`, as LAPACK does.
"""

import warnings

from kiln import _C
from kiln._C import Tensor
from kiln._return_types import named

__all__ = ["lu", "lu_unpack", "lu_solve"]


def _check_matrix(A, op):
    if not isinstance(A, Tensor):
        raise TypeError(f"[{op}] argument 'A' must be Tensor, not {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError(f"[{op}] The input tensor A must have at least 2 dimensions.")
    if not A.is_floating_point():
        raise RuntimeError(f"[{op}] Expected a floating point tensor, got {A.dtype}")


def _swap_rows(M, k, p):
    """M with row k and row p (a batch of row numbers) exchanged."""
    rows = _C.arange(M.shape[-2], device=M.device).expand(*p.shape, M.shape[-2])
    p = p.unsqueeze(-1)
    index = _C.where(rows == k, p, _C.where(rows == p, _C.full_like(rows, k), rows))
    return M.gather(-2, index.unsqueeze(-1).expand(M.shape))


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info) of A = P L U (Note [LU in kiln ops])."""
    _check_matrix(A, "linalg.lu_factor_ex")
    if not pivot:
        raise NotImplementedError("[linalg.lu_factor_ex] LU without pivoting is not "
                                  "implemented on the CPU (PyTorch: CUDA only)")
    m, n = A.shape[-2], A.shape[-1]
    batch = tuple(A.shape[:-2])
    LU = A
    pivots = []
    info = _C.zeros(batch, dtype=_C.int32, device=A.device)
    for k in range(min(m, n)):
        p = LU[..., k:, k].detach().abs().argmax(-1) + k
        LU = _swap_rows(LU, k, p)
        pivots.append((p + 1).to(_C.int32))
        head = LU[..., k:k + 1, k:k + 1]
        singular = head.detach() == 0
        info = _C.where((info == 0) & singular.reshape(batch),
                        _C.full_like(info, k + 1), info)
        if k + 1 == m:
            break
        below = LU[..., k + 1:, :]
        factors = below[..., k:k + 1] / _C.where(singular, _C.ones_like(head), head)
        right = below[..., k + 1:] - factors * LU[..., k:k + 1, k + 1:]
        LU = _C.cat([LU[..., :k + 1, :], _C.cat([below[..., :k], factors, right], -1)], -2)
    pivots = _C.stack(pivots, -1) if pivots else _C.zeros(batch + (0,), dtype=_C.int32,
                                                          device=A.device)
    if check_errors and bool((info > 0).any()):
        raise _C.linalg.LinAlgError(f"[linalg.lu_factor_ex] U[{int(info.max()) - 1}, "
                                    f"{int(info.max()) - 1}] is zero, singular U.")
    return named("linalg_lu_factor_ex", ("LU", "pivots", "info"), (LU, pivots, info))


def lu_factor(A, *, pivot=True):
    LU, pivots, _ = lu_factor_ex(A, pivot=pivot)
    return named("linalg_lu_factor", ("LU", "pivots"), (LU, pivots))


def _permutation(pivots, m):
    """perm with A[perm] = L U: the LAPACK row swaps applied in order to 0..m-1."""
    perm = _C.arange(m, device=pivots.device).expand(*pivots.shape[:-1], m)
    for i in range(pivots.shape[-1]):
        perm = _swap_rows(perm.unsqueeze(-1), i, pivots[..., i].to(_C.int64) - 1).squeeze(-1)
    return perm


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) with A = P @ L @ U from lu's output."""
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    P = L = U = _C.empty(0, dtype=LU_data.dtype, device=LU_data.device)
    if unpack_data:
        eye = _C.eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
        L = LU_data[..., :, :k].tril(-1) + eye
        U = LU_data[..., :k, :].triu()
    if unpack_pivots:
        perm = _permutation(LU_pivots, m)
        rows = _C.arange(m, device=LU_data.device)
        # P[r, i] = 1 where r == perm[i].
        P = (rows.unsqueeze(-1) == perm.unsqueeze(-2)).to(LU_data.dtype)
    return named("lu_unpack", ("P", "L", "U"), (P, L, U))


def lu_solve(b, LU_data, LU_pivots):
    """x with A x = b, from A's LU factorization (torch.lu_solve's argument order)."""
    P, L, U = lu_unpack(LU_data, LU_pivots)
    y = _C.linalg.solve_triangular(L, P.transpose(-2, -1) @ b, upper=False,
                                   unitriangular=True)
    return _C.linalg.solve_triangular(U, y, upper=True)


def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    if adjoint or not left:
        raise NotImplementedError("[linalg.lu_solve] only left=True, adjoint=False")
    return lu_solve(B, LU, pivots)


def linalg_lu(A, *, pivot=True):
    LU, pivots = lu_factor(A, pivot=pivot)
    P, L, U = lu_unpack(LU, pivots)
    return named("linalg_lu", ("P", "L", "U"), (P, L, U))


def lu(A, pivot=True, get_infos=False, out=None):
    """torch.lu / Tensor.lu: (LU, pivots) or, with get_infos, (LU, pivots, infos)."""
    warnings.warn("torch.lu is deprecated in favor of torch.linalg.lu_factor / "
                  "torch.linalg.lu_factor_ex and will be removed in a future PyTorch release.",
                  UserWarning, stacklevel=2)
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def install():
    Tensor.lu = lu
    Tensor.lu_solve = lu_solve
    linalg = _C.linalg
    linalg.lu_factor = lu_factor
    linalg.lu_factor_ex = lu_factor_ex
    linalg.lu = linalg_lu
    linalg.lu_solve = linalg_lu_solve
