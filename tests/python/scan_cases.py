"""The scan ops' test entries, one line per op of KILN_SCAN_OPS (ops/op_table.h): a NumPy
reference and a sampling domain. test_scan.py checks every op against its reference (values,
indices, dims, non-contiguous input), the dtypes its signature column promises, and a float64
gradcheck; test_cuda_scan.py and test_functor_parity.py compare every op's CPU and CUDA results
on the same domain. A new scan op's tests are its line here."""

import numpy as np


def ref_extreme(a, axis, is_max):
    """PyTorch's cummax/cummin: a later equal value takes over (last index), NaN propagates
    and each later NaN takes over."""
    a = np.moveaxis(np.asarray(a), axis, -1)
    values, indices = np.empty_like(a), np.empty(a.shape, dtype=np.int64)
    for row in np.ndindex(a.shape[:-1]):
        best, at = None, 0
        for i, v in enumerate(a[row]):
            v_nan = isinstance(v, (float, np.floating)) and np.isnan(v)
            best_nan = best is not None and isinstance(best, (float, np.floating)) and np.isnan(best)
            if best is None or v_nan or (not best_nan and (v >= best if is_max else v <= best)):
                best, at = v, i
            values[row + (i,)], indices[row + (i,)] = best, at
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


# name -> (reference(a, axis): values, or (values, indices) for the Indexed ops; low, high): the
# sampling domain keeps each op finite and differentiable, so the same data serves gradcheck.
SCAN = {
    "cumsum": (lambda a, axis: np.cumsum(a, axis), -2, 2),
    "cumprod": (lambda a, axis: np.cumprod(a, axis), 0.5, 1.5),
    "cummax": (lambda a, axis: ref_extreme(a, axis, True), -2, 2),
    "cummin": (lambda a, axis: ref_extreme(a, axis, False), -2, 2),
    "logcumsumexp": (lambda a, axis: np.logaddexp.accumulate(a, axis=axis), -5, 5),
}
