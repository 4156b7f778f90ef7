"""kiln.cuda.ElementwiseKernel: CuPy's elementwise user kernel on kiln tensors.

kiln writes a grid-stride loop around the user's ``operation`` (``generate_source``): each
non-raw input is the element at the loop's index ``i`` (broadcast), each output a reference
to its element, raw parameters whole arrays (``x[k]``, ``x.size()``), ``_ind.size()`` the
loop's length. One kernel is compiled per combination of dtypes, scalar/array arguments and
loop shape, through RawKernel's caches.

Note [Elementwise kernel paths]: a call whose array operands are all contiguous with one shape
(the common case, and the one that must reach the built-in ops' bandwidth) takes the flat
path: no index arithmetic, a 32-bit loop index when the loop fits, and, when every array
operand is aligned, ``V`` consecutive elements per thread and step moved as one 16-byte load
or store of the widest operand (as kiln's own elementwise kernels do, cuda/elementwise.cuh),
then a scalar tail. The user's operation runs once per element on values in registers; an
output's pack is loaded before it too, so an operation that reads its output (``z += x``) or
writes it conditionally sees the old values, and the compiler drops that load when the
operation overwrites every element. Other calls (broadcast, strided) merge the operands' dims
where they can and turn the loop index into per-operand offsets (``nd`` merged dims).

Calls are planned once per signature (Note [Elementwise call plans]): the dtypes and kinds of
the arguments key a dict of plans holding the resolved types and the compiled kernels, so a
repeated call builds no source and resolves no types.
"""

from kiln.cuda import _kernel_params as kp
from kiln.cuda._raw_kernel import RawKernel, _check_options

import kiln

_BLOCK = 256
# Blocks of the flat path's grid-stride loop at most: as kiln's built-in elementwise kernels
# (cuda/internal.h grid_for), enough to fill any GPU while each thread loops.
_MAX_FLAT_BLOCKS = 1 << 16
_VECTOR_BYTES = 16
_INT32_LIMIT = 2 ** 31


def _input_line(p, ctype, kind, at):
    """The input ``p`` bound to its element ``at`` (an index expression of the array)."""
    if kind == "raw":
        return f"const _kiln_raw<const {ctype}> {p.name} = {{_p_{p.name}, _n_{p.name}}};\n"
    if kind == "scalar":
        return f"const {ctype} {p.name} = static_cast<{ctype}>(_v_{p.name});\n"
    return f"const {ctype} {p.name} = {at};\n"


def _output_line(p, ctype, kind, at):
    if kind == "raw":
        return f"const _kiln_raw<{ctype}> {p.name} = {{_p_{p.name}, _n_{p.name}}};\n"
    return f"{ctype}& {p.name} = {at};\n"


def _element_lines(in_params, out_params, dtypes, kinds, at, indent):
    """The user's names bound to their elements: ``at(name)`` is an array's element."""
    src = ""
    for p in in_params:
        src += indent + _input_line(p, kp.C_TYPES[dtypes[p.name]], kinds[p.name], at(p.name))
    for p in out_params:
        src += indent + _output_line(p, kp.C_TYPES[dtypes[p.name]], kinds[p.name], at(p.name))
    return src


def vector_width(dtypes, kinds):
    """Elements per 16-byte access of the widest array operand (1: no array operand)."""
    widest = max((kp.ITEMSIZE[dtypes[n]] for n, k in kinds.items() if k == "array"), default=0)
    return _VECTOR_BYTES // widest if widest else 1


def _signature(params, dtypes, kinds, nd):
    args = []
    for p in params:
        ctype, kind = kp.C_TYPES[dtypes[p.name]], kinds[p.name]
        const = "const " if p.is_const else ""
        if kind == "scalar":
            args.append(f"{kp.scalar_ctype(dtypes[p.name])} _v_{p.name}")
        elif kind == "raw":
            args += [f"{const}{ctype}* __restrict__ _p_{p.name}", f"long long _n_{p.name}"]
        else:
            args.append(f"{const}{ctype}* __restrict__ _p_{p.name}")
            args += [f"long long _s_{p.name}_{d}" for d in range(nd)]
    args += [f"long long _d{d}" for d in range(nd)] + ["long long _n"]
    return ", ".join(args)


