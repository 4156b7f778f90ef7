"""Dynamic dimensions: Dim, the dynamic_shapes argument, and turning the sizes a trace
recorded into expressions over the dims (Note [Symbolic sizes])."""

import itertools
import keyword

_INT64_MAX = 2**63 - 1

# Note [Symbolic sizes]
# The trace runs once, at the sample sizes, so every size an op received is a plain int. The
# size arguments of the ops below are where a dynamic dim reaches the graph (x.view(B, T, C),
# arange(T), x[:, :T]); each int there that equals a dynamic dim's sample value becomes that
# dim's name, and one that equals the product of two dims' samples becomes "a*b". This is
# value matching, so export() refuses sample sizes that could be confused with the model's
# fixed sizes: a sample below 2, two dims with one sample value, or a sample equal to a
# static input size or to any parameter or buffer size. Other int arguments (dims, split
# sizes, kernel sizes) are never symbolic.
SIZE_ARGS = {
    "view": (1,),
    "reshape": (1,),
    "expand": (1,),
    "arange": (0, 1, 2),
    "slice": (2, 3),
    "narrow": (2, 3),
    "unflatten": (2,),
}


class Dim:
    """A dynamic dimension: Dim("batch", min=1, max=4096). The exported program accepts any
    size in [min, max] there; run time checks the range."""

    def __init__(self, name, *, min=None, max=None):
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"[Dim] name must be a Python identifier, got {name!r}")
        lo = 1 if min is None else min
        hi = _INT64_MAX if max is None else max
        for what, v in (("min", lo), ("max", hi)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"[Dim] {what} must be an int, got {type(v).__name__}")
        if not 0 <= lo <= hi <= _INT64_MAX:
            raise ValueError(f"[Dim] needs 0 <= min <= max, got min={lo}, max={hi} for "
                             f"dim '{name}'")
        self.__name__ = name
        self.min = lo
        self.max = hi

    def __repr__(self):
        hi = "inf" if self.max == _INT64_MAX else self.max
        return f"Dim({self.__name__!r}, min={self.min}, max={hi})"


def _per_dim(spec, rank, where):
    """{dim index: Dim} from a dict {i: Dim} or a sequence with None for static dims."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        items = spec.items()
    elif isinstance(spec, (list, tuple)):
        items = enumerate(spec)
    else:
        raise TypeError(f"[export] dynamic_shapes for {where} must be a dict {{dim: Dim}}, a "
                        f"sequence of Dim/None, or None; got {type(spec).__name__}")
    out = {}
    for i, d in items:
        if d is None:
            continue
        if not isinstance(d, Dim):
            raise TypeError(f"[export] dynamic_shapes for {where}, dim {i}: expected a "
                            f"kiln.export.Dim, got {type(d).__name__}")
        if isinstance(i, bool) or not isinstance(i, int) or not -rank <= i < rank:
            raise ValueError(f"[export] dynamic_shapes for {where}: dim {i!r} is out of range "
                             f"for a {rank}-d input")
        out[i % rank] = d
    return out


def resolve(dynamic_shapes, inputs):
    """Per input (name, tensor): {dim index: Dim}. dynamic_shapes is a dict by input name or a
    sequence in input order, like torch.export's."""
    if dynamic_shapes is None:
        return [{} for _ in inputs]
    names = [n for n, _ in inputs]
    if isinstance(dynamic_shapes, dict):
        unknown = sorted(set(dynamic_shapes) - set(names))
        if unknown:
            raise ValueError(f"[export] dynamic_shapes names {unknown}, which are not tensor "
                             f"inputs of the call (inputs: {names})")
        specs = [dynamic_shapes.get(n) for n in names]
    elif isinstance(dynamic_shapes, (list, tuple)):
        if len(dynamic_shapes) != len(inputs):
            raise ValueError(f"[export] dynamic_shapes has {len(dynamic_shapes)} entries for "
                             f"{len(inputs)} tensor inputs")
        specs = list(dynamic_shapes)
    else:
        raise TypeError(f"[export] dynamic_shapes must be a dict or a sequence, got "
                        f"{type(dynamic_shapes).__name__}")
    return [_per_dim(s, t.dim(), f"input '{n}'") for s, (n, t) in zip(specs, inputs)]


def check_samples(inputs, per_input, constants):
    """{dim name: (Dim, sample)}; refuses samples that value matching could confuse."""
    dims = {}
    for (name, t), spec in zip(inputs, per_input):
        for i, d in spec.items():
            n = t.shape[i]
            prev = dims.get(d.__name__)
            if prev is not None and prev[0] is not d:
                raise ValueError(f"[export] two different Dim objects are named "
                                 f"'{d.__name__}'")
            if prev is not None and prev[1] != n:
                raise ValueError(f"[export] dim '{d.__name__}' is {prev[1]} in one input and "
                                 f"{n} in input '{name}' (dim {i})")
            if not d.min <= n <= d.max:
                raise ValueError(f"[export] input '{name}' dim {i} ({d.__name__}) is {n}, "
                                 f"outside its range [{d.min}, {d.max}]")
            if n < 2:
                raise ValueError(f"[export] the sample size of dim '{d.__name__}' is {n}; use "
                                 f"a sample of at least 2 so the export can tell it from "
                                 f"constant sizes (Note [Symbolic sizes])")
            dims[d.__name__] = (d, n)
    samples = {}
    for name, (_, n) in dims.items():
        if n in samples:
            raise ValueError(f"[export] dims '{samples[n]}' and '{name}' have the same sample "
                             f"size {n}; give them different sample sizes (Note [Symbolic "
                             f"sizes])")
        samples[n] = name
    static = {}
    for (name, t), spec in zip(inputs, per_input):
        for i, n in enumerate(t.shape):
            if i not in spec:
                static.setdefault(n, f"input '{name}' dim {i}")
    for cname, c in constants:
        for n in c.shape:
            static.setdefault(n, f"'{cname}' {list(c.shape)}")
    for n, name in samples.items():
        if n in static:
            raise ValueError(f"[export] the sample size {n} of dim '{name}' is also a fixed "
                             f"size ({static[n]}); choose a sample size the model does not "
                             f"use (Note [Symbolic sizes])")
    return dims


def size_table(dims):
    """{sample value: expression} for single dims and products of two."""
    table = {}
    for name, (_, n) in dims.items():
        table[n] = name
    for (a, (_, na)), (b, (_, nb)) in itertools.combinations(sorted(dims.items()), 2):
        table.setdefault(na * nb, f"{a}*{b}")
    return table


def symbolize(graph, table):
    """Rewrites the size arguments of the graph's nodes in place."""
    def sym(v):
        return table.get(v, v) if isinstance(v, int) else v

    for node in graph["nodes"]:
        for i in SIZE_ARGS.get(node["op"], ()):
            if i >= len(node["args"]):
                continue
            arg = node["args"][i]
            if "int" in arg:
                arg["int"] = sym(arg["int"])
            elif "ints" in arg:
                arg["ints"] = [sym(v) for v in arg["ints"]]
        for meta in node["meta"]:
            meta["shape"] = [sym(v) for v in meta["shape"]]
