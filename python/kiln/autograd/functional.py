"""kiln.autograd.functional: vjp, jvp, jacobian, hessian, vhp and hvp of a
Python function, with PyTorch's signatures and return structures.

Everything is reverse mode: jvp uses the double-vjp trick (the vjp is linear
in its cotangent, so differentiating it with respect to a dummy cotangent
gives the jvp), and jacobian builds one row per output element.
"""

from kiln import _C
from kiln.autograd.grad_mode import enable_grad, set_grad_enabled


def _as_tuple(x, arg_name, fn_name):
    """(was_tuple, tuple of tensors); TypeError naming the bad entry."""
    is_tuple = isinstance(x, (tuple, list))
    items = tuple(x) if is_tuple else (x,)
    for i, el in enumerate(items):
        if not isinstance(el, _C.Tensor):
            where = f"the value at index {i}" if is_tuple else "the given object"
            raise TypeError(f"[{fn_name}] The {arg_name} given to {fn_name} must be either a "
                            f"Tensor or a tuple of Tensors but {where} has type "
                            f"{type(el).__name__}.")
    return is_tuple, items


def _tuple_postprocess(res, to_unpack):
    """Undoes _as_tuple: `to_unpack` is one flag, or (outer, inner) for nested results."""
    if isinstance(to_unpack, tuple):
        outer, inner = to_unpack
        if not inner:
            res = tuple(r[0] for r in res)
        if not outer:
            res = res[0]
        return res
    return res if to_unpack else res[0]


def _grad_preprocess(inputs, create_graph, need_graph):
    """Fresh tensors to differentiate with respect to. With create_graph they
    stay connected to the caller's graph (a view), so higher-order results
    flow back to the original inputs."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _grad_postprocess(x, create_graph):
    if isinstance(x, _C.Tensor):
        return x if create_graph else x.detach()
    return tuple(_grad_postprocess(el, create_graph) for el in x)


def _validate_v(v, other, is_other_tuple, fn_name):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"[{fn_name}] v is a tuple of invalid length: should be "
                               f"{len(other)} but got {len(v)}.")
        raise RuntimeError(f"[{fn_name}] The given v should contain a single Tensor.")
    for i, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prefix = f"Entry {i} in " if is_other_tuple else ""
            raise RuntimeError(f"[{fn_name}] {prefix}v has invalid size: should be "
                               f"{list(el_other.shape)} but got {list(el_v.shape)}.")


def _check_requires_grad(tensors, kind, strict, fn_name):
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise RuntimeError(f"[{fn_name}] The output of the user-provided function is "
                               f"independent of input {i}. This is not allowed in strict mode.")
        if not t.requires_grad:
            what = {"outputs": f"Output {i} of the user-provided function",
                    "jacobian": f"The jacobian of the user-provided function with respect to "
                                f"input {i}",
                    "grad_inputs": f"The gradient with respect to input {i}"}.get(kind, kind)
            raise RuntimeError(f"[{fn_name}] {what} does not require gradients. It must be "
                               f"computed in a differentiable manner from the input when "
                               f"running in strict mode.")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False):
    """autograd.grad over the outputs that require grad; None for unreached inputs."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return tuple(_C._grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs], True,
                          create_graph, True))


def _fill_in_zeros(grads, refs, strict, create_graph, stage, fn_name):
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                what = {"back": "The output of the user-provided function is independent of "
                                f"input {i}",
                        "back_trick": f"The gradient with respect to input {i} is independent of "
                                      "the inputs of the user-provided function",
                        "double_back": f"The jacobian of the user-provided function is "
                                       f"independent of input {i}"}[stage]
                raise RuntimeError(f"[{fn_name}] {what}. This is not allowed in strict mode.")
            g = _C.zeros_like(ref)
        elif strict and create_graph and not g.requires_grad:
            raise RuntimeError(f"[{fn_name}] The result with respect to input {i} is independent "
                               "of the inputs, which is not allowed in strict mode with "
                               "create_graph=True.")
        out.append(g)
    return tuple(out)


