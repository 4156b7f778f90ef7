"""nn ops PyTorch exposes at the top level (torch.layer_norm, torch.embedding, ...).

They take ATen's signatures, which differ from torch.nn.functional's: losses take
``reduction`` as an int (0 none, 1 mean, 2 sum), ``embedding`` takes the weight
first, the norms take a trailing ``cudnn_enabled`` flag. Each translates its
arguments and calls kiln.nn.functional, so the computation, the checks and the
gradients are F's.
"""


from kiln import _C

__all__ = [
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "avg_pool1d", "batch_norm", "bilinear",
    "binary_cross_entropy_with_logits", "channel_shuffle", "constant_pad_nd",
    "conv_transpose3d", "cosine_embedding_loss", "embedding", "group_norm",
    "hinge_embedding_loss", "instance_norm", "kl_div", "layer_norm", "margin_ranking_loss",
    "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool3d", "native_batch_norm",
    "native_channel_shuffle", "native_dropout", "native_layer_norm", "poisson_nll_loss",
    "rms_norm", "triplet_margin_loss", "alpha_dropout_", "feature_alpha_dropout_",
    "feature_dropout", "feature_dropout_", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell",
    "gru_cell", "convolution", "grid_sampler", "affine_grid_generator", "native_group_norm",
    "norm_except_dim", "grid_sampler_2d", "grid_sampler_3d", "embedding_renorm_",
]

_GRID_MODES = ("bilinear", "nearest", "bicubic")
_GRID_PADDING = ("zeros", "border", "reflection")

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _F():
    from kiln.nn import functional

    return functional


def _reduction(reduction, op):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"[{op}] reduction must be 0 (none), 1 (mean) or 2 (sum), "
                         f"got {reduction!r}")
    return _REDUCTIONS[reduction]


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return _F().rms_norm(input, normalized_shape, weight, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return _F().group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                           eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled):
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                              momentum, eps)


def _stats(input, dims, eps):
    var, mean = _C.var_mean(input, dims, correction=0, keepdim=True)
    return mean, _C.rsqrt(var + eps)


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(output, mean, rstd), mean and rstd with the normalized dims kept as size 1."""
    dims = tuple(range(input.dim() - len(normalized_shape), input.dim()))
    mean, rstd = _stats(input, dims, eps)
    return layer_norm(input, normalized_shape, weight, bias, eps), mean, rstd


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(output, save_mean, save_invstd): the batch statistics per channel when training,
    empty tensors otherwise (PyTorch's CPU convention)."""
    out = batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                     True)
    if not training:
        empty = _C.empty(0, dtype=input.dtype, device=input.device)
        return out, empty, empty
    dims = (0,) + tuple(range(2, input.dim()))
    mean, invstd = _stats(input.detach(), dims, eps)
    return out, mean.flatten(), invstd.flatten()


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # ATen marks "no padding index" with -1; F.embedding with None.
    return _F().embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                          scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def _pool_stride(stride):
    return None if stride is None or (isinstance(stride, (list, tuple)) and not stride) \
        else stride


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, _pool_stride(stride), padding, dilation,
                           ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, _pool_stride(stride), padding, dilation,
                           ceil_mode, return_indices=True)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool2d(input, kernel_size, _pool_stride(stride), padding, dilation,
                           ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool3d(input, kernel_size, _pool_stride(stride), padding, dilation,
                           ceil_mode)


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False,
               count_include_pad=True):
    return _F().avg_pool1d(input, kernel_size, _pool_stride(stride), padding, ceil_mode,
                           count_include_pad)


def adaptive_avg_pool1d(input, output_size):
    return _F().adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input, output_size):
    """(values, indices), as ATen's op returns both."""
    return _F().adaptive_max_pool1d(input, output_size, return_indices=True)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _F().conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def bilinear(input1, input2, weight, bias=None):
    return _F().bilinear(input1, input2, weight, bias)


def channel_shuffle(input, groups):
    return _F().channel_shuffle(input, groups)


native_channel_shuffle = channel_shuffle


def constant_pad_nd(input, pad, value=0):
    return _F().pad(input, pad, mode="constant", value=value)


def kl_div(input, target, reduction=1, *, log_target=False):
    return _F().kl_div(input, target, reduction=_reduction(reduction, "kl_div"),
                       log_target=log_target)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=1):
    return _F().binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction(reduction, "binary_cross_entropy_with_logits"),
        pos_weight=pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction(reduction, "cosine_embedding_loss"))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _F().hinge_embedding_loss(input, target, margin,
                                     reduction=_reduction(reduction, "hinge_embedding_loss"))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction(reduction, "margin_ranking_loss"))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction(reduction, "poisson_nll_loss"))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False,
                        reduction=1):
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction(reduction, "triplet_margin_loss"))


