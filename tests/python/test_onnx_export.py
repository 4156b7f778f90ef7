"""kiln.onnx.export: the MLP, the CNN, the transformer encoder and the GPT run in ONNX Runtime
with kiln's eager outputs (1e-5), at the sample size and across their dynamic batch and
sequence sizes; the written model passes onnx.checker; PyTorch's arguments (names, dynamic
axes, opset, export_params, file objects); every error case."""

import io
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from export_models import MODELS, first

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

TOL = 1e-5


def session(proto):
    return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])


def eager(model, args):
    with kiln.no_grad():
        out = model(*args)
    return out if isinstance(out, (tuple, list)) else (out,)


def run_onnx(sess, args):
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, {n: a.numpy() for n, a in zip(names, args)})


AXES = {"mlp": {"x": {0: "batch"}}, "cnn": {"x": {0: "batch"}},
        "encoder": {"x": {0: "batch", 1: "seq"}}, "gpt": {"x": {0: "batch", 1: "seq"}}}


@pytest.fixture(params=list(MODELS))
def case(request):
    model, args, _, others = MODELS[request.param](np.random.default_rng(0))
    return request.param, model, args, others


def test_onnx_runtime_matches_eager_kiln_across_dynamic_sizes(case):
    name, model, args, others = case
    proto = kiln.onnx.export(model, args, input_names=["x"], dynamic_axes=AXES[name])
    onnx.checker.check_model(proto, full_check=True)
    sess = session(proto)
    for a in [args] + others:
        want = first(eager(model, a))
        got = run_onnx(sess, a)[0]
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got, want.numpy(), rtol=TOL, atol=TOL)


def test_dynamic_axes_name_the_onnx_dims_of_inputs_and_outputs():
    model, args, _, _ = MODELS["gpt"](np.random.default_rng(0))
    proto = kiln.onnx.export(model, args, input_names=["tokens"], output_names=["logits"],
                             dynamic_axes={"tokens": {0: "batch size", 1: "seq"},
                                           "logits": {0: "B"}})

    def dims(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]

    assert [i.name for i in proto.graph.input] == ["tokens"]
    assert dims(proto.graph.input[0]) == ["batch size", "seq"]
    assert [o.name for o in proto.graph.output] == ["logits"]
    assert dims(proto.graph.output[0]) == ["B", "seq", 29]
    assert proto.opset_import[0].version == 17
    # the tied weight is one initializer, and nothing unused is written
    inits = {i.name for i in proto.graph.initializer}
    assert "wte.weight" in inits and "lm_head.weight" not in inits
    used = {x for node in proto.graph.node for x in node.input}
    assert inits <= used


def test_dynamic_axes_as_a_list_of_axes():
    model, args, _, others = MODELS["mlp"](np.random.default_rng(0))
    proto = kiln.onnx.export(model, args, dynamic_axes={"input": [0]})
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == \
        "input_dynamic_axes_1"
    np.testing.assert_allclose(run_onnx(session(proto), others[0])[0],
                               first(eager(model, others[0])).numpy(), rtol=TOL, atol=TOL)


def test_static_export_has_fixed_sizes():
    model, args, _, _ = MODELS["cnn"](np.random.default_rng(0))
    proto = kiln.onnx.export(model, args)
    shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    assert shape == [6, 1, 20, 20]
    # no shape arithmetic in a static graph
    assert not {"Shape", "Concat"} & {n.op_type for n in proto.graph.node}
    with pytest.raises(Exception, match="(?i)dimension|shape"):
        session(proto).run(None, {"input": np.zeros((5, 1, 20, 20), np.float32)})


def test_writes_to_a_path_and_to_a_file_object(tmp_path):
    model, args, _, _ = MODELS["mlp"](np.random.default_rng(0))
    path = tmp_path / "mlp.onnx"
    proto = kiln.onnx.export(model, args, path)
    buf = io.BytesIO()
    kiln.onnx.export(model, args, buf)
    assert onnx.load(str(path)) == proto
    assert onnx.load_model_from_string(buf.getvalue()) == proto
    kiln.onnx.export(model, args, str(tmp_path / "again.onnx"))
    assert (tmp_path / "again.onnx").read_bytes() == path.read_bytes()


def test_export_params_false_makes_the_parameters_inputs():
    model, args, _, _ = MODELS["mlp"](np.random.default_rng(0))
    proto = kiln.onnx.export(model, args, export_params=False, input_names=["x"])
    assert not proto.graph.initializer
    names = [i.name for i in proto.graph.input]
    assert names == ["x", "0.weight", "0.bias", "2.weight", "2.bias"]
    feeds = {"x": args[0].numpy()}
    feeds.update({k: v.detach().numpy() for k, v in model.state_dict().items()})
    np.testing.assert_allclose(session(proto).run(None, feeds)[0],
                               first(eager(model, args)).numpy(), rtol=TOL, atol=TOL)
    kept = kiln.onnx.export(model, args, keep_initializers_as_inputs=True)
    assert len(kept.graph.input) == 5 and len(kept.graph.initializer) == 4


