"""kiln.cuda.RawKernel and RawModule: CUDA C++ compiled at run time with NVRTC, in CuPy's
spirit (Note [Custom kernels from Python] in cuda/nvrtc_module.h).

Launch arguments are kiln CUDA tensors (their data pointers), Python numbers and NumPy
scalars. Python numbers follow CuPy: ``int`` is passed as ``long long``, ``float`` as
``double``, ``bool`` as ``bool`` and ``complex`` as ``complex<double>``; a NumPy scalar keeps
its type (``numpy.int32(n)`` for an ``int`` parameter, ``numpy.float32(x)`` for a
``float``). Unlike CuPy, kiln reads the kernel's parameter list, so a wrong argument count or
an argument whose size does not match its parameter (a Python float for a ``float``) raises
TypeError before the launch instead of reading garbage.
"""

from kiln.cuda import _kernel_cache
from kiln.cuda._kernel_cache import CompileException  # noqa: F401  (re-exported)

from kiln import _C


def _check_options(options, what):
    if isinstance(options, str):
        raise TypeError(f"[{what}] options must be a tuple of str, got a str "
                        f"(write options=({options!r},))")
    options = tuple(options)
    for o in options:
        if not isinstance(o, str):
            raise TypeError(f"[{what}] options must be a tuple of str, got an element of type "
                            f"{type(o).__name__}")
    return options


def _check_backend(backend, what):
    if backend == "nvcc":
        raise NotImplementedError(f"[{what}] backend='nvcc' is not supported: kiln compiles "
                                  "custom kernels with NVRTC (backend='nvrtc')")
    if backend != "nvrtc":
        raise ValueError(f"[{what}] backend must be 'nvrtc', got {backend!r}")


def _current_arch(what):
    """The compute capability of the current device as NVRTC spells it (90 for sm_90)."""
    _kernel_cache._require_nvrtc(what)
    if not _C._cuda_is_available():
        raise RuntimeError(f"[{what}] no CUDA GPU is available: custom kernels compile for the "
                           "current GPU and run on it")
    index = _C._cuda_current_device()
    p = _C._cuda_get_device_properties(index)
    return p.major * 10 + p.minor


class _Program:
    """Source and options, compiled and loaded on first use (once per process and arch)."""

    def __init__(self, code, options, name_expressions, program_name, what):
        if not isinstance(code, str):
            raise TypeError(f"[{what}] code must be a str, got {type(code).__name__}")
        self.code, self.options, self.what = code, options, what
        self.name_expressions = tuple(name_expressions or ())
        self.program_name = program_name
        self._loaded = {}  # arch -> (_NvrtcModule, {name expression: lowered name})

    def load(self):
        arch = _current_arch(self.what)
        loaded = self._loaded.get(arch)
        if loaded is None:
            image, _, lowered = _kernel_cache.compile_with_cache(
                self.code, self.options, arch, self.name_expressions, self.program_name,
                self.what)
            loaded = (_C._NvrtcModule(image, self.what), lowered)
            self._loaded[arch] = loaded
        return loaded


