"""kiln.nn.functional: neural-network math (ops implemented in C++)."""

import warnings

from kiln import _C

relu = _C.relu
sigmoid = _C.sigmoid
tanh = _C.tanh
silu = _C.silu
gelu = _C.gelu
leaky_relu = _C.leaky_relu
elu = _C.elu
softplus = _C.softplus

_nn = _C._nn

softmax = _nn.softmax
log_softmax = _nn.log_softmax
cross_entropy = _nn.cross_entropy
nll_loss = _nn.nll_loss
mse_loss = _nn.mse_loss
l1_loss = _nn.l1_loss
binary_cross_entropy = _nn.binary_cross_entropy
binary_cross_entropy_with_logits = _nn.binary_cross_entropy_with_logits
linear = _nn.linear
layer_norm = _nn.layer_norm
embedding = _nn.embedding
one_hot = _nn.one_hot
logsigmoid = _nn.logsigmoid
softsign = _nn.softsign
hardtanh = _nn.hardtanh
relu6 = _nn.relu6
softmin = _nn.softmin
smooth_l1_loss = _nn.smooth_l1_loss
huber_loss = _nn.huber_loss
kl_div = _nn.kl_div
rms_norm = _nn.rms_norm
normalize = _nn.normalize
glu = _nn.glu
hardsigmoid = _nn.hardsigmoid
hardswish = _nn.hardswish
mish = _nn.mish
# PyTorch's functional forms of these take inplace=.
relu = _nn.relu
silu = _nn.silu
leaky_relu = _nn.leaky_relu
elu = _nn.elu
cosine_similarity = _nn.cosine_similarity
scaled_dot_product_attention = _nn.scaled_dot_product_attention
dropout = _C._dropout


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight a scalar or one value per channel (dim 1)."""
    if weight.dim() > 1:
        raise RuntimeError(f"[prelu] Expected `weight` to be a scalar or 1D tensor, but got "
                           f"weight of size {list(weight.shape)}")
    if weight.numel() != 1:
        channels = input.shape[1] if input.dim() > 1 else 1
        if input.dim() == 0 or channels != weight.numel():
            raise RuntimeError(f"[prelu] Mismatch of parameter numbers and input channel size: "
                               f"weight of size {list(weight.shape)}, input of size "
                               f"{list(input.shape)}")
        weight = weight.reshape([-1] + [1] * (input.dim() - 2))
    # x > 0 rather than x >= 0 so that at x == 0 the gradients are PyTorch's (weight for the
    # input, x for the weight).
    return _C.where(input > 0, input, weight * input)


def bilinear(input1, input2, weight, bias=None):
    """y[..., k] = sum_ij input1[..., i] weight[k, i, j] input2[..., j] (+ bias[k])."""
    out = _C.einsum("...i,kij,...j->...k", input1, weight, input2)
    return out if bias is None else out + bias

conv1d = _nn.conv1d
conv2d = _nn.conv2d
conv3d = _nn.conv3d
conv_transpose1d = _nn.conv_transpose1d
conv_transpose2d = _nn.conv_transpose2d
conv_transpose3d = _nn.conv_transpose3d
unfold = _nn.unfold
fold = _nn.fold
pad = _nn.pad
pixel_shuffle = _nn.pixel_shuffle
pixel_unshuffle = _nn.pixel_unshuffle
max_pool1d = _nn.max_pool1d
max_pool2d = _nn.max_pool2d
max_pool3d = _nn.max_pool3d
avg_pool1d = _nn.avg_pool1d
avg_pool2d = _nn.avg_pool2d
avg_pool3d = _nn.avg_pool3d
adaptive_avg_pool1d = _nn.adaptive_avg_pool1d
adaptive_avg_pool2d = _nn.adaptive_avg_pool2d
adaptive_avg_pool3d = _nn.adaptive_avg_pool3d
adaptive_max_pool1d = _nn.adaptive_max_pool1d
adaptive_max_pool2d = _nn.adaptive_max_pool2d
adaptive_max_pool3d = _nn.adaptive_max_pool3d
interpolate = _nn.interpolate
batch_norm = _nn.batch_norm
group_norm = _nn.group_norm
instance_norm = _nn.instance_norm


def _with_indices(pool, name):
    """PyTorch's `*_with_indices` spelling of a max pool: always (output, indices)."""

    def pool_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                          ceil_mode=False, return_indices=True):
        return pool(input, kernel_size, stride, padding, dilation, ceil_mode, True)

    pool_with_indices.__name__ = pool_with_indices.__qualname__ = name
    pool_with_indices.__doc__ = f"{pool.__name__} that always returns (output, indices)."
    return pool_with_indices


max_pool1d_with_indices = _with_indices(_nn.max_pool1d, "max_pool1d_with_indices")
max_pool2d_with_indices = _with_indices(_nn.max_pool2d, "max_pool2d_with_indices")
max_pool3d_with_indices = _with_indices(_nn.max_pool3d, "max_pool3d_with_indices")


def _adaptive_with_indices(pool, name):
    def pool_with_indices(input, output_size, return_indices=True):
        return pool(input, output_size, True)

    pool_with_indices.__name__ = pool_with_indices.__qualname__ = name
    pool_with_indices.__doc__ = f"{pool.__name__} that always returns (output, indices)."
    return pool_with_indices


