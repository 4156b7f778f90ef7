"""kiln.optim.functional: PyTorch's functional optimizer steps, adam(params, grads, exp_avgs,
..., *, lr=..., ...), which update the given parameters and state tensors in place.

Each runs the same update as its optimizer class, over state the caller holds in lists (one
entry per parameter, in PyTorch's argument order): the lists become the per-parameter state
dicts the class's update reads and writes, so the tensors in them are updated in place."""

import kiln
from kiln import _C
from kiln.optim.adadelta import Adadelta
from kiln.optim.adafactor import Adafactor
from kiln.optim.adagrad import Adagrad
from kiln.optim.adam import Adam
from kiln.optim.adamax import Adamax
from kiln.optim.asgd import ASGD
from kiln.optim.muon import Muon
from kiln.optim.nadam import NAdam
from kiln.optim.radam import RAdam
from kiln.optim.rmsprop import RMSprop
from kiln.optim.rprop import Rprop
from kiln.optim.sgd import SGD

__all__ = ["adadelta", "adafactor", "adagrad", "adam", "adamax", "adamw", "asgd", "muon",
           "nadam", "radam", "rmsprop", "rprop", "sgd", "sparse_adam"]

_FUSED = {SGD: _C._fused_sgd_, Adam: _C._fused_adam_, RMSprop: _C._fused_rmsprop_,
          Adagrad: _C._fused_adagrad_}


def _check_no_scaling(name, grad_scale, found_inf):
    if grad_scale is not None or found_inf is not None:
        raise NotImplementedError(f"[optim.functional.{name}] grad_scale/found_inf are not "
                                  f"supported by kiln: unscale the gradients first "
                                  f"(GradScaler.unscale_)")


def _run(cls, params, grads, state_lists, group):
    """One step of cls's update. state_lists: state key -> per-parameter list (None, an empty
    list or None entries mean that state is absent)."""
    states = []
    for i in range(len(params)):
        states.append({key: values[i] for key, values in state_lists.items()
                       if values and values[i] is not None})
    with kiln.no_grad():
        fused = _FUSED.get(cls)
        if fused is None:
            for p, g, st in zip(params, grads, states):
                cls._update(p, g, st, group)
            return
        keys, scalars = cls._step_args(group)
        lists = [[st.get(key) for st in states] if key else [] for key in keys]
        made = fused(list(params), list(grads), *lists, *scalars)
        if made:  # SGD makes the momentum buffers it was given as None
            target = state_lists[keys[0]]
            for i, value in enumerate(made):
                target[i] = value


def adadelta(params, grads, square_avgs, acc_deltas, state_steps, capturable=False,
             foreach=None, differentiable=False, has_complex=False, *, lr, rho, eps,
             weight_decay, maximize):
    """Adadelta's update (see kiln.optim.Adadelta)."""
    _run(Adadelta, params, grads,
         {"square_avg": square_avgs, "acc_delta": acc_deltas, "step": state_steps},
         dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))


def adafactor(params, grads, row_vars, col_vars, variances, state_steps, foreach=None,
              grad_scale=None, found_inf=None, has_complex=False, *, d, lr, beta2_decay,
              weight_decay, eps1, eps2, maximize):
    """Adafactor's update (see kiln.optim.Adafactor)."""
    _check_no_scaling("adafactor", grad_scale, found_inf)
    _run(Adafactor, params, grads,
         {"row_var": row_vars, "col_var": col_vars, "variance": variances,
          "step": state_steps},
         dict(d=d, lr=lr, beta2_decay=beta2_decay, weight_decay=weight_decay,
              eps=(eps1, eps2), maximize=maximize))


def adagrad(params, grads, state_sums, state_steps, fused=None, grad_scale=None,
            found_inf=None, has_sparse_grad=False, foreach=None, differentiable=False,
            has_complex=False, *, lr, weight_decay, lr_decay, eps, maximize):
    """Adagrad's update (see kiln.optim.Adagrad)."""
    _check_no_scaling("adagrad", grad_scale, found_inf)
    _run(Adagrad, params, grads, {"sum": state_sums, "step": state_steps},
         dict(lr=lr, weight_decay=weight_decay, lr_decay=lr_decay, eps=eps, maximize=maximize))


def _adam(name, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, grad_scale,
          found_inf, decoupled, amsgrad, beta1, beta2, lr, weight_decay, eps, maximize):
    _check_no_scaling(name, grad_scale, found_inf)
    _run(Adam, params, grads,
         {"exp_avg": exp_avgs, "exp_avg_sq": exp_avg_sqs, "max_exp_avg_sq": max_exp_avg_sqs,
          "step": state_steps},
         dict(amsgrad=amsgrad, betas=(beta1, beta2), lr=lr, weight_decay=weight_decay, eps=eps,
              maximize=maximize, decoupled_weight_decay=decoupled))


def adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, foreach=None,
         capturable=False, differentiable=False, fused=None, grad_scale=None, found_inf=None,
         has_complex=False, decoupled_weight_decay=False, *, amsgrad, beta1, beta2, lr,
         weight_decay, eps, maximize):
    """Adam's update (see kiln.optim.Adam)."""
    _adam("adam", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
          grad_scale, found_inf, decoupled_weight_decay, amsgrad, beta1, beta2, lr,
          weight_decay, eps, maximize)


