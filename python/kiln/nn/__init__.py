"""kiln.nn: modules, parameters, initialisers and training utilities (PyTorch's torch.nn)."""

from kiln.nn import functional  # noqa: F401
from kiln.nn.parameter import Parameter  # noqa: F401
from kiln.nn.modules import *  # noqa: F401,F403
from kiln.nn.modules import Module  # noqa: F401
from kiln.nn import init, utils  # noqa: F401
from kiln.nn import parallel  # noqa: F401
from kiln.nn import attention  # noqa: F401
from kiln.nn.parameter import Buffer, UninitializedBuffer, UninitializedParameter  # noqa: F401
from kiln.nn.parallel import DataParallel  # noqa: F401
from kiln.nn.modules.utils import factory_kwargs  # noqa: F401
