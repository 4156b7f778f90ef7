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
