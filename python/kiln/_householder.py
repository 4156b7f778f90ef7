"""LAPACK's compact QR: geqrf, orgqr (linalg.householder_product) and ormqr, batched,
in kiln ops.

geqrf returns R on and above the diagonal and, below it, the Householder vectors
v_k (with an implicit leading 1), plus the scalars tau_k, so that
Q = H_0 H_1 ... H_{k-1} with H_k = I - tau_k v_k v_k^T (dgeqrf's convention,
beta = -sign(alpha) ||x||, so results match LAPACK's and PyTorch's). Like LU
(Note [LU in kiln ops]) each column step rebuilds the matrix with cat instead of
writing in place, so every step differentiates as ordinary kiln ops.
"""

from kiln import _C
from kiln._C import Tensor
from kiln._return_types import named

__all__ = ["geqrf", "orgqr", "ormqr"]


def _check(A, op):
    if not isinstance(A, Tensor):
        raise TypeError(f"[{op}] argument 'input' must be Tensor, not {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError(f"[{op}] input must have at least 2 dimensions.")
    if not A.is_floating_point():
        raise RuntimeError(f"[{op}] expected a floating point tensor, got {A.dtype}")


def geqrf(input):
    """(a, tau): the QR factorization of input in LAPACK's compact form."""
    _check(input, "geqrf")
    m, n = input.shape[-2], input.shape[-1]
    A = input
    taus = []
    for k in range(min(m, n)):
        alpha = A[..., k:k + 1, k:k + 1]
        tail = A[..., k + 1:, k:k + 1]
        tail_norm = _C.linalg.vector_norm(tail, 2, (-2, -1), keepdim=True) if m > k + 1 \
            else _C.zeros_like(alpha)
        reflect = tail_norm.detach() != 0
        norm = _C.sqrt(alpha * alpha + tail_norm * tail_norm)
        beta = _C.where(alpha.detach() >= 0, -norm, norm)
        safe_beta = _C.where(reflect, beta, _C.ones_like(beta))
        tau = _C.where(reflect, (beta - alpha) / safe_beta, _C.zeros_like(beta))
        denominator = _C.where(reflect, alpha - beta, _C.ones_like(alpha))
        v_tail = _C.where(reflect, tail / denominator, tail)
        diag = _C.where(reflect, beta, alpha)
        v = _C.cat([_C.ones_like(alpha), v_tail], -2)  # [.., m - k, 1]
        right = A[..., k:, k + 1:]
        right = right - tau * v * (v.transpose(-2, -1) @ right)
        column = _C.cat([A[..., :k, k:k + 1], diag, v_tail], -2)
        A = _C.cat([A[..., :, :k], column, _C.cat([A[..., :k, k + 1:], right], -2)], -1)
        taus.append(tau.reshape(tau.shape[:-2]))
    tau = _C.stack(taus, -1) if taus else _C.zeros(input.shape[:-2] + (0,),
                                                   dtype=input.dtype, device=input.device)
    return named("geqrf", ("a", "tau"), (A, tau))


def _apply_reflectors(A, tau, Q, reverse):
    """Q after H_i Q for each reflector (i = k-1 .. 0 when reverse, else 0 .. k-1)."""
    order = range(tau.shape[-1] - 1, -1, -1) if reverse else range(tau.shape[-1])
    for i in order:
        v = _C.cat([_C.ones_like(A[..., i:i + 1, i:i + 1]), A[..., i + 1:, i:i + 1]], -2)
        v = _C.cat([_C.zeros_like(A[..., :i, i:i + 1]), v], -2) if i else v
        t = tau[..., i:i + 1].unsqueeze(-1)
        Q = Q - t * v * (v.transpose(-2, -1) @ Q)
    return Q


def orgqr(input, tau):
    """The first n columns of Q = H_0 ... H_{k-1} (torch.linalg.householder_product)."""
    _check(input, "orgqr")
    m, n = input.shape[-2], input.shape[-1]
    if tau.shape[-1] > n:
        raise RuntimeError(f"[orgqr] input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1], got {n} and {tau.shape[-1]}")
    if n > m:
        raise RuntimeError(f"[orgqr] input.shape[-2] must be greater than or equal to "
                           f"input.shape[-1], got {m} and {n}")
    eye = _C.eye(m, n, dtype=input.dtype, device=input.device).expand(input.shape)
    return _apply_reflectors(input, tau, eye, reverse=True)


def ormqr(input, tau, other, left=True, transpose=False):
    """Q @ other, Q^T @ other, other @ Q or other @ Q^T, with the full m x m Q of geqrf."""
    _check(input, "ormqr")
    m = input.shape[-2]
    eye = _C.eye(m, dtype=input.dtype, device=input.device).expand(
        input.shape[:-2] + (m, m))
    Q = _apply_reflectors(input, tau, eye, reverse=True)
    Q = Q.transpose(-2, -1) if transpose else Q
    return Q @ other if left else other @ Q


def install():
    for name in __all__:
        setattr(Tensor, name, globals()[name])
    _C.linalg.householder_product = orgqr
