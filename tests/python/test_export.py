"""kiln.export: export -> ep.module() / save -> load -> run for the MLP, the CNN, a transformer
encoder layer and the GPT against eager kiln, dynamic sizes across their ranges, the graph's
printout, every error case of capture, of the run-time checks and of the loader."""

import json
import re

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from export_models import MODELS, first
from kiln.export import Dim

TOL = 1e-5


def close(a, b):
    np.testing.assert_allclose(first(a).numpy(), first(b).numpy(), rtol=TOL, atol=TOL)


@pytest.fixture(params=list(MODELS))
def model_case(request):
    return MODELS[request.param](np.random.default_rng(0))


def test_exported_module_matches_eager_at_the_sample_and_other_sizes(model_case):
    model, args, dims, others = model_case
    ep = kiln.export.export(model, args, dynamic_shapes=dims)
    run = ep.module()
    with kiln.no_grad():
        for a in [args] + others:
            close(run(*a), model(*a))


def test_save_load_round_trip_runs_the_same(model_case, tmp_path):
    model, args, dims, others = model_case
    ep = kiln.export.export(model, args, dynamic_shapes=dims)
    path = tmp_path / "model.kiln"
    kiln.export.save(ep, path)
    loaded = kiln.export.load(path)
    assert loaded.graph_json == ep.graph_json
    with kiln.no_grad():
        for a in [args] + others:
            close(loaded.module()(*a), model(*a))


def test_gpt_keeps_the_output_structure():
    model, args, dims, _ = MODELS["gpt"](np.random.default_rng(1))
    out = kiln.export.export(model, args, dynamic_shapes=dims).module()(*args)
    assert isinstance(out, tuple) and len(out) == 2 and out[1] is None
    assert out[0].shape == (3, 11, 29)


def test_graph_prints_ops_dims_and_symbolic_sizes():
    model, args, dims, _ = MODELS["gpt"](np.random.default_rng(0))
    ep = kiln.export.export(model, args, dynamic_shapes=dims)
    text = str(ep.graph)
    assert text.startswith("graph(%idx: int64[batch, seq]):")
    assert "# dim seq in [1, 50]" in text
    assert "= arange(0, seq, 1, kiln.int64, <device>)" in text
    assert "view(" in text and "[batch, seq, 2, 8]" in text
    assert "scaled_dot_product_attention(" in text
    # wte.weight is lm_head.weight: one constant under its first name
    assert "%wte.weight" in text and "%lm_head.weight" not in text
    assert ep.range_constraints == {"batch": (1, 64), "seq": (1, 50)}


def test_static_export_refuses_other_sizes():
    model, args, _, _ = MODELS["mlp"](np.random.default_rng(0))
    run = kiln.export.export(model, args).module()
    with pytest.raises(ValueError, match=r"dim 0 must be 7 \(static when exported\)"):
        run(kiln.randn(8, 64))


def test_batch_norm_uses_running_stats_and_dropout_is_identity():
    model, args, dims, _ = MODELS["cnn"](np.random.default_rng(0))
    ep = kiln.export.export(model, args, dynamic_shapes=dims)
    ops = [n["op"] for n in ep.graph.nodes]
    assert "batch_norm" in ops and "dropout" not in ops
    bn = next(n for n in ep.graph.nodes if n["op"] == "batch_norm")
    assert bn["args"][5] == {"bool": 0}  # training=False


# --- capture errors --------------------------------------------------------------------------


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.fn(self, x)


def export_fn(fn, x=None, **kw):
    model = Lambda(fn).eval()
    return kiln.export.export(model, (kiln.randn(3, 4) if x is None else x,), **kw)


def test_training_mode_is_refused():
    with pytest.raises(RuntimeError, match=r"\[export\] the module is in training mode.*eval\(\)"):
        kiln.export.export(nn.Linear(2, 2), (kiln.randn(3, 2),))


def test_item_is_refused_with_the_source_line():
    with pytest.raises(RuntimeError, match=r"(?s)\[export\] \.item\(\).*test_export\.py:\d+: "
                                           r".*self\.lin\(x\) \* x\.sum\(\)\.item\(\)"):
        export_fn(lambda self, x: self.lin(x) * x.sum().item())


def test_data_dependent_branch_is_refused():
    def fn(self, x):
        if x.sum() > 0:
            return x
        return -x
    with pytest.raises(RuntimeError, match=r"(?s)\[export\].*bool.*if x\.sum\(\) > 0"):
        export_fn(fn)


