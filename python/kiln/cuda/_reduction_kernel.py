"""kiln.cuda.ReductionKernel: CuPy's reduction user kernel on kiln tensors.

The generated kernel (``generate_source``) gives each output element one thread block: the
block's threads stride over the reduced elements, each folding ``map_expr`` of its elements
into an accumulator of ``reduce_type`` with ``reduce_expr`` (``a`` and ``b`` the two values),
starting from ``identity``; the block then combines its threads' accumulators in shared
memory in log2(threads) steps, and thread 0 runs ``post_map_expr`` with the result ``a`` and a
reference to the output element. Operands are read in place through their strides: the kept
and the reduced dims are each merged where the operands allow, so no input is copied.
"""

from kiln.cuda import _kernel_params as kp
from kiln.cuda._raw_kernel import RawKernel, _check_options

import kiln

_MAX_THREADS = 256


def _decompose(index, sizes, names, prefix, indent):
    """C++ adding, for each operand in ``names``, the offset of flat ``index`` over ``sizes``
    (strides ``_{prefix}s_<name>_<d>``) to ``_{prefix}o_<name>``."""
    out = ""
    if len(sizes) == 1:
        return "".join(f"{indent}_{prefix}o_{n} += {index} * _{prefix}s_{n}_0;\n"
                       for n in names)
    out += f"{indent}long long _{prefix}r = {index};\n"
    for d in reversed(range(len(sizes))):
        out += (f"{indent}{{ const long long _k = _{prefix}r % _{prefix}d{d}; "
                f"_{prefix}r /= _{prefix}d{d};")
        out += "".join(f" _{prefix}o_{n} += _k * _{prefix}s_{n}_{d};" for n in names) + " }\n"
    return out


def generate_source(name, in_params, out_param, map_expr, reduce_expr, post_map_expr,
                    identity, reduce_type, preamble, dtypes, kinds, nd_keep, nd_red,
                    placeholders):
    """The CUDA C++ of one specialisation: ``nd_keep`` / ``nd_red`` merged kept / reduced
    dims; ``kinds`` maps input names to "array" or "scalar"."""
    src = kp.headers(set(dtypes.values()))
    src += "".join(f"typedef {kp.C_TYPES[d]} {t};\n" for t, d in sorted(placeholders.items()))
    src += f"typedef {reduce_type} _type_reduce;\n"
    if preamble:
        src += preamble + "\n"
    src += ("__device__ __forceinline__ _type_reduce _kiln_reduce(const _type_reduce& a, "
            f"const _type_reduce& b) {{\n  return ({reduce_expr});\n}}\n")
    arrays = [p.name for p in in_params if kinds[p.name] == "array"]
    args = []
    for p in in_params:
        if kinds[p.name] == "scalar":
            args.append(f"{kp.scalar_ctype(dtypes[p.name])} _v_{p.name}")
        else:
            args.append(f"const {kp.C_TYPES[dtypes[p.name]]}* __restrict__ _p_{p.name}")
            args += [f"long long _ks_{p.name}_{d}" for d in range(nd_keep)]
            args += [f"long long _rs_{p.name}_{d}" for d in range(nd_red)]
    out = out_param.name
    args.append(f"{kp.C_TYPES[dtypes[out]]}* __restrict__ _p_{out}")
    args += [f"long long _ks_{out}_{d}" for d in range(nd_keep)]
    args += [f"long long _kd{d}" for d in range(nd_keep)]
    args += [f"long long _rd{d}" for d in range(nd_red)]
    args += ["long long _n_out", "long long _n_red"]
    src += f'extern "C" __global__ void {name}({", ".join(args)}) {{\n'
    src += (f"  __shared__ __align__(16) unsigned char _smem[{_MAX_THREADS} * "
            "sizeof(_type_reduce)];\n"
            "  _type_reduce* _sdata = reinterpret_cast<_type_reduce*>(_smem);\n"
            "  for (long long _out = blockIdx.x; _out < _n_out; _out += gridDim.x) {\n")
    kept = arrays + [out]
    src += "".join(f"    long long _ko_{n} = 0;\n" for n in kept)
    if nd_keep:
        src += _decompose("_out", range(nd_keep), kept, "k", "    ")
    src += f"    _type_reduce _acc = _type_reduce({identity});\n"
    src += ("    for (long long _j = threadIdx.x; _j < _n_red; _j += blockDim.x) {\n")
    src += "".join(f"      long long _ro_{n} = 0;\n" for n in arrays)
    if nd_red:
        src += _decompose("_j", range(nd_red), arrays, "r", "      ")
    for p in in_params:
        ctype = kp.C_TYPES[dtypes[p.name]]
        if kinds[p.name] == "scalar":
            src += f"      const {ctype} {p.name} = static_cast<{ctype}>(_v_{p.name});\n"
        else:
            src += (f"      const {ctype} {p.name} = "
                    f"_p_{p.name}[_ko_{p.name} + _ro_{p.name}];\n")
    src += f"      _acc = _kiln_reduce(_acc, _type_reduce({map_expr}));\n    }}\n"
    src += ("    _sdata[threadIdx.x] = _acc;\n    __syncthreads();\n"
            "    for (unsigned _s = blockDim.x / 2; _s > 0; _s >>= 1) {\n"
            "      if (threadIdx.x < _s)\n"
            "        _sdata[threadIdx.x] = _kiln_reduce(_sdata[threadIdx.x], "
            "_sdata[threadIdx.x + _s]);\n"
            "      __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) {\n"
            "      const _type_reduce a = _sdata[0];\n"
            f"      {kp.C_TYPES[dtypes[out]]}& {out} = _p_{out}[_ko_{out}];\n"
            f"      {post_map_expr.strip()};\n    }}\n"
            "    __syncthreads();\n  }\n}\n")
    return src


