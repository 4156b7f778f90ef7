"""PyTorch's module path for the upsampling layers (torch.nn.modules.upsampling); kiln
defines them with the other resampling layers in pixelshuffle.py."""

from kiln.nn.modules.pixelshuffle import (  # noqa: F401
    Upsample, UpsamplingBilinear2d, UpsamplingNearest2d,
)
