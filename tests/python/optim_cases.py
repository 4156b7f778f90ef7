"""Option sets for every kiln.optim optimizer and NumPy re-implementations of PyTorch's
single-tensor algorithms (float64), shared by test_optim.py and test_optim_vs_torch.py."""

import numpy as np

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True, maximize=True, eps=1e-6)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01, betas=(0.5, 0.6), maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.005, alpha=0.9, momentum=0.5, centered=True, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.5,
                     maximize=True, eps=1e-6)),
]


def case_id(case):
    name, kw = case
    return name + "-" + ("-".join(f"{k}={v}" for k, v in kw.items()) or "default")


def _sgd(p, grads, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
         maximize=False):
    buf = None
    for g in grads:
        g = -g if maximize else g
        g = g + weight_decay * p
        if momentum != 0:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def _adam(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
          maximize=False, decoupled=False):
    b1, b2 = betas
    m, v, vmax = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        g = -g if maximize else g
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if amsgrad:
            vmax = np.maximum(vmax, v)
        second = vmax if amsgrad else v
        denom = np.sqrt(second) / np.sqrt(1 - b2**t) + eps
        p = p - lr / (1 - b1**t) * m / denom
    return p


def _adamw(p, grads, weight_decay=1e-2, **kw):
    return _adam(p, grads, weight_decay=weight_decay, decoupled=True, **kw)


def _rmsprop(p, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
             centered=False, maximize=False):
    sq, buf, ga = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        g = -g if maximize else g
        g = g + weight_decay * p
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            ga = alpha * ga + (1 - alpha) * g
            avg = np.sqrt(sq - ga * ga) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


def _adagrad(p, grads, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
             eps=1e-10, maximize=False):
    s = np.full_like(p, initial_accumulator_value)
    for t, g in enumerate(grads, 1):
        g = -g if maximize else g
        g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (np.sqrt(s) + eps)
    return p


REFERENCE = {"SGD": _sgd, "Adam": _adam, "AdamW": _adamw, "RMSprop": _rmsprop,
             "Adagrad": _adagrad}


def reference(name, p, grads, kw):
    """p (float64) after len(grads) steps of PyTorch's algorithm."""
    return REFERENCE[name](np.asarray(p, np.float64), [np.asarray(g, np.float64) for g in grads],
                           **kw)