def _block_threads(n_red):
    """A power of two from 32 to 256, enough for n_red reduced elements (the tree in
    generate_source halves it)."""
    t = 32
    while t < _MAX_THREADS and t < n_red:
        t *= 2
    return t


def _normalize_axis(axis, ndim, what):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"[{what}] axis must be an int or a tuple of ints, got {axis!r}")
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise IndexError(f"[{what}] axis {a} is out of range for {ndim} dims")
        a = a % ndim if ndim else 0
        if a in out:
            raise ValueError(f"[{what}] axis {a} appears twice")
        out.append(a)
    return tuple(sorted(out))


class ReductionKernel:
    """A reduction kernel, as CuPy's ``ReductionKernel``.

    Args:
        in_params (str): input parameters (``"T x"``; tensors broadcast together, numbers).
        out_params (str): the one output parameter (``"T y"``).
        map_expr (str): the value each element contributes (``"x * x"``).
        reduce_expr (str): how two values ``a`` and ``b`` combine (``"a + b"``).
        post_map_expr (str): a statement writing the output from the result ``a``
            (``"y = sqrt(a)"``).
        identity (str): the reduction's identity (``"0"``), the result of an empty reduction.
        name (str): the kernel's name.
        reduce_type (str): the accumulator's type: a dtype name, a placeholder or a C type
            (default: the output's type).
        reduce_dims (bool): kept for CuPy's signature; kiln always merges dims.
        preamble (str): CUDA C++ inserted before the kernel.
        options (tuple of str): NVRTC options.

    Call it with the inputs and ``axis=None`` (all dims), an int or a tuple, ``keepdims``,
    ``out`` (or the output as the last positional argument) and ``stream``.
    """

    def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity,
                 name="reduce_kernel", reduce_type=None, reduce_dims=True, preamble="",
                 options=()):
        what = f"ReductionKernel {name}"
        if not isinstance(name, str) or not kp._IDENT.match(name):
            raise ValueError(f"[ReductionKernel] name must be a C identifier, got {name!r}")
        for label, expr in (("map_expr", map_expr), ("reduce_expr", reduce_expr),
                            ("post_map_expr", post_map_expr), ("identity", identity)):
            if not isinstance(expr, str):
                raise TypeError(f"[{what}] {label} must be a str, got {type(expr).__name__}")
        self.in_params = kp.parse_params(in_params, True, what)
        out = kp.parse_params(out_params, False, what)
        if len(out) != 1:
            raise ValueError(f"[{what}] out_params must name exactly one output, got {len(out)}")
        if any(p.raw for p in self.in_params + out):
            raise NotImplementedError(f"[{what}] raw parameters are not supported in reductions")
        kp.check_unique(self.in_params, out, what)
        self.out_params = out
        self.map_expr, self.reduce_expr, self.post_map_expr = map_expr, reduce_expr, post_map_expr
        self.identity, self.name, self.preamble = identity, name, preamble
        self.reduce_type = reduce_type
        self.options = _check_options(options, what)
        self.nin = len(self.in_params)
        self._what = what
        self._kernels = {}
        self._plans = {}

    def _reduce_ctype(self, dtypes, placeholders):
        t = self.reduce_type
        if t is None:
            return kp.C_TYPES[dtypes[self.out_params[0].name]]
        if t in kp.C_TYPES:
            return kp.C_TYPES[t]
        if t in placeholders:
            return kp.C_TYPES[placeholders[t]]
        return t

    def _kernel(self, dtypes, kinds, nd_keep, nd_red, placeholders):
        key = (tuple(dtypes.items()), tuple(kinds.items()), nd_keep, nd_red)
        k = self._kernels.get(key)
        if k is None:
            src = generate_source(self.name, self.in_params, self.out_params[0], self.map_expr,
                                  self.reduce_expr, self.post_map_expr, self.identity,
                                  self._reduce_ctype(dtypes, placeholders), self.preamble,
                                  dtypes, kinds, nd_keep, nd_red, placeholders)
            k = RawKernel(src, self.name, self.options)
            self._kernels[key] = k
        return k

    def __call__(self, *args, out=None, axis=None, keepdims=False, stream=None):
        key = _call_key(args, out, axis, keepdims)
        plan = self._plans.get(key) if key is not None else None
        if plan is not None:
            try:
                return plan.call(args, out, stream)
            except (TypeError, ValueError):
                pass  # the general path raises with the parameter's name
        return self._general_call(args, out, axis, keepdims, stream, key)

    def _general_call(self, args, out, axis, keepdims, stream, key):
        what = self._what
        out_given = out is not None or len(args) == self.nin + 1
        if len(args) not in (self.nin, self.nin + 1):
            raise TypeError(f"[{what}] takes {self.nin} inputs (and optionally the output), got "
                            f"{len(args)} arguments")
        if len(args) == self.nin + 1:
            if out is not None:
                raise TypeError(f"[{what}] the output is given twice (positional and out=)")
            out = args[-1]
        in_args = list(args[:self.nin])
        for p, x in zip(self.in_params, in_args):
            if not kp.is_tensor(x):
                kp.check_scalar(x, p, what)
        if out is not None and not kp.is_tensor(out):
            raise TypeError(f"[{what}] out must be a tensor, got {type(out).__name__}")
        out_p = self.out_params[0]
        named = [(p.name, x) for p, x in zip(self.in_params, in_args)] + [(out_p.name, out)]
        device = kp.check_device(named, what)
        placeholders = kp.resolve_types(self.in_params, self.out_params, in_args, [out], what)
        dtypes = {p.name: kp.param_dtype(p, placeholders)
                  for p in self.in_params + self.out_params}
        casts = False
        for j, (p, x) in enumerate(zip(self.in_params, in_args)):
            if kp.is_tensor(x) and kp.dtype_name(x.dtype) != dtypes[p.name]:
                in_args[j] = x.to(kp.kiln_dtype(dtypes[p.name]))
                casts = True
        if out is not None and kp.dtype_name(out.dtype) != dtypes[out_p.name]:
            raise TypeError(f"[{what}] out is {kp.dtype_name(out.dtype)} but the parameter "
                            f"{out_p.name!r} is {dtypes[out_p.name]}")

        shapes = [tuple(x.shape) for x in in_args if kp.is_tensor(x)]
        if not shapes:
            raise ValueError(f"[{what}] needs at least one tensor input")
        try:
            shape = tuple(kiln.broadcast_shapes(*shapes))
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"[{what}] the inputs' shapes {shapes} do not broadcast "
                             "together") from e
        axes = _normalize_axis(axis, len(shape), what)
        keep = [d for d in range(len(shape)) if d not in axes]
        out_shape = [1 if d in axes else shape[d] for d in range(len(shape))] if keepdims \
            else [shape[d] for d in keep]
        if out is None:
            out = kiln.empty(out_shape, dtype=kp.kiln_dtype(dtypes[out_p.name]), device=device)
        elif list(out.shape) != out_shape:
            raise ValueError(f"[{what}] out has shape {list(out.shape)} but the result has "
                             f"shape {out_shape}")
        n_out = 1
        for d in keep:
            n_out *= shape[d]
        n_red = 1
        for d in axes:
            n_red *= shape[d]

        kinds = {p.name: "array" if kp.is_tensor(x) else "scalar"
                 for p, x in zip(self.in_params, in_args)}
        arrays = [x for x in in_args if kp.is_tensor(x)]
        full = [kp.broadcast_strides(x, shape) for x in arrays]
        out_strides = list(out.stride())
        if keepdims:
            out_strides = [out_strides[d] for d in keep]
        keep_shape = [shape[d] for d in keep]
        ksizes, kstrides = kp.collapse(keep_shape, [[s[d] for d in keep] for s in full]
                                       + [out_strides])
        rsizes, rstrides = kp.collapse([shape[d] for d in axes],
                                       [[s[d] for d in axes] for s in full])
        nd_keep, nd_red = len(ksizes), len(rsizes)
        if max(nd_keep, nd_red) > kp.MAX_DIMS:
            raise ValueError(f"[{what}] too many dims after merging (at most {kp.MAX_DIMS})")
        kernel = self._kernel(dtypes, kinds, nd_keep, nd_red, placeholders)
        if n_out == 0:
            return out
        launch, tensor_slots, scalar_slots = [], [], []
        a = 0
        for j, (p, x) in enumerate(zip(self.in_params, in_args)):
            if kinds[p.name] == "scalar":
                scalar_slots.append((len(launch), j, dtypes[p.name], p.name))
                launch.append(kp.scalar_arg(x, dtypes[p.name], what, p.name))
            else:
                tensor_slots.append((len(launch), j))
                launch += [x] + kstrides[a] + rstrides[a]
                a += 1
        out_slot = len(launch)
        launch += [out] + kstrides[-1] + ksizes + rsizes + [n_out, n_red]
        grid, block = min(n_out, 2 ** 31 - 1), _block_threads(n_red)
        if key is not None and not casts:
            self._plans[key] = _Plan(self, launch, tensor_slots, scalar_slots, out_slot,
                                     None if out_given else (out_shape, out.dtype), kernel,
                                     grid, block)
        kernel(grid, block, tuple(launch), stream=stream)
        return out

    def __repr__(self):
        return f"<kiln.cuda.ReductionKernel {self.name}>"


