"""kiln.optim: PyTorch's optimizers and learning-rate schedulers. Every optimizer updates a
param group with one multi-tensor C++ call (kiln._C._fused_*_)."""

from kiln.optim import lr_scheduler
from kiln.optim.adagrad import Adagrad
from kiln.optim.adam import Adam
from kiln.optim.adamw import AdamW
from kiln.optim.optimizer import Optimizer
from kiln.optim.rmsprop import RMSprop
from kiln.optim.sgd import SGD

__all__ = ["Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "SGD", "lr_scheduler"]