class RawKernel(_C._KernelLauncher):
    """A kernel from CUDA C++ source, compiled with NVRTC at its first launch.

    Args:
        code (str): CUDA C++ source with the kernel, declared ``extern "C" __global__`` so its
            name is not mangled (or use RawModule's ``name_expressions`` for templates).
        name (str): the kernel's name.
        options (tuple of str): NVRTC options (``-arch`` is chosen for the current GPU).
        backend (str): ``"nvrtc"`` (the only one).

    Call it as ``kernel(grid, block, args, shared_mem=0, stream=None)``: ``grid`` and
    ``block`` are ints or tuples of up to 3 ints, ``args`` a tuple of kiln CUDA tensors, Python
    numbers and NumPy scalars (module docstring), ``shared_mem`` the dynamic shared memory in
    bytes; the launch goes to ``stream`` or else kiln's current stream on the device of the
    first tensor argument. The compiled image is cached in memory and on disk (Note [Kernel
    cache]); a compile error raises ``kiln.cuda.CompileException`` carrying NVRTC's log.

    A launch runs in C++ from the call on (``__call__`` is ``_C._KernelLauncher``'s: Note [Fast
    kernel launch] in python/kernel_args.cpp); the first one calls ``_load``.
    """

    def __init__(self, code, name, options=(), backend="nvrtc", translate_cucomplex=False, *,
                 enable_cooperative_groups=False, jitify=False):
        what = f"RawKernel {name}"
        if not isinstance(name, str) or not name:
            raise TypeError(f"[RawKernel] name must be a non-empty str, got {name!r}")
        _check_backend(backend, what)
        if translate_cucomplex or enable_cooperative_groups or jitify:
            raise NotImplementedError(f"[{what}] translate_cucomplex, enable_cooperative_groups "
                                      "and jitify are not supported")
        super().__init__(name)
        self.name, self.backend = name, backend
        self.options = _check_options(options, what)
        self._program = _Program(code, self.options, (), f"{name}.cu", what)
        self._symbol = name
        self._function = None

    @classmethod
    def _from_program(cls, program, symbol, name, function=None):
        """A kernel of a RawModule: ``program`` is None for a module loaded from a file, whose
        ``function`` is given."""
        k = cls.__new__(cls)
        _C._KernelLauncher.__init__(k, name)
        k.name, k.backend = name, "nvrtc"
        k.options = program.options if program is not None else ()
        k._program, k._symbol, k._function = program, symbol, None
        if function is not None:
            k._function = function
            k._set_function(function)
        return k

    @property
    def code(self):
        return self._program.code

    def _load(self):
        module, lowered = self._program.load()
        self._function = _C._NvrtcFunction(module, lowered.get(self._symbol, self._symbol),
                                           self.name)
        self._set_function(self._function)
        return self._function

    def compile(self, log_stream=None):
        """Compiles (or finds in the cache) and loads the kernel now instead of at its first
        launch. ``log_stream`` is accepted for CuPy's signature; NVRTC's log of a failed
        compile is in the exception."""
        self._load()

    @property
    def attributes(self):
        """The kernel's attributes on the current device (cudaFuncAttributes) as a dict."""
        f = self._function or self._load()
        a = f._attributes(_C._cuda_current_device())
        return {k: getattr(a, k) for k in (
            "max_threads_per_block", "num_regs", "shared_size_bytes", "const_size_bytes",
            "local_size_bytes", "max_dynamic_shared_size_bytes", "ptx_version",
            "binary_version")}

    @property
    def max_threads_per_block(self):
        return self.attributes["max_threads_per_block"]

    @property
    def num_regs(self):
        return self.attributes["num_regs"]

    @property
    def shared_size_bytes(self):
        return self.attributes["shared_size_bytes"]

    @property
    def max_dynamic_shared_size_bytes(self):
        return self.attributes["max_dynamic_shared_size_bytes"]

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value):
        f = self._function or self._load()
        f._set_max_dynamic_shared_size_bytes(_C._cuda_current_device(), int(value))

    def __repr__(self):
        return f"<kiln.cuda.RawKernel {self.name}>"


class RawModule:
    """CUDA C++ source with several kernels (or templates), compiled with NVRTC once.

    Args:
        code (str): the source.
        path (str): a CUBIN or PTX file to load instead of ``code``.
        options (tuple of str): NVRTC options.
        backend (str): ``"nvrtc"``.
        name_expressions (sequence of str): template instantiations or other C++ names to
            compile and look up by that spelling (``"my_kernel<float>"``), as in CuPy.

    ``get_function(name)`` returns a RawKernel for a kernel of the module: an ``extern "C"``
    name, or one of ``name_expressions``.
    """

    def __init__(self, code=None, *, path=None, options=(), backend="nvrtc",
                 translate_cucomplex=False, enable_cooperative_groups=False,
                 name_expressions=None, jitify=False):
        what = "RawModule"
        if (code is None) == (path is None):
            raise TypeError("[RawModule] give exactly one of code and path")
        _check_backend(backend, what)
        if translate_cucomplex or enable_cooperative_groups or jitify:
            raise NotImplementedError("[RawModule] translate_cucomplex, enable_cooperative_groups "
                                      "and jitify are not supported")
        if isinstance(name_expressions, str):
            raise TypeError("[RawModule] name_expressions must be a sequence of str, got a str")
        if path is not None and name_expressions:
            raise ValueError("[RawModule] name_expressions need source code, not a path")
        self.code, self.path, self.backend = code, path, backend
        self.options = _check_options(options, what)
        self.name_expressions = tuple(name_expressions or ())
        self._program = None
        self._image_module = None
        if code is not None:
            self._program = _Program(code, self.options, self.name_expressions, "module.cu",
                                     what)

    def compile(self, log_stream=None):
        """Compiles (or finds in the cache) and loads the module now."""
        self._load()

    def _load(self):
        if self._program is not None:
            return self._program.load()
        if self._image_module is None:
            _kernel_cache._require_nvrtc("RawModule")
            with open(self.path, "rb") as f:
                image = f.read()
            self._image_module = (_C._NvrtcModule(image, f"RawModule {self.path}"), {})
        return self._image_module

    def get_function(self, name):
        """The kernel ``name`` (an extern "C" name or one of ``name_expressions``)."""
        if not isinstance(name, str):
            raise TypeError(f"[RawModule] get_function takes a str, got {type(name).__name__}")
        module, lowered = self._load()
        if self.name_expressions and "<" in name and name not in lowered:
            raise ValueError(f"[RawModule] {name!r} is not one of name_expressions "
                             f"{list(self.name_expressions)}")
        return RawKernel._from_program(
            self._program, name, name,
            _C._NvrtcFunction(module, lowered.get(name, name), name))

    def __repr__(self):
        return "<kiln.cuda.RawModule>"