def test_in_place_on_an_input_is_refused():
    with pytest.raises(RuntimeError, match=r"(?s)\[export\] in-place op 'add_'.*x\.add_\(1\)"):
        export_fn(lambda self, x: x.add_(1))


def test_unsupported_differentiable_op_is_named():
    with pytest.raises(NotImplementedError, match=r"(?s)\[export\] op 'clone' cannot be exported"
                                                  r".*x\.clone\(\)"):
        export_fn(lambda self, x: self.lin(x.clone()))


def test_op_built_from_unexported_ops_is_refused_where_its_result_is_used():
    # cumsum runs internal ops before its autograd record: the first exportable op that meets
    # one of their results refuses it, with the model's line.
    with pytest.raises((NotImplementedError, RuntimeError),
                       match=r"(?s)\[export\].*kiln\.cumsum\(x, 0\)"):
        export_fn(lambda self, x: self.lin(kiln.cumsum(x, 0)))


def test_tensor_from_outside_the_graph_is_named():
    stray = kiln.ones(4)
    with pytest.raises(RuntimeError, match=r"(?s)\[export\] add: argument 1 is a tensor.*register "
                                           r"constant tensors as buffers"):
        export_fn(lambda self, x: x + stray)


def test_non_exportable_output_is_refused():
    with pytest.raises(RuntimeError, match=r"\[export\] output 0 is not computed"):
        export_fn(lambda self, x: kiln.zeros(3))


def test_python_values_and_control_flow_are_specialised():
    def fn(self, x):
        y = self.lin(x)
        for _ in range(2):  # unrolled into the graph
            y = y * 0.5 + 1
        return y

    model = Lambda(fn).eval()
    ep = kiln.export.export(model, (kiln.randn(3, 4),))
    x = kiln.randn(3, 4)
    with kiln.no_grad():
        close(ep.module()(x), model(x))
    ops = [n["op"] for n in ep.graph.nodes]
    assert ops.count("mul") == 2 and ops.count("add") == 2 and ops.count("scalar") == 4


def test_buffers_are_constants():
    class WithBuffer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", kiln.tensor([1.0, 2.0, 3.0]))

        def forward(self, x):
            return x * self.scale

    model = WithBuffer().eval()
    ep = kiln.export.export(model, (kiln.randn(2, 3),))
    assert [c["name"] for c in ep.graph.data["constants"]] == ["scale"]
    x = kiln.randn(2, 3)
    close(ep.module()(x), model(x))


# --- dynamic dims ----------------------------------------------------------------------------


def test_dim_validates_its_arguments():
    with pytest.raises(ValueError, match="identifier"):
        Dim("not a name")
    with pytest.raises(ValueError, match="min <= max"):
        Dim("b", min=5, max=2)
    with pytest.raises(TypeError, match="min must be an int"):
        Dim("b", min=1.5)
    assert repr(Dim("b", min=2)) == "Dim('b', min=2, max=inf)"


@pytest.mark.parametrize("shape, dims, message", [
    ((1, 4), {"x": {0: Dim("b")}}, "sample size of dim 'b' is 1"),
    ((3, 4), {"x": {0: Dim("b", min=4)}}, r"outside its range \[4, "),
    ((4, 4), {"x": {0: Dim("b")}}, "also a fixed size"),
    ((3, 3), {"x": {0: Dim("a"), 1: Dim("b")}}, "have the same sample size 3"),
    ((3, 4), {"y": {0: Dim("b")}}, r"names \['y'\]"),
    ((3, 4), {"x": {2: Dim("b")}}, "out of range for a 2-d input"),
    ((3, 4), {"x": {0: "b"}}, "expected a kiln.export.Dim"),
])
def test_bad_dynamic_shapes_are_refused(shape, dims, message):
    model = Lambda(lambda self, x: x * 2).eval()
    with pytest.raises((ValueError, TypeError), match=message):
        kiln.export.export(model, (kiln.randn(*shape),), dynamic_shapes=dims)


def test_run_time_checks_name_the_input_and_the_range():
    model, args, dims, _ = MODELS["encoder"](np.random.default_rng(0))
    run = kiln.export.export(model, args, dynamic_shapes=dims).module()
    with pytest.raises(ValueError, match=r"input 'src' dim 1 \(seq\) is 513, outside the exported "
                                         r"range \[1, 512\]"):
        run(kiln.randn(2, 513, 24))
    with pytest.raises(ValueError, match="input 'src' must be float32, got float64"):
        run(kiln.randn(2, 5, 24, dtype=kiln.float64))
    with pytest.raises(ValueError, match="must have 3 dims"):
        run(kiln.randn(5, 24))
    with pytest.raises(ValueError, match=r"dim 2 must be 24"):
        run(kiln.randn(2, 5, 25))
    with pytest.raises(TypeError, match="expected 1 tensor arguments"):
        run(kiln.randn(2, 5, 24), kiln.randn(2, 5, 24))


