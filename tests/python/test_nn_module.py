"""kiln.nn.Module and containers: registration, traversal, state_dict, hooks,
device/dtype moves, train/eval, repr."""

import copy
from collections import OrderedDict

import numpy as np
import pytest

import kiln
from kiln import nn
from helpers import assert_close, requires_gpu


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(3, 2, bias=False)
        self.scale = nn.Parameter(kiln.ones(2))
        self.register_buffer("steps", kiln.zeros(1, dtype=kiln.int64))
        self.register_buffer("cache", kiln.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


# --- Parameter ----------------------------------------------------------------

def test_parameter_aliases_data_and_keeps_its_class():
    data = kiln.randn(2, 3)
    p = nn.Parameter(data)
    assert isinstance(p, nn.Parameter) and isinstance(p, kiln.Tensor)
    assert p.requires_grad and p.is_leaf and p.data_ptr() == data.data_ptr()
    assert not nn.Parameter(kiln.randn(2), requires_grad=False).requires_grad
    (p * p).sum().backward()
    assert_close(p.grad, 2 * data.numpy())
    p.data = p.data.double()
    assert isinstance(p, nn.Parameter) and p.dtype == kiln.float64
    with kiln.no_grad():
        assert p.add_(1) is p
    assert repr(p).startswith("Parameter containing:\ntensor([[")
    assert repr(p).endswith("requires_grad=True)")


def test_parameter_from_non_leaf_is_detached_leaf():
    x = kiln.randn(3).requires_grad_()
    p = nn.Parameter(x * 2)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad


def test_parameter_deepcopy_clones():
    p = nn.Parameter(kiln.randn(3))
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad
    assert q.data_ptr() != p.data_ptr()
    assert_close(q, p.detach().numpy())


# --- registration -------------------------------------------------------------

def test_setattr_registers_parameters_buffers_and_modules():
    net = Net()
    assert list(net._parameters) == ["scale"]
    assert list(net._buffers) == ["steps", "cache"]
    assert list(net._modules) == ["fc1", "act", "fc2"]
    assert net.fc1 is net._modules["fc1"] and net.scale is net._parameters["scale"]
    assert net.fc2.bias is None
    net.extra = kiln.zeros(1)  # a plain tensor attribute is not registered
    assert "extra" not in net._buffers and "extra" not in net._parameters
    net.steps = kiln.ones(1, dtype=kiln.int64)
    assert net._buffers["steps"] is net.steps
    net.scale = None
    assert net.scale is None and "scale" in net._parameters
    assert [n for n, _ in net.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight"]


def test_reassigning_a_name_moves_it_between_registries():
    net = Net()
    net.act = nn.Parameter(kiln.zeros(1))
    assert "act" not in net._modules and net._parameters["act"] is net.act
    del net.act
    assert "act" not in net._parameters and not hasattr(net, "act")
    net.fc1 = None
    assert net.fc1 is None and "fc1" in net._modules


def test_registration_errors():
    net = Net()
    with pytest.raises(TypeError, match=r"\[Module.__setattr__\].*parameter 'scale'"):
        net.scale = kiln.ones(2)
    with pytest.raises(TypeError, match=r"\[Module.__setattr__\].*child module 'fc1'"):
        net.fc1 = 3
    with pytest.raises(TypeError, match=r"\[Module.__setattr__\].*buffer 'steps'"):
        net.steps = 3
    with pytest.raises(KeyError, match=r"already exists"):
        net.register_buffer("fc1", kiln.zeros(1))
    with pytest.raises(KeyError, match=r"register_parameter.*contain"):
        net.register_parameter("a.b", None)
    with pytest.raises(TypeError, match=r"\[Module.register_parameter\]"):
        net.register_parameter("w", kiln.zeros(1))
    with pytest.raises(TypeError, match=r"\[Module.register_buffer\]"):
        net.register_buffer("b", 1.0)
    with pytest.raises(AttributeError, match=r"has no attribute 'missing'"):
        net.missing

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(kiln.zeros(1))

    with pytest.raises(AttributeError, match=r"before Module.__init__"):
        Early()


def test_registry_entries_written_directly_are_found():
    m = nn.Module()
    m._parameters["w"] = nn.Parameter(kiln.ones(2))
    assert m.w is m._parameters["w"]
    assert [n for n, _ in m.named_parameters()] == ["w"]


def test_traversal_and_shared_parameters():
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.Sequential(nn.ReLU(), shared))
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1", "1.0"]
    assert [n for n, _ in seq.named_children()] == ["0", "1"]
    assert len(list(seq.modules())) == 4
    net = Net()
    assert [n for n, _ in net.named_buffers()] == ["steps", "cache"]
    assert list(net.parameters(recurse=False)) == [net.scale]
    assert net.get_submodule("fc1") is net.fc1
    assert net.get_parameter("fc1.weight") is net.fc1.weight
    assert net.get_buffer("steps") is net.steps
    with pytest.raises(AttributeError, match=r"\[Module.get_submodule\] Net has no attribute"):
        net.get_submodule("nope.x")
    with pytest.raises(AttributeError, match=r"\[Module.get_parameter\]"):
        net.get_parameter("fc1.nope")
    assert "fc1" in dir(net) and "scale" in dir(net) and "forward" in dir(net)


def test_apply_train_eval_requires_grad_zero_grad():
    net = Net()
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "ReLU", "Linear", "Net"]
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match=r"\[Module.train\]"):
        net.train("yes")
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_()
    net(kiln.randn(5, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


# --- state_dict ---------------------------------------------------------------

def test_state_dict_keys_values_and_round_trip():
    net = Net()
    sd = net.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == ["scale", "steps", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert not sd["fc1.weight"].requires_grad
    assert sd["fc1.weight"].data_ptr() == net.fc1.weight.data_ptr()
    assert net.state_dict(keep_vars=True)["scale"] is net.scale
    other = Net()
    fc1_weight = other.fc1.weight
    result = other.load_state_dict({k: v.clone() + 1 for k, v in sd.items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    assert other.fc1.weight is fc1_weight  # copied in place
    assert_close(other.fc1.weight, net.fc1.weight.detach().numpy() + 1)
    assert_close(other.steps, np.array([1]))


def test_load_state_dict_strict_errors_and_non_strict():
    net = Net()
    sd = net.state_dict()
    del sd["fc1.bias"]
    sd["fc3.weight"] = kiln.zeros(1)
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(sd)
    msg = str(err.value)
    assert msg.startswith("[Module.load_state_dict] Error(s) in loading state_dict for Net:")
    assert 'Missing key(s) in state_dict: "fc1.bias". ' in msg
    assert 'Unexpected key(s) in state_dict: "fc3.weight". ' in msg
    assert msg.index("Missing") < msg.index("Unexpected")
    missing, unexpected = net.load_state_dict(sd, strict=False)
    assert missing == ["fc1.bias"] and unexpected == ["fc3.weight"]
    sd = net.state_dict()
    sd["fc1.weight"] = kiln.zeros(4, 4)
    with pytest.raises(RuntimeError, match=r"size mismatch for fc1.weight: copying a param with "
                       r"shape kiln.Size\(\[4, 4\]\) from checkpoint, the shape in current "
                       r"model is kiln.Size\(\[3, 4\]\)"):
        net.load_state_dict(sd, strict=False)


def test_load_state_dict_assign_replaces_tensors():
    net = nn.Linear(2, 3)
    weight = net.weight
    new = {"weight": kiln.ones(3, 2), "bias": kiln.zeros(3)}
    net.load_state_dict(new, assign=True)
    assert net.weight is not weight and isinstance(net.weight, nn.Parameter)
    assert net.weight.data_ptr() == new["weight"].data_ptr() and net.weight.requires_grad


# --- hooks and calling --------------------------------------------------------

def test_forward_hooks_modify_and_remove():
    lin = nn.Linear(3, 3)
    calls = []
    pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
    out = lin(kiln.randn(2, 3))
    assert_close(out, np.broadcast_to(lin.bias.detach().numpy() + 1, (2, 3)))
    assert calls == [kiln.Size([2, 3])]
    pre.remove()
    post.remove()
    x = kiln.randn(2, 3)
    assert_close(lin(x), (x @ lin.weight.T + lin.bias).detach().numpy())
    order = []
    lin.register_forward_hook(lambda m, a, o: order.append("a"))
    lin.register_forward_hook(lambda m, a, o: order.append("b"), prepend=True)
    with lin.register_forward_pre_hook(lambda m, a, kw: order.append("kw") or None,
                                       with_kwargs=True):
        lin(x)
    lin(x)
    assert order == ["kw", "b", "a", "b", "a"]
    seen = []
    lin.register_forward_hook(lambda m, a, kw, o: seen.append(sorted(kw)), with_kwargs=True)
    lin(input=x)
    assert seen == [["input"]]


def test_forward_missing_raises():
    with pytest.raises(NotImplementedError, match=r'missing the required "forward"'):
        nn.Module()(1)


# --- dtype / device moves -----------------------------------------------------

def test_to_and_casts_keep_parameter_identity():
    net = Net()
    params = list(net.parameters())
    net(kiln.randn(2, 4)).sum().backward()
    assert net.double() is net
    assert list(net.parameters()) == params or all(a is b for a, b in zip(net.parameters(), params))
    assert all(p.dtype == kiln.float64 and p.grad.dtype == kiln.float64 for p in params)
    assert net.steps.dtype == kiln.int64  # only floating-point tensors change dtype
    assert net.cache.dtype == kiln.float64
    net.to(kiln.float32)
    assert net.fc1.weight.dtype == kiln.float32
    net.to("cpu", kiln.float16)
    assert net.fc1.weight.dtype == kiln.float16
    net.to(kiln.zeros(1, dtype=kiln.float64))
    assert net.fc1.weight.dtype == kiln.float64
    net.half().float()
    assert net.fc1.weight.dtype == kiln.float32 and net.bfloat16().scale.dtype == kiln.bfloat16
    assert net.cpu().fc1.weight.device.type == "cpu"
    assert all(a is b for a, b in zip(net.parameters(), params))
    with pytest.raises(TypeError, match=r"\[Module.to\].*floating point"):
        net.to(kiln.int64)
    with pytest.raises(TypeError, match=r"\[Module.to\] could not parse"):
        net.to("cpu", kiln.float32, False, 3)
    assert net.type(kiln.float64).steps.dtype == kiln.float64  # type() casts every tensor


@requires_gpu
def test_cuda_moves_parameters_grads_and_buffers():
    net = Net()
    net(kiln.randn(2, 4)).sum().backward()
    weight = net.fc1.weight
    net.cuda()
    assert net.fc1.weight is weight and weight.is_cuda and weight.grad.is_cuda
    assert net.steps.is_cuda
    out = net(kiln.randn(2, 4, device="cuda"))
    assert out.is_cuda
    net.to("cpu")
    assert not weight.is_cuda


def test_deepcopy_module_is_independent():
    net = Net()
    twin = copy.deepcopy(net)
    assert twin.fc1.weight is not net.fc1.weight
    assert twin.fc1.weight is twin.fc1._parameters["weight"]
    assert_close(twin.fc1.weight, net.fc1.weight.detach().numpy())
    with kiln.no_grad():
        twin.fc1.weight.add_(1)
    assert not np.allclose(twin.fc1.weight.detach().numpy(), net.fc1.weight.detach().numpy())


# --- repr ---------------------------------------------------------------------

def test_repr_matches_pytorch_format():
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Linear(in_features=784, out_features=512, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Linear(in_features=512, out_features=10, bias=True)\n"
        ")")
    net = nn.Sequential(OrderedDict(block=nn.Sequential(nn.Dropout(0.1)), act=nn.GELU()))
    assert repr(net) == (
        "Sequential(\n"
        "  (block): Sequential(\n"
        "    (0): Dropout(p=0.1, inplace=False)\n"
        "  )\n"
        "  (act): GELU(approximate='none')\n"
        ")")
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU()])
    assert repr(layers) == (
        "ModuleList(\n"
        "  (0-1): 2 x Linear(in_features=2, out_features=2, bias=True)\n"
        "  (2): ReLU()\n"
        ")")
    assert repr(nn.Module()) == "Module()"


# --- containers ---------------------------------------------------------------

def test_sequential_indexing_and_editing():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub) == [b, c]
    assert list(sub._modules) == ["1", "2"]
    x = kiln.randn(4, 2)
    assert_close(seq(x), c(b(a(x))).detach().numpy())
    seq.append(nn.Sigmoid())
    seq.insert(0, nn.Identity())
    assert [type(m).__name__ for m in seq] == ["Identity", "Linear", "ReLU", "Linear", "Sigmoid"]
    del seq[0]
    assert seq[0] is a and list(seq._modules) == ["0", "1", "2", "3"]
    seq[3] = nn.Tanh()
    assert isinstance(seq[3], nn.Tanh)
    seq.extend([nn.Identity()])
    assert len(seq) == 5 and len(seq + nn.Sequential(nn.ReLU())) == 6
    with pytest.raises(IndexError, match=r"\[Sequential.__getitem__\] index 9"):
        seq[9]
    named = nn.Sequential(OrderedDict(first=a, second=b))
    assert named.first is a and named[1] is b


def test_module_list_and_dict():
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml.append(nn.ReLU())
    ml += [nn.Tanh()]
    assert isinstance(ml[-1], nn.Tanh) and isinstance(ml[1:3], nn.ModuleList)
    del ml[0]
    assert list(ml._modules) == ["0", "1", "2", "3"]
    assert isinstance(ml.pop(0), nn.Linear) and len(ml) == 3
    md = nn.ModuleDict({"a": nn.Linear(1, 2), "b": nn.ReLU()})
    assert list(md) == ["a", "b"] and "a" in md and isinstance(md["b"], nn.ReLU)
    md["c"] = nn.Tanh()
    assert list(md.keys()) == ["a", "b", "c"] and md.c is md["c"]
    assert isinstance(md.pop("a"), nn.Linear) and len(md) == 2
    assert [n for n, _ in nn.ModuleDict({"x": nn.Linear(1, 1)}).named_parameters()] == \
        ["x.weight", "x.bias"]


def test_parameter_list_and_dict():
    pl = nn.ParameterList([kiln.ones(2), nn.Parameter(kiln.zeros(3))])
    assert len(pl) == 2 and all(isinstance(p, nn.Parameter) for p in pl)
    pl.append(kiln.ones(1))
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    assert "(0): Parameter containing: [kiln.float32 of size 2]" in repr(pl)
    pd = nn.ParameterDict({"w": kiln.ones(2, 2)})
    pd["b"] = nn.Parameter(kiln.zeros(2))
    assert list(pd) == ["w", "b"] and isinstance(pd["w"], nn.Parameter)
    assert [n for n, _ in pd.named_parameters()] == ["w", "b"]
    del pd["w"]
    assert list(pd.keys()) == ["b"] and len(list(pd.parameters())) == 1
    with pytest.raises(RuntimeError, match=r"\[ParameterList.__call__\]"):
        pl()


def test_pytorch_snippet_runs_unchanged():
    torch = kiln
    nn_ = torch.nn
    model = nn_.Sequential(nn_.Linear(784, 512), nn_.ReLU(), nn_.Linear(512, 10))
    criterion = nn_.CrossEntropyLoss()
    output = model(torch.randn(100, 784))
    loss = criterion(output, torch.randint(0, 10, (100,)))
    loss.backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())