def adamw(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, foreach=None,
          capturable=False, differentiable=False, fused=None, grad_scale=None, found_inf=None,
          has_complex=False, *, amsgrad, beta1, beta2, lr, weight_decay, eps, maximize):
    """AdamW's update (see kiln.optim.AdamW)."""
    _adam("adamw", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
          grad_scale, found_inf, True, amsgrad, beta1, beta2, lr, weight_decay, eps, maximize)


def adamax(params, grads, exp_avgs, exp_infs, state_steps, foreach=None, maximize=False,
           differentiable=False, capturable=False, has_complex=False, *, eps, beta1, beta2, lr,
           weight_decay):
    """Adamax's update (see kiln.optim.Adamax)."""
    _run(Adamax, params, grads, {"exp_avg": exp_avgs, "exp_inf": exp_infs, "step": state_steps},
         dict(eps=eps, betas=(beta1, beta2), lr=lr, weight_decay=weight_decay,
              maximize=maximize))


def asgd(params, grads, axs, mus, etas, state_steps, foreach=None, maximize=False,
         differentiable=False, capturable=False, has_complex=False, *, lambd, lr, t0, alpha,
         weight_decay):
    """ASGD's update (see kiln.optim.ASGD)."""
    _run(ASGD, params, grads, {"ax": axs, "mu": mus, "eta": etas, "step": state_steps},
         dict(lambd=lambd, lr=lr, t0=t0, alpha=alpha, weight_decay=weight_decay,
              maximize=maximize))


def muon(params, grads, muon_momentum_bufs, *, foreach=None, lr, weight_decay, momentum,
         nesterov, ns_coefficients, ns_steps, eps, adjust_lr_fn, has_complex=False):
    """Muon's update (see kiln.optim.Muon)."""
    _run(Muon, params, grads, {"momentum_buffer": muon_momentum_bufs},
         dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
              ns_coefficients=ns_coefficients, ns_steps=ns_steps, eps=eps,
              adjust_lr_fn=adjust_lr_fn))


def nadam(params, grads, exp_avgs, exp_avg_sqs, mu_products, state_steps,
          decoupled_weight_decay=False, foreach=None, capturable=False, differentiable=False,
          has_complex=False, maximize=False, *, beta1, beta2, lr, weight_decay, momentum_decay,
          eps):
    """NAdam's update (see kiln.optim.NAdam)."""
    _run(NAdam, params, grads,
         {"exp_avg": exp_avgs, "exp_avg_sq": exp_avg_sqs, "mu_product": mu_products,
          "step": state_steps},
         dict(betas=(beta1, beta2), lr=lr, weight_decay=weight_decay,
              momentum_decay=momentum_decay, eps=eps,
              decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))


def radam(params, grads, exp_avgs, exp_avg_sqs, state_steps, decoupled_weight_decay=False,
          foreach=None, differentiable=False, capturable=False, has_complex=False,
          maximize=False, *, beta1, beta2, lr, weight_decay, eps):
    """RAdam's update (see kiln.optim.RAdam)."""
    _run(RAdam, params, grads,
         {"exp_avg": exp_avgs, "exp_avg_sq": exp_avg_sqs, "step": state_steps},
         dict(betas=(beta1, beta2), lr=lr, weight_decay=weight_decay, eps=eps,
              decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))


def rmsprop(params, grads, square_avgs, grad_avgs, momentum_buffer_list, state_steps,
            foreach=None, maximize=False, differentiable=False, capturable=False,
            has_complex=False, *, lr, alpha, eps, weight_decay, momentum, centered):
    """RMSprop's update (see kiln.optim.RMSprop)."""
    _run(RMSprop, params, grads,
         {"square_avg": square_avgs, "grad_avg": grad_avgs,
          "momentum_buffer": momentum_buffer_list, "step": state_steps},
         dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
              centered=centered, maximize=maximize))


def rprop(params, grads, prevs, step_sizes, state_steps, foreach=None, capturable=False,
          maximize=False, differentiable=False, has_complex=False, *, step_size_min,
          step_size_max, etaminus, etaplus):
    """Rprop's update (see kiln.optim.Rprop)."""
    _run(Rprop, params, grads, {"prev": prevs, "step_size": step_sizes, "step": state_steps},
         dict(step_sizes=(step_size_min, step_size_max), etas=(etaminus, etaplus),
              maximize=maximize))


def sgd(params, d_p_list, momentum_buffer_list, has_sparse_grad=False, foreach=None,
        fused=None, grad_scale=None, found_inf=None, *, weight_decay, momentum, lr, dampening,
        nesterov, maximize):
    """SGD's update (see kiln.optim.SGD); None momentum buffers are created in the list."""
    _check_no_scaling("sgd", grad_scale, found_inf)
    _run(SGD, params, d_p_list, {"momentum_buffer": momentum_buffer_list},
         dict(weight_decay=weight_decay, momentum=momentum, lr=lr, dampening=dampening,
              nesterov=nesterov, maximize=maximize))


def sparse_adam(params, grads, exp_avgs, exp_avg_sqs, state_steps, *, eps, beta1, beta2, lr,
                maximize):
    """SparseAdam's update: raises for dense gradients, as kiln.optim.SparseAdam does."""
    if grads:
        raise RuntimeError("[optim.functional.sparse_adam] SparseAdam does not support dense "
                           "gradients, please consider Adam instead")