adaptive_max_pool1d_with_indices = _adaptive_with_indices(
    _nn.adaptive_max_pool1d, "adaptive_max_pool1d_with_indices")
adaptive_max_pool2d_with_indices = _adaptive_with_indices(
    _nn.adaptive_max_pool2d, "adaptive_max_pool2d_with_indices")
adaptive_max_pool3d_with_indices = _adaptive_with_indices(
    _nn.adaptive_max_pool3d, "adaptive_max_pool3d_with_indices")


def relu_(input):
    """In-place relu."""
    return _nn.relu(input, inplace=True)


def elu_(input, alpha=1.0):
    """In-place elu."""
    return _nn.elu(input, alpha, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place hardtanh."""
    return _nn.hardtanh(input, min_val, max_val, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    """In-place leaky_relu."""
    return _nn.leaky_relu(input, negative_slope, inplace=True)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of interpolate (PyTorch warns the same way)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: interpolate(..., mode="nearest")."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: interpolate(..., mode="bilinear", align_corners=True)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def conv_tbc(input, weight, bias, pad=0):
    """A 1-d convolution over time-major input: input (T, B, C_in), weight
    (K, C_in, C_out), bias (C_out,) -> (T + 2 * pad - K + 1, B, C_out)."""
    if input.dim() != 3:
        raise RuntimeError(f"[conv_tbc] Input must have 3 dims: time, batch, in_channel, got "
                           f"input of size {list(input.shape)}")
    if weight.dim() != 3:
        raise RuntimeError(f"[conv_tbc] Weight tensor must have 3 dims: kernel_width, "
                           f"in_channels, out_channels, got weight of size {list(weight.shape)}")
    if bias.dim() != 1:
        raise RuntimeError(f"[conv_tbc] Bias must be 1-D, got bias of size {list(bias.shape)}")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError(f"[conv_tbc] Input dim 2 (input channels) is not == dim 1 in the "
                           f"weight tensor: input {list(input.shape)}, weight "
                           f"{list(weight.shape)}")
    if weight.shape[2] != bias.shape[0]:
        raise RuntimeError(f"[conv_tbc] Bias size must equal dim 2 in the weight tensor (output "
                           f"channels): weight {list(weight.shape)}, bias {list(bias.shape)}")
    out = _nn.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, 1, pad)
    return out.permute(2, 0, 1)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of [N, C, H, W] with probability p.

    As in PyTorch, other ranks are PyTorch's "feature dropout" of dims 0 and 1 with a
    warning: a 3-D input is (N, C, L), not (C, H, W), and a 2-D one (N, C) drops single
    elements."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"[dropout2d] dropout probability has to be between 0 and 1, but got {p}")
    dim = input.dim()
    if dim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {dim}-D input to dropout2d, which is deprecated "
                      "and will result in an error in a future release. To retain the behavior "
                      "and silence this warning, please use dropout instead. Note that dropout2d "
                      "exists to provide channel-wise dropout on inputs with 2 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 3D "
                      "or 4D inputs).", stacklevel=2)
    if dim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape "
                      "(C, H, W). To maintain the 1D channel-wise dropout behavior, please switch "
                      "to using dropout1d instead.", stacklevel=2)
    if dim < 2:
        raise RuntimeError(f"[dropout2d] Feature dropout requires at least 2 dimensions in the "
                           f"input, got input of size {list(input.shape)}")
    if not training or p == 0.0:
        return input
    shape = list(input.shape[:2]) + [1] * (dim - 2)
    keep = _C.rand(*shape, dtype=input.dtype, device=input.device) >= p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    out = input * (keep.to(input.dtype) * scale)
    if inplace:
        return input.copy_(out)
    return out


from kiln.nn._functional_activation import (  # noqa: E402,F401
    alpha_dropout, celu, celu_, dropout1d, dropout3d, feature_alpha_dropout, gumbel_softmax,
    hardshrink, rrelu, rrelu_, selu, selu_, softshrink, tanhshrink, threshold, threshold_,
)
from kiln.nn._functional_loss import (  # noqa: E402,F401
    cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss, margin_ranking_loss,
    multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss, pairwise_distance,
    pdist, poisson_nll_loss, soft_margin_loss, triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from kiln.nn._functional_misc import (  # noqa: E402,F401
    affine_grid, channel_shuffle, grid_sample, local_response_norm, lp_pool1d, lp_pool2d,
    lp_pool3d, max_unpool1d, max_unpool2d, max_unpool3d,
)
from kiln.nn._functional_misc import channel_shuffle as native_channel_shuffle  # noqa: E402,F401
from kiln.nn._functional_sparse import embedding_bag  # noqa: E402,F401
from kiln.nn._functional_fractional import (  # noqa: E402,F401
    fractional_max_pool2d, fractional_max_pool2d_with_indices, fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)
from kiln.nn._functional_ctc import ctc_loss  # noqa: E402,F401
from kiln.nn._functional_linear_ce import linear_cross_entropy  # noqa: E402,F401
from kiln.nn._functional_mha import multi_head_attention_forward  # noqa: E402,F401