def _call_key(args, out, axis, keepdims):
    """What decides a call's plan: each argument's dtype, shape and strides (tensors) or type
    (numbers), the output's, the axes and keepdims; None when unhashable (an axis list)."""
    def layout(a):
        if isinstance(a, kiln.Tensor):
            return a.dtype, tuple(a.shape), tuple(a.stride())
        return type(a)

    key = (tuple([layout(a) for a in args]), None if out is None else layout(out), axis,
           keepdims)
    try:
        hash(key)
    except TypeError:
        return None
    return key


class _Plan:
    """A planned reduction (as Note [Elementwise call plans]): the launch arguments with the
    call's tensors and scalars left to fill in, the kernel, the grid and the output to make.
    Calls with the same key differ only in data pointers and scalar values."""

    __slots__ = ("what", "nin", "launch", "tensor_slots", "scalar_slots", "out_slot", "alloc",
                 "kernel", "grid", "block")

    def __init__(self, rk, launch, tensor_slots, scalar_slots, out_slot, alloc, kernel, grid,
                 block):
        self.what, self.nin = rk._what, rk.nin
        self.launch, self.tensor_slots, self.scalar_slots = launch, tensor_slots, scalar_slots
        self.out_slot, self.alloc, self.kernel = out_slot, alloc, kernel
        self.grid, self.block = grid, block

    def call(self, args, out, stream):
        if out is None and len(args) > self.nin:
            out = args[self.nin]
        if out is None:
            first = args[self.tensor_slots[0][1]]
            out = kiln.empty(self.alloc[0], dtype=self.alloc[1], device=first.device)
        if self.grid == 0:
            return out
        launch = list(self.launch)
        for slot, j in self.tensor_slots:
            launch[slot] = args[j]
        for slot, j, dtype, name in self.scalar_slots:
            launch[slot] = kp.scalar_arg(args[j], dtype, self.what, name)
        launch[self.out_slot] = out
        self.kernel(self.grid, self.block, tuple(launch), stream=stream)
        return out

