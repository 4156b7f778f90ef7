"""The unary elementwise ops' test entries: NumPy reference and sampling domain, one line per
op of ops/op_table.h. test_unary.py checks against the reference; test_vs_torch_elementwise.py
and test_cuda_elementwise.py sample the same domains, so a new op's domain is written once."""

import math

import numpy as np

erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name -> (NumPy reference, low, high): the sampling domain keeps the op
# finite and away from kinks so the same data serves gradcheck.
UNARY = {
    "neg": (np.negative, -2, 2),
    "abs": (np.abs, 0.1, 2),
    "sign": (np.sign, -2, 2),
    "exp": (np.exp, -2, 2),
    "exp2": (np.exp2, -2, 2),
    "log": (np.log, 0.1, 3),
    "log2": (np.log2, 0.1, 3),
    "log10": (np.log10, 0.1, 3),
    "log1p": (np.log1p, -0.5, 3),
    "expm1": (np.expm1, -2, 2),
    "sqrt": (np.sqrt, 0.1, 3),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0.1, 3),
    "reciprocal": (np.reciprocal, 0.5, 3),
    "sin": (np.sin, -3, 3),
    "cos": (np.cos, -3, 3),
    "tan": (np.tan, -1.2, 1.2),
    "tanh": (np.tanh, -2, 2),
    "sigmoid": (_sigmoid, -3, 3),
    "erf": (erf, -2, 2),
    "relu": (lambda x: np.maximum(x, 0), -2, 2),
    "square": (np.square, -2, 2),
    "asin": (np.arcsin, -0.9, 0.9),
    "acos": (np.arccos, -0.9, 0.9),
    "atan": (np.arctan, -3, 3),
    "sinh": (np.sinh, -2, 2),
    "cosh": (np.cosh, -2, 2),
    "asinh": (np.arcsinh, -3, 3),
    "acosh": (np.arccosh, 1.1, 3),
    "atanh": (np.arctanh, -0.9, 0.9),
    "silu": (lambda x: x * _sigmoid(x), -3, 3),
    "floor": (np.floor, -3, 3),
    "ceil": (np.ceil, -3, 3),
    "round": (np.round, -3, 3),
    "trunc": (np.trunc, -3, 3),
    "logical_not": (np.logical_not, -2, 2),
    "isnan": (np.isnan, -2, 2),
    "isinf": (np.isinf, -2, 2),
    "isfinite": (np.isfinite, -2, 2),
}
