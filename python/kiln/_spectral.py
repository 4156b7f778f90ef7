"""torch.stft for real signals in PyTorch's real output format (return_complex=False:
a trailing dim of size 2 holding real and imaginary parts), since kiln has no
complex dtypes. The frames are an unfold view of the (padded) signal and the DFT
is one matmul with cos/sin matrices, so it runs on any device and differentiates.
"""

import math
import warnings

from kiln import _C
from kiln._C import Tensor

__all__ = ["stft"]


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None):
    if not isinstance(input, Tensor):
        raise TypeError(f"[stft] argument 'input' must be Tensor, not {type(input).__name__}")
    if return_complex is None:
        raise RuntimeError("[stft] stft requires the return_complex parameter be given for real "
                           "inputs, and will further require that return_complex=True in a "
                           "future PyTorch release.")
    if return_complex:
        raise NotImplementedError("[stft] kiln has no complex dtypes: pass return_complex=False "
                                  "for the (..., 2) real/imaginary format")
    if input.dim() not in (1, 2):
        raise RuntimeError(f"[stft] expected a 1D or 2D tensor, got {input.dim()}D")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"[stft] expected 0 < win_length <= n_fft, but got "
                           f"win_length={win_length}")
    if hop_length <= 0:
        raise RuntimeError(f"[stft] expected hop_length > 0, but got hop_length={hop_length}")
    x = input if input.dim() == 2 else input.unsqueeze(0)
    if not x.is_floating_point():
        x = x.to(_C.get_default_dtype())
    if center:
        from kiln.nn import functional as F

        x = F.pad(x.unsqueeze(1), (n_fft // 2, n_fft // 2), mode=pad_mode).squeeze(1)
    if not 0 < n_fft <= x.shape[-1]:
        raise RuntimeError(f"[stft] expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied, which "
                      "is known to cause spectral leakage.", UserWarning, stacklevel=2)
        window = _C.ones(win_length, dtype=x.dtype, device=x.device)
    elif window.dim() != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"[stft] expected a 1D window tensor of size equal to "
                           f"win_length={win_length}, but got window with size "
                           f"{list(window.shape)}")
    left = (n_fft - win_length) // 2
    window = _C.cat([_C.zeros(left, dtype=x.dtype, device=x.device), window.to(x.dtype),
                     _C.zeros(n_fft - win_length - left, dtype=x.dtype, device=x.device)])
    frames = x.unfold(-1, n_fft, hop_length) * window  # [batch, n_frames, n_fft]
    bins = n_fft // 2 + 1 if (onesided is None or onesided) else n_fft
    n = _C.arange(n_fft, dtype=_C.float64, device=x.device)
    k = _C.arange(bins, dtype=_C.float64, device=x.device)
    angle = (2 * math.pi / n_fft) * _C.outer(n, k)
    real = frames @ _C.cos(angle).to(x.dtype)
    imag = -(frames @ _C.sin(angle).to(x.dtype))
    out = _C.stack([real, imag], -1).transpose(1, 2)  # [batch, bins, n_frames, 2]
    if normalized:
        out = out / math.sqrt(n_fft)
    return out if input.dim() == 2 else out.squeeze(0)


def install():
    Tensor.stft = stft