def _flat_body(in_params, out_params, operation, dtypes, kinds, vec, index32):
    """The flat path (Note [Elementwise kernel paths]): ``vec`` elements per access, then the
    tail one by one; the loop index is ``int`` when ``index32``."""
    idx = "int" if index32 else "long long"
    params = in_params + out_params
    arrays = [p for p in params if kinds[p.name] == "array"]
    src = (f"  const {idx} _count = ({idx})_n;\n"
           f"  const {idx} _first = ({idx})blockIdx.x * blockDim.x + threadIdx.x;\n"
           f"  const {idx} _step = ({idx})gridDim.x * blockDim.x;\n")
    op = "      " + operation.strip() + ";\n"
    tail_from = "_first"
    if vec > 1:
        src += f"  const {idx} _packs = _count / {vec};\n"
        src += f"  for ({idx} _q = _first; _q < _packs; _q += _step) {{\n"
        for p in arrays:
            ctype = kp.C_TYPES[dtypes[p.name]]
            const = "const " if p.is_const else ""
            src += (f"    {const}_kiln_pack<{ctype}, {vec}> _e_{p.name} = "
                    f"reinterpret_cast<const _kiln_pack<{ctype}, {vec}>*>(_p_{p.name})[_q];\n")
        src += f"#pragma unroll\n    for (int _k = 0; _k < {vec}; ++_k) {{\n"
        src += f"      const long long i = (long long)(_q * {vec} + _k);\n"
        src += _element_lines(in_params, out_params, dtypes, kinds,
                              lambda n: f"_e_{n}.v[_k]", "      ")
        src += op + "    }\n"
        for p in out_params:
            if kinds[p.name] == "array":
                ctype = kp.C_TYPES[dtypes[p.name]]
                src += (f"    reinterpret_cast<_kiln_pack<{ctype}, {vec}>*>(_p_{p.name})[_q] = "
                        f"_e_{p.name};\n")
        src += "  }\n"
        tail_from = f"_packs * {vec} + _first"
    src += f"  for ({idx} _j = {tail_from}; _j < _count; _j += _step) {{\n"
    src += "    const long long i = _j;\n"
    src += _element_lines(in_params, out_params, dtypes, kinds, lambda n: f"_p_{n}[_j]", "    ")
    src += op[2:] + "  }\n"
    return src


def generate_source(name, in_params, out_params, operation, preamble, dtypes, kinds, nd,
                    placeholders, vec=1, index32=False):
    """The CUDA C++ of one specialisation.

    ``dtypes`` and ``kinds`` map each parameter name to its dtype name and to "array",
    "scalar" or "raw"; ``nd`` is the number of merged dims (0: every operand contiguous, the
    flat path, with ``vec`` elements per access and an ``int`` index when ``index32``);
    ``placeholders`` maps type placeholders to dtype names.
    """
    params = in_params + out_params
    src = kp.headers(set(dtypes.values()))
    src += "".join(f"typedef {kp.C_TYPES[d]} {t};\n" for t, d in sorted(placeholders.items()))
    src += _PRELUDE
    if preamble:
        src += preamble + "\n"
    src += f'extern "C" __global__ void {name}({_signature(params, dtypes, kinds, nd)}) {{\n'
    src += "  const _kiln_ind _ind = {_n};\n"
    if nd == 0:
        return src + _flat_body(in_params, out_params, operation, dtypes, kinds, vec,
                                index32) + "}\n"
    src += ("  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < _n;\n"
            "       i += (long long)blockDim.x * gridDim.x) {\n")
    arrays = [p.name for p in params if kinds[p.name] == "array"]
    if arrays:
        src += "    long long _r = i;\n"
        src += "".join(f"    long long _o_{a} = 0;\n" for a in arrays)
        for d in reversed(range(nd)):
            src += f"    {{ const long long _k = _r % _d{d}; _r /= _d{d};"
            src += "".join(f" _o_{a} += _k * _s_{a}_{d};" for a in arrays) + " }\n"
    src += _element_lines(in_params, out_params, dtypes, kinds, lambda n: f"_p_{n}[_o_{n}]",
                          "    ")
    src += "    " + operation.strip() + ";\n  }\n}\n"
    return src


# Helpers every generated kernel sees: the loop's size, raw (whole-array) parameters and the
# flat path's packs of consecutive elements.
_PRELUDE = """struct _kiln_ind {
  long long _n;
  __device__ long long size() const { return _n; }
};
template <typename T> struct _kiln_raw {
  T* _p;
  long long _n;
  __device__ T& operator[](long long k) const { return _p[k]; }
  __device__ long long size() const { return _n; }
};
template <typename T, int V> struct alignas(sizeof(T) * V) _kiln_pack {
  T v[V];
};
"""


