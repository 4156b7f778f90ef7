"""gradcheck: compares autograd's Jacobian with central finite differences."""

from kiln import _C


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _flat_outputs(fn, inputs):
    return [o for o in _as_tuple(fn(*inputs)) if isinstance(o, _C.Tensor)]


def _host(t):
    return t.detach().cpu().numpy()


def _element_access(t):
    """(get(i), set(i, value)) reading and writing element i of the input's own memory, so a
    perturbation reaches func: a NumPy view on the CPU, element reads and writes elsewhere."""
    if t.device.type == "cpu":
        flat = t.detach().numpy().reshape(-1)
        return flat.__getitem__, flat.__setitem__
    flat = t.detach().view(-1)
    return (lambda i: flat[i].item()), flat.__setitem__


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, **_ignored):
    """True when d(func)/d(inputs) from backward matches finite differences.

    Inputs that require grad must be float64 (as in PyTorch: float32 finite
    differences are too noisy to check anything).
    """
    import numpy as np  # lazily: import kiln need not load NumPy (Note [Lazy submodules])

    inputs = _as_tuple(inputs)
    diff_inputs = [t for t in inputs if isinstance(t, _C.Tensor) and t.requires_grad]
    for t in diff_inputs:
        if t.dtype != _C.float64:
            raise ValueError(f"[gradcheck] inputs requiring grad must be float64, got {t.dtype}")
    outputs = _flat_outputs(func, inputs)

    for oi, out in enumerate(outputs):
        if not out.is_floating_point():
            continue
        n_out = out.numel()
        # Analytical Jacobian, one row per output element. An output that does
        # not require grad claims a zero Jacobian, which finite differences
        # then confirm (a forgotten backward record must not pass silently).
        analytical = [np.zeros((n_out, t.numel())) for t in diff_inputs]
        for j in range(n_out if out.requires_grad else 0):
            onehot = np.zeros(n_out, dtype=np.float64)
            onehot[j] = 1.0
            g = _C.from_numpy(onehot.reshape(tuple(out.shape))).to(out.dtype).to(out.device)
            grads = _C._grad([out], diff_inputs, [g], True, False, True)
            for k, gk in enumerate(grads):
                if gk is not None:
                    analytical[k][j] = gk.contiguous().view(-1).cpu().numpy()
        # Numerical Jacobian, one column per input element.
        for k, t in enumerate(diff_inputs):
            if not t.is_contiguous():
                raise ValueError("[gradcheck] inputs must be contiguous")
            get, put = _element_access(t)
            numerical = np.zeros((n_out, t.numel()))
            for i in range(t.numel()):
                orig = get(i)
                put(i, orig + eps)
                plus = _host(_flat_outputs(func, inputs)[oi]).astype(np.float64).ravel()
                put(i, orig - eps)
                minus = _host(_flat_outputs(func, inputs)[oi]).astype(np.float64).ravel()
                put(i, orig)
                numerical[:, i] = (plus - minus) / (2 * eps)
            if not np.allclose(analytical[k], numerical, atol=atol, rtol=rtol):
                if raise_exception:
                    raise RuntimeError(
                        f"[gradcheck] Jacobian mismatch for output {oi} with respect to input {k},\n"
                        f"numerical:{numerical}\nanalytical:{analytical[k]}")
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, **_ignored):
    """gradcheck of the gradients of func: checks the backward's own backward
    (second derivatives, and the dependence on grad_outputs) against finite
    differences. Random grad_outputs are drawn when none are given."""
    import numpy as np  # lazily: import kiln need not load NumPy (Note [Lazy submodules])

    inputs = _as_tuple(inputs)
    diff_inputs = [t for t in inputs if isinstance(t, _C.Tensor) and t.requires_grad]
    outputs = [o for o in _flat_outputs(func, inputs) if o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            _C.from_numpy(rng.uniform(-1, 1, size=tuple(o.shape))).to(o.dtype).requires_grad_(True)
            for o in outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)

    def grads_of(*args):
        ins, gouts = args[:n_in], args[n_in:]
        outs = [o for o in _flat_outputs(func, ins) if o.requires_grad]
        diff = [t for t in ins if isinstance(t, _C.Tensor) and t.requires_grad]
        grads = _C._grad(outs, diff, list(gouts), True, True, True)
        return tuple(g for g in grads if g is not None)

    if not diff_inputs:
        return True
    return gradcheck(grads_of, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
