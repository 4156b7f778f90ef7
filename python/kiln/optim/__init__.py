"""kiln.optim: PyTorch's optimizers and learning-rate schedulers. The common optimizers update
a param group with one multi-tensor C++ call (kiln._C._fused_*); the others (RAdam, NAdam,
Adamax, Adadelta, ASGD, Rprop, Adafactor, Muon) with in-place kiln tensor ops per parameter."""

from kiln.optim import lr_scheduler, swa_utils
from kiln.optim.adadelta import Adadelta
from kiln.optim.adagrad import Adagrad
from kiln.optim.adam import Adam
from kiln.optim.adamax import Adamax
from kiln.optim.adafactor import Adafactor
from kiln.optim.adamw import AdamW
from kiln.optim.asgd import ASGD
from kiln.optim.lbfgs import LBFGS
from kiln.optim.muon import Muon
from kiln.optim.nadam import NAdam
from kiln.optim.optimizer import Optimizer
from kiln.optim.radam import RAdam
from kiln.optim.rmsprop import RMSprop
from kiln.optim.rprop import Rprop
from kiln.optim.sgd import SGD
from kiln.optim.sparse_adam import SparseAdam

__all__ = ["Adadelta", "Adagrad", "Adam", "Adamax", "AdamW", "LBFGS", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "SGD", "lr_scheduler"]
__all__ += ["ASGD", "Adafactor", "Muon", "Rprop", "SparseAdam", "swa_utils"]
from kiln.optim import functional  # noqa: E402
from kiln.optim._stateless import swap_in_optimizer_params_and_state  # noqa: E402

__all__ += ["functional", "swap_in_optimizer_params_and_state"]
