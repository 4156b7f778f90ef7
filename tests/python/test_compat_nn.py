"""nn compatibility (issue 17): PyTorch's module paths (item 7) and re-assigned
submodules and parameters keeping their place (item 12)."""

import importlib

import numpy as np
import pytest

import kiln
from kiln import nn


@pytest.mark.parametrize("path, name", [
    ("activation", "MultiheadAttention"), ("activation", "ReLU"),
    ("linear", "Linear"),
    ("instancenorm", "InstanceNorm2d"), ("fold", "Unfold"), ("fold", "Fold"),
    ("channelshuffle", "ChannelShuffle"), ("upsampling", "Upsample"),
    ("upsampling", "UpsamplingBilinear2d"), ("normalization", "LayerNorm"),
    ("module", "Module"), ("container", "Sequential"), ("transformer", "TransformerEncoderLayer"),
])
def test_classes_import_from_pytorchs_module_paths(path, name):
    module = importlib.import_module(f"kiln.nn.modules.{path}")
    assert getattr(module, name) is getattr(nn, name)


def test_multihead_attention_projection_class_lives_in_linear():
    from kiln.nn.modules.linear import NonDynamicallyQuantizableLinear

    out_proj = nn.MultiheadAttention(4, 2).out_proj
    assert type(out_proj) is NonDynamicallyQuantizableLinear and isinstance(out_proj, nn.Linear)


def test_every_pytorch_module_path_kiln_has_the_class_of():
    torch = pytest.importorskip("torch")
    import inspect
    import pkgutil

    missing = []
    for info in pkgutil.iter_modules(torch.nn.modules.__path__):
        if info.name.startswith("_"):
            continue
        tmod = importlib.import_module(f"torch.nn.modules.{info.name}")
        for name, obj in vars(tmod).items():
            if (inspect.isclass(obj) and obj.__module__ == tmod.__name__
                    and not name.startswith("_") and hasattr(nn, name)):
                try:
                    kmod = importlib.import_module(f"kiln.nn.modules.{info.name}")
                except ImportError:
                    missing.append(f"{info.name} (module)")
                    continue
                if getattr(kmod, name, None) is not getattr(nn, name):
                    missing.append(f"{info.name}.{name}")
    assert missing == []


def test_module_utils_tuple_helpers():
    from kiln.nn.modules.utils import _ntuple, _pair, _quadruple, _reverse_repeat_tuple, _single
    from kiln.nn.modules.utils import _triple

    assert _pair(3) == (3, 3) and _pair((1, 2)) == (1, 2) and _single(4) == (4,)
    assert _triple([1, 2, 3]) == (1, 2, 3) and _quadruple(0) == (0, 0, 0, 0)
    assert _ntuple(2, "x").__name__ == "x"
    assert _reverse_repeat_tuple((1, 2), 2) == (2, 2, 1, 1)


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(2, 3)
        self.second = nn.Linear(3, 1)
        self.w = nn.Parameter(kiln.ones(2))
        self.v = nn.Parameter(kiln.zeros(2))


def test_reassigning_a_submodule_or_parameter_keeps_its_place():
    m = Two()
    before = [n for n, _ in m.named_parameters()]
    m.first = nn.Linear(2, 3)
    m.w = nn.Parameter(kiln.full((2,), 5.0))
    assert [n for n, _ in m.named_children()] == ["first", "second"]
    assert [n for n, _ in m.named_parameters()] == before
    assert list(m.state_dict()) == ["w", "v", "first.weight", "first.bias", "second.weight",
                                    "second.bias"]
    assert m.w.tolist() == [5.0, 5.0] and m._parameters["w"] is m.w
    # The optimizer sees the parameters in the same order as before the re-assignment.
    opt = kiln.optim.SGD(m.parameters(), lr=1.0)
    assert opt.param_groups[0]["params"][0] is m.w


def test_reassigning_across_kinds_moves_the_name():
    m = Two()
    m.first = nn.Parameter(kiln.ones(1))  # a submodule name now holds a parameter
    assert "first" not in dict(m.named_children())
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["w", "v", "first"]
    m.v = None  # a parameter slot set to None keeps its slot
    assert list(m._parameters) == ["w", "v", "first"] and m.v is None
    with pytest.raises(TypeError,
                       match=r"cannot assign 'kiln.Tensor\[kiln.float32\]' as parameter 'w'"):
        m.w = kiln.ones(2)


def test_reassignment_matches_pytorch():
    torch = pytest.importorskip("torch")

    def build(lib):
        m = lib.nn.Sequential()
        m.add_module("a", lib.nn.Linear(2, 2))
        m.add_module("b", lib.nn.ReLU())
        m.add_module("c", lib.nn.Linear(2, 1))
        m.a = lib.nn.Linear(2, 2)
        m.c.weight = lib.nn.Parameter(lib.ones(1, 2))
        return m

    k, t = build(kiln), build(torch)
    assert [n for n, _ in k.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert list(k.state_dict()) == list(t.state_dict())
    np.testing.assert_array_equal(k.c.weight.detach().numpy(), t.c.weight.detach().numpy())