class ElementwiseKernel:
    """An elementwise kernel from a loop body, as CuPy's ``ElementwiseKernel``.

    Args:
        in_params (str): input parameters, ``"float32 x, T y, raw T table"``.
        out_params (str): output parameters, ``"T z"``.
        operation (str): the loop body in CUDA C++, e.g. ``"z = a * x + y"``; ``i`` is the
            element index and ``_ind.size()`` the number of elements.
        name (str): the kernel's name.
        reduce_dims (bool): merge dims where the operands allow (kept for CuPy's signature;
            kiln always merges).
        preamble (str): CUDA C++ inserted before the kernel (helper functions).
        options (tuple of str): NVRTC options.
        no_return (bool): ``__call__`` returns None.
        return_tuple (bool): ``__call__`` always returns a tuple.

    Call it with the inputs (kiln CUDA tensors or numbers; tensors broadcast together) and
    optionally the outputs; missing outputs are allocated with the broadcast shape. ``size=``
    gives the loop length when every argument is raw or a number.
    """

    def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True,
                 preamble="", no_return=False, return_tuple=False, **kwargs):
        what = f"ElementwiseKernel {name}"
        if not isinstance(name, str) or not kp._IDENT.match(name):
            raise ValueError(f"[ElementwiseKernel] name must be a C identifier, got {name!r}")
        if not isinstance(operation, str):
            raise TypeError(f"[{what}] operation must be a str, got {type(operation).__name__}")
        unknown = set(kwargs) - {"options", "loop_prep", "after_loop"}
        if unknown:
            raise TypeError(f"[{what}] unexpected keyword argument {sorted(unknown)[0]!r}")
        if kwargs.get("loop_prep") or kwargs.get("after_loop"):
            raise NotImplementedError(f"[{what}] loop_prep and after_loop are not supported")
        self.in_params = kp.parse_params(in_params, True, what)
        self.out_params = kp.parse_params(out_params, False, what)
        if not self.out_params:
            raise ValueError(f"[{what}] out_params must name at least one output")
        kp.check_unique(self.in_params, self.out_params, what)
        self.operation, self.name, self.preamble = operation, name, preamble
        self.reduce_dims, self.no_return, self.return_tuple = reduce_dims, no_return, return_tuple
        self.options = _check_options(kwargs.get("options", ()), what)
        self.nin, self.nout = len(self.in_params), len(self.out_params)
        self.nargs = self.nin + self.nout
        self._what = what
        self._kernels = {}
        self._plans = {}
        self._has_raw = any(p.raw for p in self.in_params + self.out_params)

    def _kernel(self, dtypes, kinds, nd, placeholders, vec=1, index32=False):
        key = (tuple(dtypes.items()), tuple(kinds.items()), nd, vec, index32)
        k = self._kernels.get(key)
        if k is None:
            src = generate_source(self.name, self.in_params, self.out_params, self.operation,
                                  self.preamble, dtypes, kinds, nd, placeholders, vec, index32)
            k = RawKernel(src, self.name, self.options)
            self._kernels[key] = k
        return k

    def __call__(self, *args, size=None, block_size=None, stream=None):
        if size is None and not self._has_raw:
            plan = self._plans.get(_call_key(args))
            if plan is not None:
                try:
                    return self._flat_call(plan, args, block_size, stream)
                except (_NotFlat, TypeError, ValueError):
                    pass  # the general path below, which raises with the parameter's name
        return self._general_call(args, size, block_size, stream)

    def _result(self, out_args):
        if self.no_return:
            return None
        if self.nout == 1 and not self.return_tuple:
            return out_args[0]
        return tuple(out_args)

    def _flat_call(self, plan, args, block_size, stream):
        """A call whose signature was planned (Note [Elementwise call plans]) and whose array
        operands are contiguous with one shape; raises _NotFlat otherwise."""
        shape = first = None
        for j in plan.tensors:
            x = args[j]
            if not x.is_contiguous():
                raise _NotFlat
            if first is None:
                first, shape = x, x.shape
            elif x.shape != shape:
                raise _NotFlat
        if first is None:
            raise _NotFlat
        outs = args[self.nin:]
        if not outs:
            # empty_like: the cheapest allocation from Python (first is contiguous).
            outs = tuple(kiln.empty_like(first) if d is None else kiln.empty_like(first, dtype=d)
                         for d in plan.out_dtypes)
        n = first.numel()
        if n:
            launch = list(args[:self.nin]) + list(outs)
            for j, dtype, name in plan.scalars:
                launch[j] = kp.scalar_arg(launch[j], dtype, self._what, name)
            launch.append(n)
            block = block_size or _BLOCK
            vec, index32, grid = _flat_config([launch[j] for j in plan.arrays], plan.aligns,
                                              n, plan.vec, block)
            kernel = plan.kernels.get((vec, index32))
            if kernel is None:
                kernel = self._kernel(plan.dtypes, plan.kinds, 0, plan.placeholders, vec,
                                      index32)
                plan.kernels[(vec, index32)] = kernel
            kernel(grid, block, tuple(launch), stream=stream)
        return self._result(outs)

    def _general_call(self, args, size, block_size, stream):
        what = self._what
        if len(args) not in (self.nin, self.nargs):
            raise TypeError(f"[{what}] takes {self.nin} inputs (and optionally {self.nout} "
                            f"outputs), got {len(args)} arguments")
        in_args = list(args[:self.nin])
        out_args = list(args[self.nin:]) or [None] * self.nout
        for p, x in zip(self.in_params, in_args):
            if p.raw and not kp.is_tensor(x):
                raise TypeError(f"[{what}] raw parameter {p.name!r} needs a tensor, got "
                                f"{type(x).__name__}")
            if not kp.is_tensor(x):
                kp.check_scalar(x, p, what)
        for p, x in zip(self.out_params, out_args):
            if x is not None and not kp.is_tensor(x):
                raise TypeError(f"[{what}] output {p.name!r} must be a tensor, got "
                                f"{type(x).__name__}")
        named = [(p.name, x) for p, x in zip(self.in_params + self.out_params,
                                             in_args + out_args)]
        device = kp.check_device(named, what)
        placeholders = kp.resolve_types(self.in_params, self.out_params, in_args, out_args,
                                        what)
        dtypes = {p.name: kp.param_dtype(p, placeholders)
                  for p in self.in_params + self.out_params}
        # Cast inputs of typed parameters (module docstring of _kernel_params).
        casts = False
        for j, (p, x) in enumerate(zip(self.in_params, in_args)):
            if kp.is_tensor(x) and kp.dtype_name(x.dtype) != dtypes[p.name]:
                in_args[j] = x.to(kp.kiln_dtype(dtypes[p.name]))
                casts = True
        for p, x in zip(self.out_params, out_args):
            if x is not None and kp.dtype_name(x.dtype) != dtypes[p.name]:
                raise TypeError(f"[{what}] output {p.name!r} is {kp.dtype_name(x.dtype)} but "
                                f"the parameter is {dtypes[p.name]}")

        shape = self._loop_shape(in_args, out_args, size)
        if device is None:
            device = kiln.device("cuda", kiln.cuda.current_device())
        numel = 1
        for s in shape:
            numel *= s
        for j, p in enumerate(self.out_params):
            if out_args[j] is None:
                out_args[j] = kiln.empty(shape, dtype=kp.kiln_dtype(dtypes[p.name]),
                                         device=device)

        kinds = {}
        array_ops = []
        for p, x in zip(self.in_params + self.out_params, in_args + out_args):
            if p.raw:
                kinds[p.name] = "raw"
            elif kp.is_tensor(x):
                kinds[p.name] = "array"
                array_ops.append((p.name, x))
            else:
                kinds[p.name] = "scalar"
        sizes, strides = kp.collapse(shape, [kp.broadcast_strides(x, shape)
                                             for _, x in array_ops])
        contiguous = len(sizes) <= 1 and all(s == [1] or s == [] for s in strides)
        nd = 0 if contiguous else len(sizes)
        if nd > kp.MAX_DIMS:
            raise ValueError(f"[{what}] the operands need {nd} dims after merging; at most "
                             f"{kp.MAX_DIMS} are supported")
        if size is None and not casts and not self._has_raw:
            self._plans[_call_key(args)] = _Plan(self, args, dtypes, kinds, placeholders)

        if numel > 0:
            stride_of = dict(zip([n for n, _ in array_ops], strides))
            launch = []
            for p, x in zip(self.in_params + self.out_params, in_args + out_args):
                kind = kinds[p.name]
                if kind == "scalar":
                    launch.append(kp.scalar_arg(x, dtypes[p.name], what, p.name))
                elif kind == "raw":
                    if not x.is_contiguous():
                        if p.is_const:
                            x = x.contiguous()
                        else:
                            raise ValueError(f"[{what}] raw output {p.name!r} must be "
                                             "contiguous")
                    launch += [x, x.numel()]
                else:
                    launch.append(x)
                    if nd:
                        launch += stride_of[p.name]
            launch += (sizes if nd else []) + [numel]
            block = block_size or _BLOCK
            if nd == 0:
                vec = vector_width(dtypes, kinds)
                vec, index32, grid = _flat_config(
                    [x for _, x in array_ops], [x.element_size() * vec for _, x in array_ops],
                    numel, vec, block)
            else:
                vec, index32, grid = 1, False, kp.grid_for(numel, block)
            kernel = self._kernel(dtypes, kinds, nd, placeholders, vec, index32)
            kernel(grid, block, tuple(launch), stream=stream)
        return self._result(out_args)

    def _loop_shape(self, in_args, out_args, size):
        what = self._what
        shapes = [tuple(x.shape) for p, x in zip(self.in_params, in_args)
                  if kp.is_tensor(x) and not p.raw]
        out_shapes = [tuple(x.shape) for p, x in zip(self.out_params, out_args)
                      if x is not None and not p.raw]
        if size is not None:
            if shapes or out_shapes:
                raise ValueError(f"[{what}] size= is only for calls whose arguments are all raw "
                                 "or scalars; here the loop size comes from the tensors")
            if not isinstance(size, int) or size < 0:
                raise ValueError(f"[{what}] size must be a non-negative int, got {size!r}")
            return (size,)
        if not shapes and not out_shapes:
            raise ValueError(f"[{what}] the loop size is undecided: no non-raw tensor argument; "
                             "pass size=")
        try:
            shape = tuple(kiln.broadcast_shapes(*shapes)) if shapes else out_shapes[0]
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"[{what}] the inputs' shapes {shapes} do not broadcast "
                             f"together") from e
        for p, x in zip(self.out_params, out_args):
            if x is not None and not p.raw and tuple(x.shape) != tuple(shape):
                raise ValueError(f"[{what}] output {p.name!r} has shape {list(x.shape)} but "
                                 f"the inputs broadcast to {list(shape)}")
        return shape

    def __repr__(self):
        return f"<kiln.cuda.ElementwiseKernel {self.name}>"


