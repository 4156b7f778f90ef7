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
dropout = _C._dropout
