"""PyTorch's module path for the instance norms (torch.nn.modules.instancenorm); kiln
defines them beside batch norm, whose statistics code they share."""

from kiln.nn.modules.batchnorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401
