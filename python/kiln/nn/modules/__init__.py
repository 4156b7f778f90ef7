"""The layers of kiln.nn, one concern per file."""

from kiln.nn.modules.activation import (  # noqa: F401
    CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid,
    LogSoftmax, Mish, PReLU, ReLU, ReLU6, RReLU, SELU, SiLU, Sigmoid, Softmax, Softmax2d, Softmin,
    Softplus, Softshrink, Softsign, Tanh, Tanhshrink, Threshold,
)
from kiln.nn.modules.batchnorm import (  # noqa: F401
    BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d,
    InstanceNorm3d,
)
from kiln.nn.modules.conv import (  # noqa: F401
    Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
)
from kiln.nn.modules.padding import (  # noqa: F401
    CircularPad1d, CircularPad2d, ConstantPad1d, ConstantPad2d, ReflectionPad1d, ReflectionPad2d,
    ReplicationPad1d, ReplicationPad2d, ZeroPad1d, ZeroPad2d,
)
from kiln.nn.modules.pixelshuffle import (  # noqa: F401
    ChannelShuffle, Fold, PixelShuffle, PixelUnshuffle, Unfold, Upsample, UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from kiln.nn.modules.pooling import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
    AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, LPPool1d, LPPool2d, MaxPool1d, MaxPool2d,
    MaxPool3d, MaxUnpool1d, MaxUnpool2d,
)
from kiln.nn.modules.container import (  # noqa: F401
    ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential,
)
from kiln.nn.modules.distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from kiln.nn.modules.dropout import (  # noqa: F401
    AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout,
)
from kiln.nn.modules.flatten import Flatten, Unflatten  # noqa: F401
from kiln.nn.modules.linear import Bilinear, Identity, LazyLinear, Linear  # noqa: F401
from kiln.nn.modules.loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, GaussianNLLLoss,
    HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
    MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss,
    SmoothL1Loss, SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
)
from kiln.nn.modules.module import Module  # noqa: F401
from kiln.nn.modules.normalization import LayerNorm, LocalResponseNorm, RMSNorm  # noqa: F401
from kiln.nn.modules.rnn import (  # noqa: F401
    GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase,
)
from kiln.nn.modules.sparse import Embedding, EmbeddingBag  # noqa: F401
from kiln.nn.modules.transformer import (  # noqa: F401
    MultiheadAttention, Transformer, TransformerDecoder, TransformerDecoderLayer,
    TransformerEncoder, TransformerEncoderLayer,
)

__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AlphaDropout",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "Bilinear",
    "CELU",
    "ChannelShuffle",
    "CircularPad1d",
    "CircularPad2d",
    "ConstantPad1d",
    "ConstantPad2d",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "CosineEmbeddingLoss",
    "CosineSimilarity",
    "CrossEntropyLoss",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "ELU",
    "Embedding",
    "EmbeddingBag",
    "FeatureAlphaDropout",
    "Flatten",
    "Fold",
    "GELU",
    "GLU",
    "GRU",
    "GRUCell",
    "GaussianNLLLoss",
    "GroupNorm",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "HingeEmbeddingLoss",
    "HuberLoss",
    "Identity",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "KLDivLoss",
    "L1Loss",
    "LPPool1d",
    "LPPool2d",
    "LSTM",
    "LSTMCell",
    "LayerNorm",
    "LazyLinear",
    "LeakyReLU",
    "Linear",
    "LocalResponseNorm",
    "LogSigmoid",
    "LogSoftmax",
    "MSELoss",
    "MarginRankingLoss",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "Mish",
    "Module",
    "ModuleDict",
    "ModuleList",
    "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss",
    "MultiMarginLoss",
    "MultiheadAttention",
    "NLLLoss",
    "PReLU",
    "PairwiseDistance",
    "ParameterDict",
    "ParameterList",
    "PixelShuffle",
    "PixelUnshuffle",
    "PoissonNLLLoss",
    "RMSNorm",
    "RNN",
    "RNNBase",
    "RNNCell",
    "RNNCellBase",
    "RReLU",
    "ReLU",
    "ReLU6",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "SELU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SmoothL1Loss",
    "SoftMarginLoss",
    "Softmax",
    "Softmax2d",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Tanh",
    "Tanhshrink",
    "Threshold",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
    "Unflatten",
    "Unfold",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
    "ZeroPad1d",
    "ZeroPad2d",
]

# PyTorch 2.x coverage (issue 17): lazy layers, 3-d padding and pooling, the rarer losses.
from kiln.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401,E402
from kiln.nn.modules.batchnorm import SyncBatchNorm  # noqa: F401,E402
from kiln.nn.modules.container import Container  # noqa: F401,E402
from kiln.nn.modules.lazy import (  # noqa: F401,E402
    LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d, LazyConv3d,
    LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d,
    LazyInstanceNorm2d, LazyInstanceNorm3d,
)
from kiln.nn.modules import batchnorm as _batchnorm  # noqa: E402
from kiln.nn.modules import conv as _conv  # noqa: E402
from kiln.nn.modules import instancenorm as _instancenorm  # noqa: E402
from kiln.nn.modules import lazy as _lazy  # noqa: E402

# PyTorch defines each lazy layer beside its eager class (torch.nn.modules.conv.LazyConv2d);
# kiln's live in lazy.py (they share one mixin) and are reachable by those paths too.
for _home, _names in ((_batchnorm, ("LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d")),
                      (_conv, ("LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
                               "LazyConvTranspose2d", "LazyConvTranspose3d")),
                      (_instancenorm, ("LazyInstanceNorm1d", "LazyInstanceNorm2d",
                                       "LazyInstanceNorm3d"))):
    for _name in _names:
        setattr(_home, _name, getattr(_lazy, _name))
del _home, _names, _name

from kiln.nn.modules.linear_cross_entropy_options import (  # noqa: F401,E402
    LinearCrossEntropyOptions,
)
from kiln.nn.modules.loss import CTCLoss, LinearCrossEntropyLoss, NLLLoss2d  # noqa: F401,E402
from kiln.nn.modules.normalization import CrossMapLRN2d  # noqa: F401,E402
from kiln.nn.modules.padding import (  # noqa: F401,E402
    CircularPad3d, ConstantPad3d, ReflectionPad3d, ReplicationPad3d, ZeroPad3d,
)
from kiln.nn.modules.pooling import (  # noqa: F401,E402
    FractionalMaxPool2d, FractionalMaxPool3d, LPPool3d, MaxUnpool3d,
)

__all__ += [
    "AdaptiveLogSoftmaxWithLoss", "CTCLoss", "CircularPad3d", "ConstantPad3d", "Container",
    "CrossMapLRN2d", "FractionalMaxPool2d", "FractionalMaxPool3d", "LPPool3d", "LazyBatchNorm1d",
    "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
    "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyInstanceNorm1d",
    "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LinearCrossEntropyLoss",
    "LinearCrossEntropyOptions", "MaxUnpool3d", "NLLLoss2d", "ReflectionPad3d",
    "ReplicationPad3d", "SyncBatchNorm", "ZeroPad3d",
]
