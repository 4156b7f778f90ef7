"""Top-level linear-algebra ops of PyTorch composed from kiln's matmul and norms:
vdot, tensordot, chain_matmul, renorm, matrix_exp and the legacy norm entry points.
Gradients come from the composed ops.
"""

import math
import warnings

from kiln import _C
from kiln._C import Tensor

__all__ = ["vdot", "tensordot", "chain_matmul", "renorm", "matrix_exp", "frobenius_norm",
           "nuclear_norm", "native_norm"]


def vdot(input, other):
    """The dot product of two 1-D tensors (no conjugation is needed for real dtypes)."""
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"[vdot] 1D tensors expected, but got {input.dim()}D and "
                           f"{other.dim()}D tensors")
    return _C.dot(input, other)


def tensordot(a, b, dims=2, out=None):
    """Contracts the last `dims` dims of a with the first `dims` of b, or the dims listed
    in dims = (dims_a, dims_b)."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"[tensordot] expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError("[tensordot] dims must be an int or a pair of dim lists")
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise RuntimeError(f"[tensordot] both dimension lists should have same length, got "
                           f"{len(dims_a)} and {len(dims_b)}")
    dims_a = [d % a.dim() for d in dims_a] if a.dim() else dims_a
    dims_b = [d % b.dim() for d in dims_b] if b.dim() else dims_b
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"[tensordot] contracted dimensions need to match, but first has "
                               f"size {a.shape[da]} in dim {da} and second has size "
                               f"{b.shape[db]} in dim {db}")
    free_a = [d for d in range(a.dim()) if d not in dims_a]
    free_b = [d for d in range(b.dim()) if d not in dims_b]
    k = math.prod(a.shape[d] for d in dims_a)
    left = a.permute(free_a + dims_a).reshape(-1, k)
    right = b.permute(dims_b + free_b).reshape(k, -1)
    result = (left @ right).reshape([a.shape[d] for d in free_a] + [b.shape[d] for d in free_b])
    return out.copy_(result) if out is not None else result


def chain_matmul(*matrices, out=None):
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                  "release. Use torch.linalg.multi_dot instead.", UserWarning, stacklevel=2)
    if not matrices:
        raise RuntimeError("[chain_matmul] chain_matmul(): Expected one or more matrices")
    result = matrices[0].clone() if len(matrices) == 1 else _C.linalg.multi_dot(list(matrices))
    return out.copy_(result) if out is not None else result


def renorm(input, p, dim, maxnorm):
    """Each slice along dim whose p-norm exceeds maxnorm is scaled to norm maxnorm."""
    if p <= 0:
        raise RuntimeError("[renorm] renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"[renorm] renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if not input.is_floating_point():
        raise RuntimeError(f"[renorm] renorm expects a floating point input, got {input.dtype}")
    dim = dim % max(input.dim(), 1)
    others = tuple(d for d in range(input.dim()) if d != dim)
    norms = _C.linalg.vector_norm(input, p, others, keepdim=True) if others else input.abs()
    factor = _C.where(norms > maxnorm, maxnorm / (norms + 1e-7), _C.ones_like(norms))
    return input * factor


def matrix_exp(input):
    """e**A of square matrices (batched): scaling and squaring with a degree-18 Taylor
    polynomial, whose remainder is below float64 precision once ||A / 2**s||_1 <= 1."""
    if input.dim() < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"[matrix_exp] matrix_exp: expected a tensor of square matrices, "
                           f"got shape {list(input.shape)}")
    if not input.is_floating_point():
        raise RuntimeError(f"[matrix_exp] expected a floating point tensor, got {input.dtype}")
    if input.numel() == 0:
        return input.clone()
    norm = float(input.detach().abs().sum(-2).amax())
    squarings = max(0, math.ceil(math.log2(norm))) if norm > 1 and math.isfinite(norm) else 0
    a = input / (2 ** squarings)
    eye = _C.eye(input.shape[-1], dtype=input.dtype, device=input.device).expand(input.shape)
    result, term = eye, eye
    for k in range(1, 19):
        term = term @ a / k
        result = result + term
    for _ in range(squarings):
        result = result @ result
    return result


def frobenius_norm(input, dim=(-2, -1), keepdim=False):
    return _C.linalg.vector_norm(input, 2, dim, keepdim)


def nuclear_norm(input, dim=None, keepdim=False):
    """nuclear_norm(input, keepdim=False) or nuclear_norm(input, dim, keepdim)."""
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    return _C.linalg.matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim)


def native_norm(input, p=2, dim=None, keepdim=False, dtype=None):
    return _C.linalg.vector_norm(input, 2 if p is None else p, dim, keepdim, dtype=dtype)


def install():
    for name in ("vdot", "renorm", "matrix_exp"):
        setattr(Tensor, name, globals()[name])