class _NotFlat(Exception):
    """A planned call that the flat path cannot take (strided or broadcast operands)."""


def _call_key(args):
    """What decides a call's plan: each argument's dtype (tensors) or type (numbers)."""
    return tuple([a.dtype if isinstance(a, kiln.Tensor) else type(a) for a in args])


class _Plan:
    """Note [Elementwise call plans]: what a call signature (``_call_key``) decides once, so
    that a repeated call only checks its tensors' layout, allocates the outputs and launches.
    Only signatures that needed no cast and have no raw parameters are planned; any call that
    does not fit the flat path, or whose launch is refused, goes the general way, which also
    raises the errors with the parameter's name."""

    __slots__ = ("tensors", "arrays", "aligns", "scalars", "out_dtypes", "dtypes", "kinds",
                 "placeholders", "vec", "kernels")

    def __init__(self, ek, args, dtypes, kinds, placeholders):
        params = ek.in_params + ek.out_params
        self.tensors = [j for j, a in enumerate(args) if isinstance(a, kiln.Tensor)]
        self.arrays = [j for j, p in enumerate(params) if kinds[p.name] == "array"]
        self.scalars = [(j, dtypes[p.name], p.name) for j, p in enumerate(params)
                        if kinds[p.name] == "scalar"]
        # None where an output has the dtype of the first tensor argument.
        first = args[self.tensors[0]].dtype if self.tensors else None
        self.out_dtypes = [None if kp.kiln_dtype(dtypes[p.name]) == first
                           else kp.kiln_dtype(dtypes[p.name]) for p in ek.out_params]
        self.dtypes, self.kinds, self.placeholders = dtypes, kinds, placeholders
        self.vec = vector_width(dtypes, kinds)
        self.aligns = [kp.ITEMSIZE[dtypes[params[j].name]] * self.vec for j in self.arrays]
        self.kernels = {}


def _flat_config(arrays, aligns, n, vec, block):
    """(elements per access, 32-bit index, grid) of a flat launch over n elements: ``vec``
    when every array operand is aligned to its pack (``aligns``: each one's pack bytes),
    else 1."""
    if vec > 1:
        for x, align in zip(arrays, aligns):
            if x.data_ptr() % align:
                vec = 1
                break
    units = n // vec if vec > 1 else n
    grid = min(max(1, -(-units // block)), _MAX_FLAT_BLOCKS)
    return vec, n + grid * block * vec < _INT32_LIMIT, grid