def test_one_dim_shared_by_two_inputs_must_agree():
    class Two(nn.Module):
        def forward(self, a, b):
            return a + b

    b = Dim("b")
    ep = kiln.export.export(Two().eval(), (kiln.randn(3, 4), kiln.randn(3, 4)),
                            dynamic_shapes={"a": {0: b}, "b": {0: b}})
    with pytest.raises(ValueError, match=r"input 'b' dim 0 \(b\) is 5 but another input gave b = 2"):
        ep.module()(kiln.randn(2, 4), kiln.randn(5, 4))


# --- autocast (Note [Autocast export]) -------------------------------------------------------

CPU_BF16 = [{"device_type": "cpu", "dtype": "bfloat16"}]


@pytest.mark.parametrize("name", list(MODELS))
def test_export_under_autocast_runs_in_the_recorded_precision(name, tmp_path):
    model, args, dims, others = MODELS[name](np.random.default_rng(0))
    with kiln.autocast("cpu"):
        ep = kiln.export.export(model, args, dynamic_shapes=dims)
    assert json.loads(ep.graph_json)["version"] == 2
    assert CPU_BF16 in [n.get("autocast") for n in ep.graph.nodes]
    assert "# autocast cpu bfloat16" in str(ep.graph)
    path = tmp_path / "model.kiln"
    kiln.export.save(ep, path)
    loaded = kiln.export.load(path)
    with kiln.no_grad():
        for a in [args] + others:
            with kiln.autocast("cpu"):
                want = first(model(*a))
            full = first(model(*a))
            for run in (ep.module(), loaded.module()):
                got = first(run(*a))  # outside any region: the program brings its own
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
        # the recorded precision is really lower than float32
        assert np.abs(got.float().numpy() - full.float().numpy()).max() > 1e-4


def test_only_the_ops_inside_the_region_are_recorded_with_it():
    def fn(self, x):
        y = self.lin(x)
        with kiln.autocast("cpu", enabled=False):
            z = self.lin(x)
        with kiln.autocast("cpu", dtype=kiln.float16):
            w = self.lin(x)
        return y, z, w

    model = Lambda(fn).eval()
    x = kiln.randn(3, 4)
    with kiln.autocast("cpu"):
        ep = kiln.export.export(model, (x,))
        with kiln.no_grad():
            want = model(x)
    regions = [n.get("autocast") for n in ep.graph.nodes if n["op"] == "linear"]
    assert regions == [CPU_BF16, None, [{"device_type": "cpu", "dtype": "float16"}]]
    got = ep.module()(x)
    assert [t.dtype for t in got] == [kiln.bfloat16, kiln.float32, kiln.float16]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.float().numpy(), w.float().numpy())


def test_a_program_without_autocast_ignores_the_callers_region():
    model, args, dims, _ = MODELS["mlp"](np.random.default_rng(0))
    run = kiln.export.export(model, args, dynamic_shapes=dims).module()
    with kiln.no_grad():
        want = model(*args)
        with kiln.autocast("cpu"):
            got = run(*args)
            assert kiln.is_autocast_enabled("cpu")
    assert got.dtype == kiln.float32
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_version_1_files_still_load(mlp_program):
    graph, state = mlp_program
    x = kiln.randn(7, 64)
    prog = load_graph(mutated(graph, lambda g: g.update(version=1)), state)
    np.testing.assert_array_equal(prog.run([x])[0].numpy(),
                                  load_graph(graph, state).run([x])[0].numpy())


# --- the loader ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp_program():
    model, args, dims, _ = MODELS["mlp"](np.random.default_rng(0))
    ep = kiln.export.export(model, args, dynamic_shapes=dims)
    return json.loads(ep.graph_json), ep.state_dict


def load_graph(graph, state):
    return kiln._C._export.Program(json.dumps(graph), state, "cpu")


def mutated(graph, fn):
    g = json.loads(json.dumps(graph))
    fn(g)
    return g