def _default_v(tensors, what, fn_name):
    if len(tensors) != 1 or tensors[0].numel() != 1:
        raise RuntimeError(f"[{fn_name}] The vector v can only be None if the {what} is a single "
                           "Tensor with a single element.")
    return None


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "vjp")
        _check_requires_grad(outputs, "outputs", strict, "vjp")
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple, "vjp")
        else:
            v = _default_v(outputs, "user-provided function returns", "vjp")
        grads = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, inputs, strict, create_graph, "back", "vjp")
    return (_tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
            _tuple_postprocess(_grad_postprocess(result, create_graph), is_inputs_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, by the double-vjp trick."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple, "jvp")
        else:
            v = _default_v(inputs, "input to the user-provided function", "jvp")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jvp")
        _check_requires_grad(outputs, "outputs", strict, "jvp")
        dummy = tuple(_C.zeros_like(o).requires_grad_(True) for o in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, dummy, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict, "jvp")
        with set_grad_enabled(create_graph):
            grads = _autograd_grad(grad_inputs, dummy, v, create_graph=create_graph)
            result = _fill_in_zeros(grads, outputs, strict, create_graph, "back_trick", "jvp")
    return (_tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
            _tuple_postprocess(_grad_postprocess(result, create_graph), is_outputs_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of func at inputs: for output i and input j a tensor of shape
    output_i.shape + input_j.shape, nested as tuples the way inputs/outputs are."""
    if vectorize:
        raise NotImplementedError("[jacobian] vectorize=True is not supported by kiln; use "
                                  "vectorize=False")
    if strategy != "reverse-mode":
        raise NotImplementedError(f"[jacobian] strategy={strategy!r} is not supported by kiln; "
                                  "only 'reverse-mode'")
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jacobian")
        _check_requires_grad(outputs, "outputs", strict, "jacobian")
        jac = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]
            flat = out.reshape(-1)
            for k in range(flat.numel()):
                grads = _autograd_grad((flat[k],), inputs, create_graph=create_graph)
                for j, (g, inp) in enumerate(zip(grads, inputs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"[jacobian] Output {i} of the user-provided "
                                               f"function is independent of input {j}. This is "
                                               "not allowed in strict mode.")
                        g = _C.zeros_like(inp)
                    elif strict and create_graph and not g.requires_grad:
                        raise RuntimeError(f"[jacobian] The jacobian of the user-provided "
                                           f"function is independent of input {j}. This is not "
                                           "allowed in strict mode when create_graph=True.")
                    rows[j].append(g)
            jac.append(tuple(
                _C.stack(r, 0).view(tuple(out.shape) + tuple(inp.shape)) if r else
                _C.zeros(tuple(out.shape) + tuple(inp.shape), dtype=inp.dtype, device=inp.device)
                for r, inp in zip(rows, inputs)))
        jac = _grad_postprocess(tuple(jac), create_graph)
    return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function: the Jacobian of its gradient. For
    tuple inputs, result[i][j] has shape inputs[i].shape + inputs[j].shape."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def single_output(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict, "hessian")
        if is_out_tuple:
            raise RuntimeError("[hessian] The function given to hessian should return a single "
                               "Tensor")
        if out.numel() != 1:
            raise RuntimeError("[hessian] The Tensor returned by the function given to hessian "
                               f"should contain a single element, got shape {list(out.shape)}")
        return out.reshape(())

    def jac_func(*inp):
        jac = jacobian(single_output, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict, "hessian")
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_output(func, inputs, fn_name):
    outputs = func(*inputs)
    is_out_tuple, t_out = _as_tuple(outputs, "outputs of the user-provided function", fn_name)
    if is_out_tuple or len(t_out) != 1:
        raise RuntimeError(f"[{fn_name}] The function given to {fn_name} should return a single "
                           "Tensor")
    if t_out[0].numel() != 1:
        raise RuntimeError(f"[{fn_name}] The Tensor returned by the function given to {fn_name} "
                           f"should contain a single element, got shape {list(t_out[0].shape)}")
    return t_out


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a scalar function."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for a scalar function. H is symmetric for the twice
    continuously differentiable functions this applies to, so H v = v^T H and
    kiln computes it as vhp (one backward fewer than PyTorch's double-back trick)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func, inputs, v, create_graph, strict, fn_name):
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", fn_name)
            v = _grad_preprocess(v, create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple, fn_name)
        else:
            v = _default_v(inputs, "input to the user-provided function", fn_name)
        outputs = _scalar_output(func, inputs, fn_name)
        _check_requires_grad(outputs, "outputs", strict, fn_name)
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict, fn_name)
        with set_grad_enabled(create_graph):
            grads = _autograd_grad(jac, inputs, v, create_graph=create_graph)
            result = _fill_in_zeros(grads, inputs, strict, create_graph, "double_back", fn_name)
    return (_grad_postprocess(outputs[0], create_graph),
            _tuple_postprocess(_grad_postprocess(result, create_graph), is_inputs_tuple))
