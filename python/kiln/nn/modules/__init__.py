"""The layers of kiln.nn, one concern per file."""

from kiln.nn.modules.activation import (  # noqa: F401
    ELU, GELU, GLU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish,
    ReLU, ReLU6, SiLU, Sigmoid, Softmax, Softmin, Softplus, Softsign, Tanh,
)
from kiln.nn.modules.container import (  # noqa: F401
    ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential,
)
from kiln.nn.modules.dropout import Dropout  # noqa: F401
from kiln.nn.modules.flatten import Flatten, Unflatten  # noqa: F401
from kiln.nn.modules.linear import Bilinear, Identity, Linear  # noqa: F401
from kiln.nn.modules.loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss,
    NLLLoss, SmoothL1Loss,
)
from kiln.nn.modules.module import Module  # noqa: F401
from kiln.nn.modules.normalization import LayerNorm, RMSNorm  # noqa: F401
from kiln.nn.modules.sparse import Embedding  # noqa: F401
from kiln.nn.modules.transformer import (  # noqa: F401
    MultiheadAttention, TransformerEncoder, TransformerEncoderLayer,
)

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "Bilinear",
    "CrossEntropyLoss",
    "Dropout",
    "ELU",
    "Embedding",
    "Flatten",
    "GELU",
    "GLU",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "HuberLoss",
    "Identity",
    "KLDivLoss",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSigmoid",
    "LogSoftmax",
    "MSELoss",
    "Mish",
    "Module",
    "ModuleDict",
    "ModuleList",
    "MultiheadAttention",
    "NLLLoss",
    "ParameterDict",
    "ParameterList",
    "RMSNorm",
    "ReLU",
    "ReLU6",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "Softmin",
    "Softplus",
    "Softsign",
    "Tanh",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "Unflatten",
]
