"""kiln.special: PyTorch's torch.special names for the special functions kiln has.

Most are the same functions as their top-level spelling (special.gammaln is
kiln.lgamma, special.expit is kiln.sigmoid); the rest are bound privately in
_C (python/bind_special.cpp) because PyTorch only exposes them here.
"""

from kiln import _C

erf = _C.erf
erfc = _C.erfc
erfinv = _C.erfinv
expit = _C.sigmoid
logit = _C.logit
exp2 = _C.exp2
expm1 = _C.expm1
log1p = _C.log1p
gammaln = _C.lgamma
digamma = _C.digamma
psi = _C.digamma
polygamma = _C.polygamma
xlogy = _C.xlogy
xlog1py = _C._special_xlog1py
entr = _C._special_entr
i0 = _C.i0
i1 = _C._special_i1
sinc = _C.sinc
ndtr = _C._special_ndtr
ndtri = _C._special_ndtri
log_ndtr = _C._special_log_ndtr
log_softmax = _C.log_softmax
softmax = _C.softmax
logsumexp = _C.logsumexp
round = _C.round



def gammainc(input, other):
    return _C.Tensor.igamma(input, other)  # kiln/_incomplete_gamma.py, installed by kiln


def gammaincc(input, other):
    return _C.Tensor.igammac(input, other)


def multigammaln(input, p):
    return _C.Tensor.mvlgamma(input, p)


__all__ = [
    "gammainc", "gammaincc", "multigammaln",
    "digamma", "entr", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammaln", "i0",
    "i1", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "ndtr", "ndtri",
    "polygamma", "psi", "round", "sinc", "softmax", "xlog1py", "xlogy",
]
