"""kiln.nn.attention: choosing the scaled-dot-product attention implementation, as
torch.nn.attention.

kiln's implementations behind PyTorch's names (Note [Choosing an attention kernel] in
ops/attention.cpp): CUDNN_ATTENTION is cuDNN's fused flash attention (CUDA, float16/bfloat16),
FLASH_ATTENTION and EFFICIENT_ATTENTION both select kiln's own tiled fused kernels (every
device), MATH the composite reference.
"""

import contextlib
import enum

from kiln import _C

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_FLAGS = {
    SDPBackend.MATH: "sdp_math",
    SDPBackend.FLASH_ATTENTION: "sdp_flash",
    SDPBackend.EFFICIENT_ATTENTION: "sdp_mem_efficient",
    SDPBackend.CUDNN_ATTENTION: "sdp_cudnn",
}


def _backend_list(backends):
    if isinstance(backends, SDPBackend):
        return [backends]
    try:
        backends = list(backends)
    except TypeError:
        raise TypeError(
            "[sdpa_kernel] backends must be an SDPBackend or a list of them, got "
            f"{type(backends).__name__}") from None
    for b in backends:
        if not isinstance(b, SDPBackend):
            raise TypeError(f"[sdpa_kernel] expected SDPBackend values, got {b!r}")
    return backends


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Within the block, F.scaled_dot_product_attention may only use ``backends``; it raises
    "No available kernel" when none of them takes the inputs. ``set_priority`` is accepted for
    PyTorch compatibility: kiln always tries cuDNN, then its own kernels, then math."""
    chosen = _backend_list(backends)
    saved = {flag: _C._get_backend_flag(flag) for flag in _FLAGS.values()}
    try:
        for backend, flag in _FLAGS.items():
            _C._set_backend_flag(flag, backend in chosen)
        yield
    finally:
        for flag, value in saved.items():
            _C._set_backend_flag(flag, value)