def native_dropout(input, p, train):
    """(output, mask): the mask is a bool tensor of the kept elements."""
    if not train:
        return input.clone(), _C.ones_like(input, dtype=_C.bool)
    if p >= 1:
        return input * 0, _C.zeros_like(input, dtype=_C.bool)
    mask = _C.rand_like(input, dtype=input.dtype if input.is_floating_point()
                        else _C.float32) >= p
    return input * mask * (1.0 / (1.0 - p)), mask


def feature_dropout(input, p, train):
    """Drops whole channels: dropout1d for [C, L] / [N, C, L], dropout2d / dropout3d above."""
    F = _F()
    if input.dim() in (2, 3):
        return F.dropout1d(input, p, train)
    return F.dropout2d(input, p, train) if input.dim() == 4 else F.dropout3d(input, p, train)


def feature_dropout_(input, p, train):
    return input.copy_(feature_dropout(input, p, train))


def alpha_dropout_(input, p, train):
    return input.copy_(_F().alpha_dropout(input, p, train))


def feature_alpha_dropout_(input, p, train):
    return input.copy_(_F().feature_alpha_dropout(input, p, train))


def _cell_linear(input, hx, w_ih, w_hh, b_ih, b_hh):
    F = _F()
    return F.linear(input, w_ih, b_ih) + F.linear(hx, w_hh, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _C.tanh(_cell_linear(input, hx, w_ih, w_hh, b_ih, b_hh))


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _C.relu(_cell_linear(input, hx, w_ih, w_hh, b_ih, b_hh))


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """(h', c') with PyTorch's gate order i, f, g, o."""
    h, c = hx
    i, f, g, o = _cell_linear(input, h, w_ih, w_hh, b_ih, b_hh).chunk(4, -1)
    c_next = _C.sigmoid(f) * c + _C.sigmoid(i) * _C.tanh(g)
    return _C.sigmoid(o) * _C.tanh(c_next), c_next


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """h' with PyTorch's gate order r, z, n (the reset gate scales W_hn h + b_hn)."""
    F = _F()
    ir, iz, in_ = F.linear(input, w_ih, b_ih).chunk(3, -1)
    hr, hz, hn = F.linear(hx, w_hh, b_hh).chunk(3, -1)
    r, z = _C.sigmoid(ir + hr), _C.sigmoid(iz + hz)
    n = _C.tanh(in_ + r * hn)
    return (1 - z) * n + z * hx


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """ATen's one convolution entry point: conv{1,2,3}d or conv_transpose{1,2,3}d by the
    input's spatial rank."""
    F = _F()
    rank = input.dim() - 2
    if rank not in (1, 2, 3):
        raise RuntimeError(f"[convolution] expected a 3-D, 4-D or 5-D input, got "
                           f"{input.dim()}-D")
    if transposed:
        conv = getattr(F, f"conv_transpose{rank}d")
        return conv(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return getattr(F, f"conv{rank}d")(input, weight, bias, stride, padding, dilation, groups)


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """F.grid_sample with ATen's integer modes (0 bilinear, 1 nearest, 2 bicubic; padding
    0 zeros, 1 border, 2 reflection)."""
    return _F().grid_sample(input, grid, _GRID_MODES[interpolation_mode],
                            _GRID_PADDING[padding_mode], align_corners)


grid_sampler_2d = grid_sampler_3d = grid_sampler


def embedding_renorm_(weight, indices, max_norm, norm_type):
    """Rescales, in place and without gradient, the rows of weight that indices names whose
    norm_type-norm exceeds max_norm (what F.embedding(max_norm=...) does first)."""
    from kiln.autograd.grad_mode import no_grad

    rows = indices.reshape(-1).unique()
    with no_grad():
        selected = weight.index_select(0, rows)
        norms = _C.linalg.vector_norm(selected, norm_type, (1,), keepdim=True)
        scale = _C.where(norms > max_norm, max_norm / (norms + 1e-7), _C.ones_like(norms))
        weight.index_copy_(0, rows, selected * scale)
    return weight


def affine_grid_generator(theta, size, align_corners):
    return _F().affine_grid(theta, list(size), align_corners)


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """(output, mean, rstd), the statistics shaped [N, group]."""
    grouped = input.reshape(N, group, -1)
    mean, rstd = _stats(grouped, (2,), eps)
    return (group_norm(input, group, weight, bias, eps), mean.reshape(N, group),
            rstd.reshape(N, group))


def norm_except_dim(v, pow=2, dim=0):
    """The pow-norm of v over every dim but dim, kept broadcastable (weight norm's g)."""
    if dim == -1:
        return _C.linalg.vector_norm(v, pow)
    others = tuple(d for d in range(v.dim()) if d != dim)
    return _C.linalg.vector_norm(v, pow, others, keepdim=True)
