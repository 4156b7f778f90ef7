"""kiln.nn.functional: neural-network math (ops implemented in C++)."""

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


def bilinear(input1, input2, weight, bias=None):
    """y[..., k] = sum_ij input1[..., i] weight[k, i, j] input2[..., j] (+ bias[k])."""
    out = _C.einsum("...i,kij,...j->...k", input1, weight, input2)
    return out if bias is None else out + bias