@pytest.mark.parametrize("mutate, error, message", [
    (lambda g: g.update(version=3), ValueError,
     "schema version 3 is not supported: this kiln reads versions 1 to 2"),
    (lambda g: g.update(format="x"), ValueError, "not an exported program"),
    (lambda g: g.pop("nodes"), ValueError, "missing 'nodes'"),
    (lambda g: g.update(nodes={}), ValueError, "'nodes' must be an array"),
    (lambda g: g["nodes"][0].update(op="frobnicate"), NotImplementedError,
     r"unknown op 'frobnicate' \(schema version 2"),
    (lambda g: g["nodes"][0].update(autocast={}), ValueError, "'autocast' must be an array"),
    (lambda g: g["nodes"][0].update(autocast=[{"device_type": "tpu", "dtype": "float16"}]),
     ValueError, "autocast device_type must be 'cpu' or 'cuda', got 'tpu'"),
    (lambda g: g["nodes"][0].update(autocast=[{"device_type": "cpu", "dtype": "int64"}]),
     ValueError, "autocast dtype must be float16 or bfloat16"),
    (lambda g: g["nodes"][0].update(autocast=[{"device_type": "cpu", "dtype": "float16"}] * 2),
     ValueError, "autocast names device_type 'cpu' twice"),
    (lambda g: (g.update(version=1),
                g["nodes"][0].update(autocast=[{"device_type": "cpu", "dtype": "float16"}])),
     ValueError, "'autocast' needs schema version 2"),
    (lambda g: g["nodes"][0]["args"][0].update(tensor=99), ValueError,
     r"value id 99 is out of range \[0, 8\)"),
    (lambda g: g["nodes"][0]["args"][0].update(tensor=7), ValueError,
     "value 7 is used before it is computed"),
    (lambda g: g["nodes"][0]["args"].pop(), ValueError, "takes 3 arguments, the graph gives 2"),
    (lambda g: g["nodes"][0]["args"].__setitem__(0, {"int": 3}), ValueError,
     "argument 0: has the wrong kind"),
    (lambda g: g["nodes"][0]["args"].__setitem__(0, {"blob": 3}), ValueError,
     "unknown argument kind 'blob'"),
    (lambda g: g["nodes"][1]["outputs"].__setitem__(0, 0), ValueError, "defined twice"),
    (lambda g: g["constants"][0]["meta"].update(shape=[48, 63]), ValueError,
     r"is float32 \[48, 64\] but the graph expects float32 \[48, 63\]"),
    (lambda g: g["constants"][0].update(name="nope"), ValueError, "has no tensor 'nope'"),
    (lambda g: g["inputs"][0]["meta"].update(shape=["beam", 64]), ValueError,
     "'beam' is not a declared dim"),
    (lambda g: g["inputs"][0]["meta"].update(dtype="float128"), ValueError,
     "unknown dtype 'float128'"),
    (lambda g: g["dims"][0].update(min=9, max=3), ValueError, "needs 0 <= min <= max"),
    (lambda g: g.update(num_values=-1), ValueError, "num_values -1 is out of range"),
    (lambda g: g["nodes"][0]["args"].__setitem__(0, {"tensor": "0"}), ValueError,
     "a value id must be an integer"),
])
def test_loader_rejects_bad_graphs_with_clear_errors(mlp_program, mutate, error, message):
    graph, state = mlp_program
    with pytest.raises(error, match=message):
        load_graph(mutated(graph, mutate), state)


def test_loader_rejects_bad_size_expressions(mlp_program):
    graph, state = mlp_program

    def with_view(size):
        def add(g):
            g["nodes"].append({"op": "view", "args": [{"tensor": g["outputs"][0]},
                                                      {"ints": [size, -1]}],
                               "outputs": [g["num_values"]], "meta": []})
            g["outputs"] = [g["num_values"]]
            g["num_values"] += 1
        return mutated(graph, add)

    prog = load_graph(with_view("(batch+1)//2*2-1"), state)
    assert prog.run([kiln.randn(7, 64)])[0].shape == (7, 10)
    for bad, message in [("batch+", "bad size expression"), ("beam", "not a declared dim"),
                         ("(batch", "missing '\\)'"), ("9" * 30, "number too large"),
                         ("", "1 to 256 characters")]:
        with pytest.raises(ValueError, match=message):
            load_graph(with_view(bad), state)


def test_loader_rejects_files_that_are_not_programs(tmp_path):
    plain = tmp_path / "weights.safetensors"
    kiln.save({"w": kiln.ones(2)}, plain)
    with pytest.raises(ValueError, match="not an exported program"):
        kiln.export.load(plain)
    with pytest.raises(TypeError, match=r"\[kiln.export.load\] expected a file path"):
        kiln.export.load(123)
    with pytest.raises(TypeError, match="expected an ExportedProgram"):
        kiln.export.save("x", tmp_path / "a.kiln")


def test_extra_tensors_in_the_file_are_refused(mlp_program):
    graph, state = mlp_program
    with pytest.raises(ValueError, match="the file holds 5 tensors but the graph names 4"):
        load_graph(graph, dict(state, extra=kiln.ones(1)))


