"""PyTorch's module path for ChannelShuffle (torch.nn.modules.channelshuffle); kiln defines
it with the other pure rearrangement layers in pixelshuffle.py."""

from kiln.nn.modules.pixelshuffle import ChannelShuffle  # noqa: F401
