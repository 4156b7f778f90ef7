"""repr(tensor), formatted like PyTorch's: tensor([[1., 2.], [3., 4.]]), and the
print options (kiln.set_printoptions) that shape it."""

import contextlib
import math

_PREFIX = "tensor("


class _PrintOptions:
    # A plain class, not a dataclass: dataclasses costs import kiln ~10 ms (inspect).
    def __init__(self):
        self.precision = 4
        self.threshold = 1000
        self.edgeitems = 3
        self.linewidth = 80
        # None: each tensor picks scientific notation from its values' range.
        self.sci_mode = None


PRINT_OPTS = _PrintOptions()

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Sets how tensors print: digits after the point, the element count above which
    a tensor is summarized with '...', the elements kept at each edge of a summarized
    dimension, the characters per line, a preset ('default', 'short', 'full'), and
    scientific notation (True/False; None lets each tensor decide)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"[set_printoptions] profile must be one of 'default', 'short' or "
                             f"'full', got {profile!r}")
        for name, value in _PROFILES[profile].items():
            setattr(PRINT_OPTS, name, value)
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            setattr(PRINT_OPTS, name, value)
    # As in PyTorch, sci_mode is always written: omitting it returns to automatic.
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions():
    """The current print options, as keyword arguments of set_printoptions."""
    return dict(vars(PRINT_OPTS))


@contextlib.contextmanager
def printoptions(**kwargs):
    """set_printoptions for the duration of a with block."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """Formats the elements of one tensor to a common width, choosing integer-valued,
    fixed-point or scientific notation from the values that will be shown."""

    def __init__(self, shown):
        import numpy as np  # lazily: import kiln need not load NumPy (Note [Lazy submodules])

        self.kind = ("bool" if shown.dtype == np.bool_ else
                     "int" if np.issubdtype(shown.dtype, np.integer) else "float")
        self.int_mode = False
        self.sci_mode = False
        measured = shown.flat
        if self.kind == "float":
            values = shown.astype(np.float64)
            # As in PyTorch, zeros, infs and nans neither pick the notation nor the width.
            measured = values[np.isfinite(values) & (values != 0)]
            magnitudes = np.abs(measured)
            self.int_mode = bool(np.all(magnitudes == np.ceil(magnitudes)))
            if magnitudes.size:
                hi, lo = magnitudes.max(), magnitudes.min()
                self.sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or
                                     (not self.int_mode and lo < 1.0e-4))
            if PRINT_OPTS.sci_mode is not None:
                self.sci_mode = bool(PRINT_OPTS.sci_mode)
        self.width = max((len(self._plain(v)) for v in measured), default=1)

    def _plain(self, v):
        if self.kind == "bool":
            return "True" if v else "False"
        if self.kind == "int":
            return str(int(v))
        v = float(v)
        if self.sci_mode:
            return f"{v:.{PRINT_OPTS.precision}e}"
        if self.int_mode:
            return f"{v:.0f}" + ("." if math.isfinite(v) else "")
        return f"{v:.{PRINT_OPTS.precision}f}"

    def format(self, v):
        return self._plain(v).rjust(self.width)


def _summarized(arr, edge):
    """The elements a summarized print shows: `edge` at each end of every long dimension."""
    if arr.ndim == 0:
        return arr
    import numpy as np

    if arr.shape[0] > 2 * edge:
        arr = np.concatenate([arr[:edge], arr[-edge:]])
    if arr.ndim == 1:
        return arr
    return np.stack([_summarized(a, edge) for a in arr])


def _render(arr, fmt, indent, summarize):
    if arr.ndim == 0:
        return fmt.format(arr.item())
    edge = PRINT_OPTS.edgeitems
    cut = summarize and arr.shape[0] > 2 * edge
    head, tail = (arr[:edge], arr[-edge:]) if cut else (arr, arr[:0])
    if arr.ndim == 1:
        items = [fmt.format(v) for v in head]
        if cut:
            items += [" ..."] + [fmt.format(v) for v in tail]
        per_line = max(1, (PRINT_OPTS.linewidth - indent) // (fmt.width + 2))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = [_render(a, fmt, indent + 1, summarize) for a in head]
    if cut:
        rows += ["..."] + [_render(a, fmt, indent + 1, summarize) for a in tail]
    return "[" + ("," + "\n" * (arr.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _add_suffixes(text, suffixes):
    # A suffix that would overflow the line starts a new one, aligned under the data.
    indent = len(_PREFIX)
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > PRINT_OPTS.linewidth:
            text += ",\n" + " " * indent + suffix
            last_line = indent + len(suffix)
        else:
            text += ", " + suffix
            last_line += len(suffix) + 2
    return text + ")"


def tensor_repr(t):
    import kiln

    data = t.detach()
    if data.device.type != "cpu":
        data = data.cpu()
    if data.dtype in (kiln.bfloat16, kiln.float16):
        data = data.float()
    arr = data.numpy()
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    default = kiln.get_default_dtype()
    if t.numel() == 0:
        body = "[]"
        if t.dim() != 1:
            suffixes.insert(0, f"size={tuple(t.shape)}")
        if t.dtype != default:
            suffixes.append(f"dtype={t.dtype}")
    else:
        summarize = t.numel() > PRINT_OPTS.threshold
        shown = _summarized(arr, PRINT_OPTS.edgeitems) if summarize else arr
        body = _render(arr, _Formatter(shown), len(_PREFIX), summarize)
        if t.dtype not in (default, kiln.int64, kiln.bool):
            suffixes.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(_PREFIX + body, suffixes)