# --- fuzzing the loader ----------------------------------------------------------------------

LOAD_ERRORS = (ValueError, TypeError, NotImplementedError, RuntimeError, IndexError)


def _small_ints(obj):
    if isinstance(obj, dict):
        return all(_small_ints(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_small_ints(v) for v in obj)
    return not isinstance(obj, int) or abs(obj) < 10**5


def _mutate(rng, g):
    """One random edit somewhere in the JSON tree: a value replaced, a key dropped, a list
    truncated or grown."""
    path = []
    node = g
    while isinstance(node, (dict, list)) and node and rng.random() < 0.8:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        k = keys[rng.integers(len(keys))]
        path.append((node, k))
        node = node[k]
    if not path:
        return
    parent, key = path[-1]
    choice = rng.integers(6)
    junk = [-1, 0, 1, 2, 3, 2**62, -2**62, "x", "batch*batch", "", [], {}, {"int": 1},
            {"tensor": 0}, "1e308"]
    if choice == 0 and isinstance(parent, dict):
        del parent[key]
    elif choice == 1 and isinstance(parent, list):
        del parent[key:]
    elif choice == 2 and isinstance(parent, list):
        parent.append(parent[key])
    else:
        parent[key] = junk[rng.integers(len(junk))]


def test_fuzzed_graphs_never_crash(mlp_program):
    graph, state = mlp_program
    rng = np.random.default_rng(0)
    x = kiln.randn(7, 64)
    loaded = 0
    for _ in range(400):
        g = json.loads(json.dumps(graph))
        for _ in range(rng.integers(1, 4)):
            _mutate(rng, g)
        try:
            prog = load_graph(g, state)
        except LOAD_ERRORS:
            continue
        loaded += 1
        if _small_ints(g):
            try:
                prog.run([x])
            except LOAD_ERRORS:
                pass
    assert loaded < 400  # the mutations do reach the checks


def test_fuzzed_files_never_crash(mlp_program, tmp_path):
    graph, state = mlp_program
    path = tmp_path / "m.kiln"
    kiln._C._export.save_program(str(path), json.dumps(graph), state)
    data = path.read_bytes()
    rng = np.random.default_rng(1)
    bad = tmp_path / "bad.kiln"
    cases = [data[:n] for n in rng.integers(0, len(data), 40)]
    for _ in range(150):
        b = bytearray(data)
        for i in rng.integers(0, len(b), rng.integers(1, 8)):
            b[i] = rng.integers(256)
        cases.append(bytes(b))
    header = int.from_bytes(data[:8], "little")
    for _ in range(60):  # corruption inside the JSON header, where the graph is
        b = bytearray(data)
        i = 8 + rng.integers(header)
        b[i] = rng.choice(list(b'{}[]",:0123456789-\\a'))
        cases.append(bytes(b))
    cases += [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in (0, 7, 8, 100, 5000)]
    cases.append((2**40).to_bytes(8, "little") + data[8:])  # oversized header length
    for case in cases:
        bad.write_bytes(case)
        try:
            kiln.export.load(bad)
        except LOAD_ERRORS:
            pass


def test_every_recorded_op_has_a_runner():
    names = set(kiln._C._export.runner_names())
    for op in ["linear", "conv_nd", "batch_norm", "max_pool_nd", "adaptive_avg_pool_nd",
               "layer_norm", "embedding", "scaled_dot_product_attention", "view", "split",
               "arange", "relu", "gelu", "add", "mul", "scalar", "contiguous", "transpose"]:
        assert op in names
    for make in MODELS.values():
        model, args, dims, _ = make(np.random.default_rng(0))
        ep = kiln.export.export(model, args, dynamic_shapes=dims)
        assert {n["op"] for n in ep.graph.nodes} <= names


def test_functional_ops_export():
    def fn(self, x):
        y = F.softmax(self.lin(x), dim=-1) + F.log_softmax(x, dim=1)
        z = kiln.cat([y, x.unsqueeze(0).squeeze(0)], dim=1).permute(1, 0).reshape(-1)
        return (z.mean(), kiln.matmul(x, x.t()).sum(dim=1, keepdim=True),
                F.gelu(x, approximate="tanh"), x[1:, :2].flatten())

    model = Lambda(fn).eval()
    ep = kiln.export.export(model, (kiln.randn(3, 4),))
    x = kiln.randn(3, 4)
    with kiln.no_grad():
        for a, b in zip(ep.module()(x), model(x)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=TOL, atol=TOL)
