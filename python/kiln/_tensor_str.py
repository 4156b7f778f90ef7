"""repr(tensor), formatted like PyTorch's: tensor([[1., 2.], [3., 4.]])."""

import numpy as np

_INDENT = len("tensor(")


def _format_values(arr):
    """Formats a float/int/bool ndarray elementwise, PyTorch-style."""
    if arr.dtype == np.bool_:
        return np.vectorize(lambda v: "True" if v else "False", otypes=[object])(arr)
    if np.issubdtype(arr.dtype, np.integer):
        return np.vectorize(lambda v: str(int(v)), otypes=[object])(arr)
    finite = arr[np.isfinite(arr)]
    ints = finite.size == 0 or np.all(finite == np.round(finite))
    big = finite.size and (np.abs(finite).max() >= 1e8 or
                           (np.abs(finite[finite != 0]).min() < 1e-4 if np.any(finite != 0) else False))

    def fmt(v):
        if np.isnan(v):
            return "nan"
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        if big:
            return f"{v:.4e}"
        if ints:
            return f"{v:.0f}."
        return f"{v:.4f}"

    return np.vectorize(fmt, otypes=[object])(arr.astype(np.float64))


def _render(strs, depth, width):
    if strs.ndim == 0:
        return strs.item().rjust(width)
    if strs.ndim == 1:
        return "[" + ", ".join(s.rjust(width) for s in strs) + "]"
    sep = "," + "\n" * (strs.ndim - 1) + " " * (_INDENT + depth + 1)
    return "[" + sep.join(_render(s, depth + 1, width) for s in strs) + "]"


def tensor_repr(t):
    import kiln

    data = t.detach()
    if data.device.type != "cpu":
        data = data.cpu()
    if data.dtype in (kiln.bfloat16, kiln.float16):
        data = data.float()
    arr = data.numpy()
    suffix = []
    if t.device.type != "cpu":
        suffix.append(f"device='{t.device}'")
    default_dtypes = (kiln.float32, kiln.int64, kiln.bool)
    if t.numel() == 0:
        body = "[]"
        if t.dim() != 1:
            suffix.insert(0, f"size={tuple(t.shape)}")
        if t.dtype != kiln.float32:
            suffix.append(f"dtype={t.dtype}")
    else:
        strs = _format_values(arr)
        width = max(len(s) for s in strs.flat)
        body = _render(strs, 0, width)
        if t.dtype not in default_dtypes:
            suffix.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        suffix.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffix.append("requires_grad=True")
    return "tensor(" + ", ".join([body] + suffix) + ")"
