"""kiln.optim: PyTorch's optimizers and learning-rate schedulers. The common optimizers update
a param group with one multi-tensor C++ call (kiln._C._fused_*); the others (RAdam, NAdam,
Adamax, Adadelta) with in-place kiln tensor ops per parameter."""

from kiln.optim import lr_scheduler
from kiln.optim.adadelta import Adadelta
from kiln.optim.adagrad import Adagrad
from kiln.optim.adam import Adam
from kiln.optim.adamax import Adamax
from kiln.optim.adamw import AdamW
from kiln.optim.lbfgs import LBFGS
from kiln.optim.nadam import NAdam
from kiln.optim.optimizer import Optimizer
from kiln.optim.radam import RAdam
from kiln.optim.rmsprop import RMSprop
from kiln.optim.sgd import SGD

__all__ = ["Adadelta", "Adagrad", "Adam", "Adamax", "AdamW", "LBFGS", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "SGD", "lr_scheduler"]
