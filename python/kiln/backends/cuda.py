"""kiln.backends.cuda: ``kiln.backends.cuda.matmul.allow_tf32`` (default False) and the
scaled-dot-product attention switches (``enable_flash_sdp`` & co., all on by default; see
kiln.nn.attention for what each selects)."""

from kiln import _C
from kiln.backends._flag import Flag


class _MatmulFlags:
    allow_tf32 = Flag("matmul_allow_tf32")

    def __repr__(self):
        return f"kiln.backends.cuda.matmul(allow_tf32={self.allow_tf32})"


matmul = _MatmulFlags()


def is_built():
    return _C._cuda_is_built()


def _sdp_switch(flag):
    def enable(enabled):
        _C._set_backend_flag(flag, bool(enabled))

    def enabled():
        return _C._get_backend_flag(flag)

    return enable, enabled


enable_flash_sdp, flash_sdp_enabled = _sdp_switch("sdp_flash")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _sdp_switch("sdp_mem_efficient")
enable_cudnn_sdp, cudnn_sdp_enabled = _sdp_switch("sdp_cudnn")
enable_math_sdp, math_sdp_enabled = _sdp_switch("sdp_math")


def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True,
               enable_cudnn=True):
    """PyTorch's older (deprecated) spelling of kiln.nn.attention.sdpa_kernel."""
    from kiln.nn.attention import SDPBackend, sdpa_kernel

    switches = [(SDPBackend.FLASH_ATTENTION, enable_flash), (SDPBackend.MATH, enable_math),
                (SDPBackend.EFFICIENT_ATTENTION, enable_mem_efficient),
                (SDPBackend.CUDNN_ATTENTION, enable_cudnn)]
    return sdpa_kernel([backend for backend, on in switches if on])
