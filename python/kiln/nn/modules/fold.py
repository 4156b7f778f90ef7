"""PyTorch's module path for Fold and Unfold (torch.nn.modules.fold); kiln defines them
with the other pure rearrangement layers in pixelshuffle.py."""

from kiln.nn.modules.pixelshuffle import Fold, Unfold  # noqa: F401
