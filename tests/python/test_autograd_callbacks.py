"""End-of-backward callbacks: kiln.autograd.Variable._execution_engine.queue_callback."""

import pytest

import kiln
from kiln.autograd import Variable

queue_callback = Variable._execution_engine.queue_callback


def _leaf(values):
    return kiln.tensor(values, dtype=kiln.float64, requires_grad=True)


def test_outside_backward_raises():
    with pytest.raises(RuntimeError, match=r"\[queue_callback\].*only be called during the "
                                           r"backward pass"):
        queue_callback(lambda: None)


def test_runs_after_every_node_in_order():
    a, b = _leaf([1.0, 2.0]), _leaf([3.0, 4.0])
    events = []

    def hook(p):
        events.append(("acc", id(p)))
        if len(events) == 1:
            queue_callback(lambda: events.append(("cb", 1, a.grad.tolist(), b.grad.tolist())))
            queue_callback(lambda: events.append(("cb", 2)))

    a.register_post_accumulate_grad_hook(hook)
    b.register_post_accumulate_grad_hook(hook)
    ((a * b).sum() + (a * a).sum()).backward()
    assert [e[0] for e in events] == ["acc", "acc", "cb", "cb"]
    # Both leaves are accumulated before the first callback sees them.
    assert events[2] == ("cb", 1, [5.0, 8.0], [1.0, 2.0])
    assert events[3] == ("cb", 2)


def test_callbacks_queue_more_callbacks():
    x = _leaf([2.0])
    order = []

    def first():
        order.append("first")
        queue_callback(lambda: order.append("queued by first"))

    x.register_hook(lambda g: queue_callback(first))
    x.register_post_accumulate_grad_hook(lambda p: queue_callback(lambda: order.append("second")))
    (x * 3).sum().backward()
    assert order == ["first", "second", "queued by first"]


def test_callbacks_run_once_per_backward_and_not_after():
    x = _leaf([1.0, -1.0])
    calls = []
    x.register_post_accumulate_grad_hook(lambda p: queue_callback(lambda: calls.append(1)))
    y = (x * x).sum()
    y.backward(retain_graph=True)
    assert calls == [1]
    y.backward()
    assert calls == [1, 1]
    with pytest.raises(RuntimeError, match=r"\[queue_callback\]"):
        queue_callback(lambda: calls.append(2))


def test_exception_in_callback_propagates():
    x = _leaf([1.0])

    def boom():
        raise ValueError("callback failed")

    x.register_post_accumulate_grad_hook(lambda p: queue_callback(boom))
    with pytest.raises(ValueError, match="callback failed"):
        (x * 2).sum().backward()
    # The failed pass leaves no callback state behind.
    with pytest.raises(RuntimeError, match=r"\[queue_callback\]"):
        queue_callback(lambda: None)
    assert x.grad.tolist() == [2.0]


def test_autograd_grad_runs_callbacks():
    x = _leaf([3.0])
    seen = []
    x.register_hook(lambda g: queue_callback(lambda: seen.append(g.tolist())))
    (g,) = kiln.autograd.grad((x * x).sum(), x)
    assert seen == [[6.0]] and g.tolist() == [6.0]


def test_nested_backward_has_its_own_queue():
    x, y = _leaf([1.0]), _leaf([5.0])
    order = []

    def outer_hook(p):
        queue_callback(lambda: order.append("outer"))
        with kiln.enable_grad():  # hooks run under no_grad, as in PyTorch
            (y * 2).sum().backward()  # a nested pass: its callbacks run when it ends
        order.append("nested done")

    y.register_post_accumulate_grad_hook(lambda p: queue_callback(lambda: order.append("inner")))
    x.register_post_accumulate_grad_hook(outer_hook)
    (x * 4).sum().backward()
    assert order == ["inner", "nested done", "outer"]


def test_variable_is_tensor_alias():
    t = kiln.tensor([1.0, 2.0])
    assert isinstance(t, Variable)
    assert not isinstance([1.0], Variable)
    v = Variable(t, requires_grad=True)
    assert v.requires_grad and v.is_leaf and v.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match=r"\[Variable\]"):
        Variable([1.0])


def test_accumulate_grad_node_exposes_variable():
    w = _leaf([1.0, 2.0])
    out = (w * 3).sum()
    acc = out.grad_fn.next_functions[0][0].next_functions[0][0]
    assert acc.name() == "AccumulateGrad"
    assert acc.variable is w
