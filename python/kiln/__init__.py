"""kiln: a deep-learning framework with a C++17/CUDA core and PyTorch's API.

The Tensor class and every op live in the C++ extension ``kiln._C``; this
package re-exports them and adds the pure-Python parts (grad-mode context
managers, nn, optim, data utilities).
"""

import builtins as _builtins
import importlib as _importlib
import math as _math

try:
    from kiln import _C
except ImportError as _error:  # say why, instead of only that (python -m kiln.doctor's check)
    from kiln._extension_check import check_extension as _check_extension

    _, _detail, _hint = _check_extension(__path__[0], None, _error)
    raise ImportError(f"[import kiln] {_detail}: {_hint}") from _error
from kiln._C import *  # noqa: F401,F403  (ops, dtypes, Tensor, device)
from kiln._C import Tensor, device, dtype  # noqa: F401
from kiln._size import Size  # noqa: F401
from kiln import _tensor  # noqa: F401  (Python-side Tensor methods: repr, iteration)
from kiln._dtype_info import finfo, iinfo  # noqa: F401
from kiln._tensor_str import set_printoptions  # noqa: F401
from kiln.functional import (  # noqa: F401
    broadcast_shapes,
    broadcast_tensors,
    cartesian_prod,
    meshgrid,
)
from kiln.autograd.grad_mode import (  # noqa: F401
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
)
from kiln.random import (  # noqa: F401
    Generator,
    default_generator,
    initial_seed,
    manual_seed,
    seed,
)
from kiln import autograd, backends, cuda, nn, optim  # noqa: F401
from kiln import amp  # noqa: F401
from kiln import special  # noqa: F401
from kiln import accelerator  # noqa: F401
from kiln import _legacy_types  # noqa: E402
from kiln import _layout  # noqa: E402

globals().update(_layout.LAYOUTS)  # kiln.layout, kiln.strided, kiln.sparse_coo, ...

globals().update(_legacy_types.CPU)  # kiln.FloatTensor, ... (Note [Legacy tensor types])
from kiln.amp.autocast_mode import (  # noqa: F401
    autocast,
    get_autocast_dtype,
    is_autocast_cache_enabled,
    is_autocast_enabled,
)
from kiln._compile import compile  # noqa: F401,A001  (torch.compile: runs eagerly)
# Functions PyTorch also offers at the top level with nn.functional's signature.
from kiln.nn.functional import (  # noqa: F401
    alpha_dropout,
    celu,
    celu_,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    cosine_similarity,
    feature_alpha_dropout,
    hardshrink,
    pairwise_distance,
    pdist,
    pixel_shuffle,
    pixel_unshuffle,
    prelu,
    rrelu,
    rrelu_,
    selu,
    selu_,
    threshold,
    threshold_,
)

OutOfMemoryError = _C.OutOfMemoryError

# Note [PyTorch API modules]: the rest of torch's and torch.Tensor's API lives in
# small modules, one family each; each installs its Tensor methods and exports its
# top-level functions here. None imports NumPy or a heavy module at import time.
from kiln import (  # noqa: E402
    _aliases, _conj, _control_flow, _discrete_sampling, _float_decomposition, _global_state,
    _householder, _incomplete_gamma, _inplace, _integer_ops, _linalg_ops, _lu, _nn_forms,
    _random_fills, _rnn_forms, _sorting, _spectral, _storage, _tensor_api, _view_ops,
    _windows,
)

for _module in (_conj, _control_flow, _discrete_sampling, _float_decomposition, _global_state,
                _householder, _incomplete_gamma, _integer_ops, _linalg_ops, _lu, _nn_forms,
                _rnn_forms, _sorting, _spectral, _storage, _tensor_api, _view_ops,
                _windows):
    globals().update({_name: getattr(_module, _name) for _name in _module.__all__})
    if hasattr(_module, "install"):
        _module.install()
_random_fills.install()
_aliases.install(globals())
globals().update(_inplace.install())
del _module
pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan
newaxis = None
is_grad_enabled = _C.is_grad_enabled

from kiln import __config__, version  # noqa: F401,E402
from kiln.version import __version__  # noqa: F401,E402


def is_floating_point(input):
    return input.is_floating_point()


def numel(input):
    return input.numel()


def set_float32_matmul_precision(precision):
    """"highest" keeps float32 matmuls in float32; "high" and "medium" allow TF32."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(
            f"[set_float32_matmul_precision] Invalid precision {precision!r}: "
            "expected 'highest', 'high' or 'medium'")
    backends.cuda.matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision():
    return "high" if backends.cuda.matmul.allow_tf32 else "highest"


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    """0/"default": off; 1/"warn": use_deterministic_algorithms(True, warn_only=True);
    2/"error": use_deterministic_algorithms(True)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"[set_deterministic_debug_mode] invalid mode {debug_mode!r}: "
                               "expected 'default', 'warn' or 'error'")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif not isinstance(debug_mode, _builtins.int):  # kiln.int is a dtype here
        raise TypeError("[set_deterministic_debug_mode] debug_mode must be a str or int, not "
                        f"{type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"[set_deterministic_debug_mode] invalid mode {debug_mode}: "
                           "expected 0, 1 or 2")
    _C.use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    if not _C.are_deterministic_algorithms_enabled():
        return 0
    return 1 if _C.is_deterministic_algorithms_warn_only_enabled() else 2


# Note [Lazy submodules]
# These submodules pull in the standard library's networking, process and JSON
# machinery (socket, subprocess, multiprocessing, json, secrets) and most programs
# never touch them, so they load on first attribute access (PEP 562) instead of at
# import kiln. kiln.distributed etc. still work right after import kiln, as in
# PyTorch, and dir(kiln) still lists them. Submodules every training script uses
# (nn, optim, cuda, amp, autograd, special) stay eager. For the same reason NumPy
# is imported inside the functions that use it (printing, finfo, gradcheck, ...).
_LAZY_SUBMODULES = ("distributed", "distributions", "doctor", "export", "multiprocessing", "onnx",
                    "profiler", "serialization", "sparse", "utils")
_LAZY_FUNCTIONS = {"load": "kiln.serialization", "save": "kiln.serialization",
                   "sparse_coo_tensor": "kiln.sparse", "spmm": "kiln.sparse",
                   "hspmm": "kiln.sparse"}


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        return _importlib.import_module(f"kiln.{name}")  # also binds kiln.<name>
    if name in _LAZY_FUNCTIONS:
        value = getattr(_importlib.import_module(_LAZY_FUNCTIONS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_SUBMODULES) | set(_LAZY_FUNCTIONS))