def test_training_mode_model_is_exported_in_eval_mode_and_left_in_training_mode():
    model, args, _, _ = MODELS["cnn"](np.random.default_rng(0))
    model.train()
    proto = kiln.onnx.export(model, args)
    assert all(m.training for m in model.modules())
    model.eval()
    np.testing.assert_allclose(run_onnx(session(proto), args)[0],
                               first(eager(model, args)).numpy(), rtol=TOL, atol=TOL)


def test_an_exported_program_exports():
    model, args, dims, others = MODELS["encoder"](np.random.default_rng(0))
    ep = kiln.export.export(model, args, dynamic_shapes=dims)
    proto = kiln.onnx.export(ep, f=None, input_names=["src"])
    got = run_onnx(session(proto), others[2])[0]
    np.testing.assert_allclose(got, first(eager(model, others[2])).numpy(), rtol=TOL, atol=TOL)


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.lin = nn.Linear(4, 4)
        self.conv = nn.Conv2d(2, 3, 3, padding="same", dilation=2)
        self.register_buffer("mask", kiln.tensor([[True, False, True], [True, True, False],
                                                  [False, False, True]]))

    def forward(self, x):
        return self.fn(self, x)


def check_fn(fn, x, opset_version=None, **kw):
    model = Lambda(fn).eval()
    proto = kiln.onnx.export(model, (x,), opset_version=opset_version, **kw)
    onnx.checker.check_model(proto, full_check=True)
    got = run_onnx(session(proto), (x,))
    want = eager(model, (x,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.numpy().dtype
        np.testing.assert_allclose(g, w.numpy(), rtol=TOL, atol=TOL)
    return proto


def test_the_ir_version_is_the_opsets_not_the_packages():
    # An older ONNX Runtime beside a newer onnx package must still load what kiln writes.
    proto = kiln.onnx.export(kiln.nn.Linear(3, 2), (kiln.randn(1, 3),), opset_version=17)
    assert proto.ir_version == 8


@pytest.mark.parametrize("opset_version", [17, 18])
def test_functional_and_elementwise_ops(opset_version):
    def fn(self, x):
        y = F.softmax(self.lin(x), dim=-1) + F.log_softmax(x, dim=1)
        z = kiln.cat([y, x.unsqueeze(0).squeeze(0)], dim=1).permute(1, 0).reshape(-1)
        w = kiln.where(x > 0.5, x.sigmoid(), -x.tanh()) * 2 - 1 / (x.abs() + 1)
        return (z.mean(), kiln.matmul(x, x.t()).sum(dim=1, keepdim=True),
                F.gelu(x, approximate="tanh"), F.gelu(x), x[1:, :2].flatten(),
                w.mean(dim=0), F.leaky_relu(x, 0.2), x.clamp(-0.5, 0.5), F.silu(x).rsqrt().exp(),
                (x >= 0) & (x != x[0]), x.square().sqrt() ** 2, kiln.maximum(x, x[:1] * 0.5),
                F.rms_norm(x, [4], eps=1e-6), x.select(1, 2), x.narrow(0, 1, 2),
                x.expand(2, 3, 4), kiln.arange(x.shape[0]) * 2, x.to(kiln.float64))

    check_fn(fn, kiln.randn(3, 4), opset_version)


def test_convolution_pooling_and_attention_with_a_mask():
    def fn(self, x):
        img = x.reshape(2, 2, 6, 6)
        c = self.conv(img)
        p = F.avg_pool2d(c, 2, ceil_mode=True, count_include_pad=False)
        a = F.adaptive_avg_pool2d(c, (3, 2))
        q = x.reshape(2, 2, 3, 12)
        att = F.scaled_dot_product_attention(q, q * 0.5, q + 1, attn_mask=self.mask)
        att_f = F.scaled_dot_product_attention(q, q, q, attn_mask=self.mask.float() * -0.5,
                                               scale=0.3)
        return p, a, att, att_f, F.max_pool2d(c, 3, stride=2, padding=1)

    check_fn(fn, kiln.randn(2, 72))


def test_split_and_chunk_along_a_dynamic_and_a_static_dim():
    def fn(self, x):
        a, b = x.chunk(2, dim=0)
        c, d = x.split(3, dim=1)
        e, f = x.chunk(2, dim=1)
        g = x.unflatten(1, (2, 2)).flatten(0, 1).unsqueeze(0).flatten(1)
        return a, b, c * 2, d, e + f, g

    proto = check_fn(fn, kiln.randn(5, 4), dynamic_axes={"x": {0: "n"}})
    x = kiln.randn(9, 4)
    got = run_onnx(session(proto), (x,))
    want = eager(Lambda(fn), (x,))
    assert [g.shape for g in got] == [tuple(w.shape) for w in want]
    assert got[0].shape == (5, 4) and got[1].shape == (4, 4) and got[5].shape == (1, 36)


def test_an_op_without_a_translation_is_named():
    with pytest.raises(kiln.onnx.UnsupportedOperatorError,
                       match=r"op 'lgamma' has no ONNX translation \(kiln\.onnx translates"):
        kiln.onnx.export(Lambda(lambda self, x: self.lin(x).lgamma()).eval(),
                         (kiln.randn(3, 4),))


def test_an_argument_without_a_translation_is_named():
    def fn(self, x):
        y, idx = F.max_pool2d(x.reshape(1, 1, 4, 3), 2, return_indices=True)
        return y, idx

    with pytest.raises(kiln.onnx.UnsupportedOperatorError,
                       match=r"op 'max_pool_nd': the indices output"):
        kiln.onnx.export(Lambda(fn).eval(), (kiln.randn(3, 4),))
    assert issubclass(kiln.onnx.UnsupportedOperatorError, kiln.onnx.OnnxExporterError)
    assert issubclass(kiln.onnx.OnnxExporterError, RuntimeError)


def test_a_graph_recorded_under_autocast_is_refused():
    model, args, _, _ = MODELS["mlp"](np.random.default_rng(0))
    with kiln.autocast("cpu"), pytest.raises(kiln.onnx.UnsupportedOperatorError,
                                             match=r"recorded under autocast \(ops \['linear'"):
        kiln.onnx.export(model, args)


def test_capture_errors_come_from_kiln_export():
    with pytest.raises(RuntimeError, match=r"\[export\] \.item\(\)"):
        kiln.onnx.export(Lambda(lambda self, x: x * x.sum().item()).eval(),
                         (kiln.randn(3, 4),))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"opset_version": 16}, ValueError, r"opset_version must be an int in \[17, "),
    ({"opset_version": "17"}, ValueError, "opset_version must be an int"),
    ({"dynamic_axes": {"y": {0: "b"}}}, ValueError, r"dynamic_axes names \['y'\]"),
    ({"dynamic_axes": {"input": {2: "b"}}}, ValueError, "axis 2 is out of range for a 2-d"),
    ({"dynamic_axes": {"input": {0: 3}}}, TypeError, "dim name must be a non-empty str"),
    ({"dynamic_axes": {"input": "batch"}}, TypeError, "must be a dict"),
    ({"dynamic_axes": [0]}, TypeError, "dynamic_axes must be a dict"),
    ({"input_names": ["a", "b"]}, ValueError, "input_names has 2 names for 1 inputs"),
    ({"input_names": "x"}, TypeError, "input_names must be a list of str"),
    ({"output_names": ["0.weight"]}, RuntimeError, "the name '0.weight' is used twice"),
    ({"dynamo": True}, TypeError, r"unsupported arguments: \['dynamo'\]"),
    ({"training": "TRAINING"}, ValueError, "only training=EVAL"),
])
def test_bad_arguments_are_refused(kwargs, error, message):
    model, args, _, _ = MODELS["mlp"](np.random.default_rng(0))
    with pytest.raises(error, match=message):
        kiln.onnx.export(model, args, **kwargs)


def test_bad_models_and_files_are_refused(tmp_path):
    with pytest.raises(TypeError, match="expected a kiln.nn.Module or a kiln.export"):
        kiln.onnx.export(lambda x: x, (kiln.randn(2),))
    model, args, _, _ = MODELS["mlp"](np.random.default_rng(0))
    with pytest.raises(TypeError, match="args must be a tuple"):
        kiln.onnx.export(model, [args[0]])
    with pytest.raises(TypeError, match="f must be a path or a binary file object"):
        kiln.onnx.export(model, args, 3)
    # one tensor is accepted for args, as in PyTorch
    assert kiln.onnx.export(model, args[0]).graph.input[0].name == "input"


def test_import_kiln_does_not_load_kiln_onnx_or_onnx():
    out = subprocess.run([sys.executable, "-c", "import sys, kiln; "
                          "print('kiln.onnx' in sys.modules, 'onnx' in sys.modules)"],
                         check=True, capture_output=True, text=True).stdout
    assert out.split() == ["False", "False"]
