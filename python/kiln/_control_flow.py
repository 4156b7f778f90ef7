"""torch.cond and torch.vmap, run eagerly: kiln has no graph capture, so cond calls
the branch the predicate picks and vmap maps the function over the batch dim in a
Python loop and stacks the results (same values and gradients, without the speed)."""

from kiln import _C
from kiln._C import Tensor

__all__ = ["cond", "vmap"]


def cond(pred, true_fn, false_fn, operands=()):
    """true_fn(*operands) if pred else false_fn(*operands); pred is a bool or a
    one-element tensor."""
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"[cond] Expected pred to be bool or single-element tensor, "
                               f"but got a tensor of shape {list(pred.shape)}")
        pred = bool(pred.item())
    elif not isinstance(pred, bool):
        raise RuntimeError(f"[cond] Expected pred to be bool or tensor, but got {pred!r}")
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError("[cond] operands must be a tuple or list of tensors")
    return (true_fn if pred else false_fn)(*operands)


def _per_arg(value, count, what):
    if isinstance(value, (tuple, list)):
        if len(value) != count:
            raise ValueError(f"[vmap] {what} has {len(value)} entries for {count} values")
        return list(value)
    return [value] * count


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over dim in_dims of its tensor arguments (None: not mapped)."""
    def mapped(*args):
        dims = _per_arg(in_dims, len(args), "in_dims")
        sizes = {a.shape[d] for a, d in zip(args, dims) if d is not None and
                 isinstance(a, Tensor)}
        if len(sizes) != 1:
            raise ValueError(f"[vmap] Expected all tensors to have the same size in the "
                             f"mapped dimension, got sizes {sorted(sizes)}" if sizes else
                             "[vmap] at least one argument must be mapped over")
        results = []
        for i in range(sizes.pop()):
            results.append(func(*[a.select(d, i) if d is not None and isinstance(a, Tensor)
                                  else a for a, d in zip(args, dims)]))
        if isinstance(results[0], Tensor):
            return _C.stack(results, out_dims if isinstance(out_dims, int) else out_dims[0])
        outs = _per_arg(out_dims, len(results[0]), "out_dims")
        return type(results[0])(_C.stack([r[k] for r in results], outs[k])
                                for k in range(len(results[0])))

    return mapped
