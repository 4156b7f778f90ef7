"""kiln.cuda.ElementwiseKernel: CuPy's elementwise user kernel on kiln tensors.

kiln writes a grid-stride loop around the user's ``operation`` (``generate_source``): each
non-raw input is the element at the loop's index ``i`` (broadcast), each output a reference
to its element, raw parameters whole arrays (``x[k]``, ``x.size()``), ``_ind.size()`` the
loop's length. The dims of all operands are merged where they can be (a contiguous call is a
flat loop with no index arithmetic), and one kernel is compiled per combination of dtypes,
scalar/array arguments and merged dims, through RawKernel's caches.
"""

from kiln.cuda import _kernel_params as kp
from kiln.cuda._raw_kernel import RawKernel, _check_options

import kiln

_BLOCK = 256
# Elements per thread and step of the flat (contiguous) loop.
UNROLL = 4


def _input_line(p, ctype, kind, nd):
    if kind == "raw":
        return f"  const _kiln_raw<const {ctype}> {p.name} = {{_p_{p.name}, _n_{p.name}}};\n"
    if kind == "scalar":
        return f"  const {ctype} {p.name} = static_cast<{ctype}>(_v_{p.name});\n"
    return f"  const {ctype} {p.name} = _p_{p.name}[{_offset(p.name, nd)}];\n"


def _offset(name, nd):
    return "i" if nd == 0 else f"_o_{name}"


def generate_source(name, in_params, out_params, operation, preamble, dtypes, kinds, nd,
                    placeholders):
    """The CUDA C++ of one specialisation.

    ``dtypes`` and ``kinds`` map each parameter name to its dtype name and to "array",
    "scalar" or "raw"; ``nd`` is the number of merged dims (0: every operand contiguous, flat
    index); ``placeholders`` maps type placeholders to dtype names.
    """
    params = in_params + out_params
    src = kp.headers(set(dtypes.values()))
    src += "".join(f"typedef {kp.C_TYPES[d]} {t};\n" for t, d in sorted(placeholders.items()))
    src += _PRELUDE
    if preamble:
        src += preamble + "\n"
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
    src += f'extern "C" __global__ void {name}({", ".join(args)}) {{\n'
    src += "  const _kiln_ind _ind = {_n};\n"
    if nd == 0:
        # Flat: each thread takes UNROLL elements a block apart per step, so their loads are
        # in flight together (the pointers are __restrict__) while accesses stay coalesced.
        src += (f"  const long long _chunk = (long long)blockDim.x * {UNROLL};\n"
                "  for (long long _base = blockIdx.x * _chunk + threadIdx.x; _base < _n;\n"
                "       _base += _chunk * gridDim.x) {\n"
                "#pragma unroll\n"
                f"  for (int _u = 0; _u < {UNROLL}; ++_u) {{\n"
                "  const long long i = _base + (long long)_u * blockDim.x;\n"
                "  if (i < _n) {\n")
    else:
        src += ("  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < _n;\n"
                "       i += (long long)blockDim.x * gridDim.x) {\n")
    arrays = [p.name for p in params if kinds[p.name] == "array"]
    if nd > 0 and arrays:
        src += "    long long _r = i;\n"
        src += "".join(f"    long long _o_{a} = 0;\n" for a in arrays)
        for d in reversed(range(nd)):
            src += f"    {{ const long long _k = _r % _d{d}; _r /= _d{d};"
            src += "".join(f" _o_{a} += _k * _s_{a}_{d};" for a in arrays) + " }\n"
    for p in in_params:
        src += "  " + _input_line(p, kp.C_TYPES[dtypes[p.name]], kinds[p.name], nd)
    for p in out_params:
        ctype = kp.C_TYPES[dtypes[p.name]]
        if kinds[p.name] == "raw":
            src += f"    const _kiln_raw<{ctype}> {p.name} = {{_p_{p.name}, _n_{p.name}}};\n"
        else:
            src += f"    {ctype}& {p.name} = _p_{p.name}[{_offset(p.name, nd)}];\n"
    src += "    " + operation.strip() + ";\n  }\n" + ("  }\n  }\n" if nd == 0 else "") + "}\n"
    return src


# Helpers every generated kernel sees: the loop's size and raw (whole-array) parameters.
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

    def _kernel(self, dtypes, kinds, nd, placeholders):
        key = (tuple(dtypes.items()), tuple(kinds.items()), nd)
        k = self._kernels.get(key)
        if k is None:
            src = generate_source(self.name, self.in_params, self.out_params, self.operation,
                                  self.preamble, dtypes, kinds, nd, placeholders)
            k = RawKernel(src, self.name, self.options)
            self._kernels[key] = k
        return k

    def __call__(self, *args, size=None, block_size=None, stream=None):
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
        for j, (p, x) in enumerate(zip(self.in_params, in_args)):
            if kp.is_tensor(x) and kp.dtype_name(x.dtype) != dtypes[p.name]:
                in_args[j] = x.to(kp.kiln_dtype(dtypes[p.name]))
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
        kernel = self._kernel(dtypes, kinds, nd, placeholders)

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
            per_block = block * (UNROLL if nd == 0 else 1)
            kernel(kp.grid_for(numel, per_block), block, tuple(launch), stream=stream)

        if self.no_return:
            return None
        if self.nout == 1 and not self.return_tuple:
            return out_args[0]
        return tuple(out_args)

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
