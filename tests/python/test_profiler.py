"""kiln.profiler on the CPU: what a training step records (every op, autograd node and
optimizer step, correctly nested), the table, the chrome trace, schedules, record_function,
the torch.autograd.profiler spelling, and errors. Kernel rows: test_cuda_profiler.py."""

import json
import warnings

import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from kiln.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule

CPU = [ProfilerActivity.CPU]


def names(events):
    return [e.name for e in events]


def training_step(model, opt, x, y):
    with record_function("forward"):
        loss = F.cross_entropy(model(x), y)
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer"):
        opt.step()
        opt.zero_grad()


def small_model(seed=0):
    kiln.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def step_events(**kwargs):
    model = small_model()
    opt = kiln.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = kiln.randn(4, 8), kiln.tensor([0, 1, 2, 0])
    with profile(activities=CPU, **kwargs) as prof:
        training_step(model, opt, x, y)
    return prof


def descendants(e):
    for c in e.cpu_children:
        yield c
        yield from descendants(c)


def test_a_training_step_records_forward_backward_and_optimizer_ops():
    prof = step_events()
    events = prof.events()
    ranges = {e.name: e for e in events if e.name in ("forward", "backward", "optimizer")}
    assert set(ranges) == {"forward", "backward", "optimizer"}
    fwd = names(descendants(ranges["forward"]))
    assert fwd.count("kiln::linear") == 2
    assert "kiln::relu" in fwd and "kiln::cross_entropy" in fwd
    bwd = names(descendants(ranges["backward"]))
    assert any(n.startswith("autograd::engine::evaluate_function: ") for n in bwd)
    assert sum(n.startswith("autograd::engine::evaluate_function: AccumulateGrad")
               for n in bwd) == 4  # two weights, two biases
    assert "kiln::_fused_sgd_" in names(descendants(ranges["optimizer"]))


def test_children_lie_within_their_parents_and_on_the_same_thread():
    events = step_events().events()
    assert len(events) > 20
    for e in events:
        for c in e.cpu_children:
            assert c.cpu_parent is e
            assert c.thread == e.thread
            assert e.time_range.start <= c.time_range.start <= c.time_range.end
            assert c.time_range.end <= e.time_range.end
        assert e.self_cpu_time_total >= 0
        assert e.cpu_time_total >= e.self_cpu_time_total


def test_composite_ops_nest_the_ops_they_call():
    x, w, b = kiln.randn(2, 3), kiln.randn(4, 3), kiln.randn(4)
    with profile(activities=CPU) as prof:
        F.linear(x, w, b)
    (linear,) = [e for e in prof.events() if e.name == "kiln::linear"]
    assert linear.cpu_parent is None
    assert linear.cpu_children, "linear's matmul/add should nest under it"


def test_backward_ops_nest_under_their_autograd_node():
    x = kiln.randn(3, requires_grad=True)
    y = (x * x).sum()
    with profile(activities=CPU) as prof:
        y.backward()
    nodes = [e for e in prof.events() if e.name.startswith("autograd::engine")]
    mul = [e for e in nodes if "MulBackward" in e.name]
    assert len(mul) == 1
    assert "kiln::mul" in names(descendants(mul[0]))


def test_record_function_nests_and_works_as_a_decorator():
    @record_function("outer")
    def work(t):
        with record_function("inner"):
            return t + 1

    with profile(activities=CPU) as prof:
        work(kiln.ones(2))
    events = {e.name: e for e in prof.events()}
    assert events["inner"].cpu_parent is events["outer"]
    assert events["kiln::add"].cpu_parent is events["inner"]


def test_record_function_outside_a_profiler_is_free_and_harmless():
    with record_function("nobody listens"):
        kiln.ones(2) + 1


def test_table_lists_ops_with_pytorch_columns_and_sorts():
    prof = step_events()
    avgs = prof.key_averages()
    table = avgs.table(sort_by="self_cpu_time_total", row_limit=5)
    lines = table.splitlines()
    header = lines[1]
    for column in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                   "# of Calls"):
        assert column in header
    assert "Self CUDA" not in header
    assert lines[-1].startswith("Self CPU time total:")
    rows = lines[3:-2]
    assert len(rows) == 5
    ordered = sorted(avgs, key=lambda e: e.self_cpu_time_total, reverse=True)
    assert rows[0].startswith(ordered[0].key[:20])
    counts = {a.key: a.count for a in avgs}
    assert counts["kiln::linear"] == 2
    assert counts["forward"] == 1


def test_key_averages_sums_the_events_of_a_name():
    with profile(activities=CPU) as prof:
        a = kiln.ones(3)
        for _ in range(5):
            a = a + 1
    events = [e for e in prof.events() if e.name == "kiln::add"]
    (avg,) = [a for a in prof.key_averages() if a.key == "kiln::add"]
    assert avg.count == 5 == len(events)
    assert avg.cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in events))
    assert avg.cpu_time == pytest.approx(avg.cpu_time_total / 5)


def test_record_shapes_and_group_by_input_shape():
    with profile(activities=CPU, record_shapes=True) as prof:
        kiln.ones(2, 3) + kiln.ones(2, 3)
        kiln.ones(4) + kiln.ones(4)
        kiln.ones(4) + kiln.ones(4)
    adds = [e for e in prof.events() if e.name == "kiln::add"]
    assert [e.input_shapes for e in adds] == [[[2, 3], [2, 3]], [[4], [4]], [[4], [4]]]
    grouped = {str(a.input_shapes): a.count for a in prof.key_averages(group_by_input_shape=True)
               if a.key == "kiln::add"}
    assert grouped == {"[[2, 3], [2, 3]]": 1, "[[4], [4]]": 2}
    assert "Input Shapes" in prof.key_averages(group_by_input_shape=True).table()


def test_shapes_are_not_recorded_unless_asked():
    with profile(activities=CPU) as prof:
        kiln.ones(2) + kiln.ones(2)
    assert all(e.input_shapes == [] for e in prof.events())


def test_profile_memory_records_allocations_and_frees_inside_their_op(tmp_path):
    with profile(activities=CPU, profile_memory=True) as prof:
        t = kiln.ones(1000)  # 4000 bytes of float32
        del t
    (full,) = [e for e in prof.events() if e.name == "kiln::full"]
    assert full.self_cpu_memory_usage == full.cpu_memory_usage == 4000
    memory = [e for e in prof.events() if e.name == "[memory]"]
    assert sorted(m.nbytes for m in memory) == [-4000, 4000]
    assert "CPU Mem" in prof.key_averages().table()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    trace = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert sorted(e["args"]["Bytes"] for e in trace if e["name"] == "[memory]") == [-4000, 4000]


def test_memory_is_not_recorded_unless_asked():
    with profile(activities=CPU) as prof:
        kiln.ones(1000)
    assert not [e for e in prof.events() if e.name == "[memory]"]


def test_chrome_trace_is_valid_json_with_nested_complete_events(tmp_path):
    prof = step_events(record_shapes=True)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    by_name = {}
    for s in spans:
        by_name.setdefault(s["name"], []).append(s)
    for required in ("forward", "backward", "optimizer", "kiln::linear", "kiln::cross_entropy",
                     "kiln::_fused_sgd_"):
        assert required in by_name, required
    assert by_name["forward"][0]["cat"] == "user_annotation"
    assert by_name["kiln::linear"][0]["cat"] == "cpu_op"
    assert by_name["kiln::linear"][0]["args"]["Input Dims"] == [[4, 8], [16, 8], [16]]
    # Every op of the forward pass lies inside the forward range on the same lane.
    fwd = by_name["forward"][0]
    for s in by_name["kiln::linear"]:
        assert s["tid"] == fwd["tid"] and s["pid"] == fwd["pid"]
        assert fwd["ts"] <= s["ts"] and s["ts"] + s["dur"] <= fwd["ts"] + fwd["dur"] + 1e-3
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in trace["traceEvents"])


def test_chrome_trace_gzip(tmp_path):
    import gzip

    with profile(activities=CPU) as prof:
        kiln.ones(2) * 2
    path = tmp_path / "trace.json.gz"
    prof.export_chrome_trace(str(path))
    with gzip.open(path, "rt") as f:
        assert any(e.get("name") == "kiln::mul" for e in json.load(f)["traceEvents"])


def test_schedule_follows_pytorch_states():
    with pytest.warns(UserWarning, match="warmup"):
        s0 = schedule(wait=1, warmup=0, active=1)
    assert s0(0) == ProfilerAction.NONE and s0(1) == ProfilerAction.RECORD_AND_SAVE
    s = schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    got = [s(i).name for i in range(11)]
    assert got == ["NONE", "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE",
                   "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE", "NONE", "NONE"]
    torch = pytest.importorskip("torch")
    ts = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    assert [ts(i).name for i in range(11)] == got


def test_schedule_records_only_active_steps_and_calls_on_trace_ready():
    traces = []

    def ready(p):
        traces.append({e.name for e in p.events()})

    with profile(activities=CPU, schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=ready) as prof:
        for step in range(6):
            with record_function(f"work{step}"):
                kiln.ones(1) + step
            prof.step()
    assert len(traces) == 1
    recorded = traces[0]
    assert {"work2", "work3"} <= recorded
    assert not {"work0", "work1", "work4", "work5"} & recorded
    assert {"ProfilerStep#2", "ProfilerStep#3"} <= recorded


def test_tensorboard_trace_handler_writes_one_file_per_cycle(tmp_path):
    from kiln.profiler import tensorboard_trace_handler

    with profile(activities=CPU, schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
                 on_trace_ready=tensorboard_trace_handler(str(tmp_path), "worker0")) as prof:
        for _ in range(5):
            kiln.ones(1) + 1
            prof.step()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2
    assert all(f.startswith("worker0.") and f.endswith(".pt.trace.json") for f in files)
    for f in files:
        json.loads((tmp_path / f).read_text())


def test_events_from_other_threads_are_recorded_on_their_own_lane():
    import threading

    def work():
        with record_function("in thread"):
            kiln.ones(2) + 1

    with profile(activities=CPU) as prof:
        with record_function("main"):
            t = threading.Thread(target=work)
            t.start()
            t.join()
    events = {e.name: e for e in prof.events()}
    assert events["in thread"].thread != events["main"].thread
    assert events["in thread"].cpu_parent is None


def test_nothing_is_recorded_after_stop():
    with profile(activities=CPU) as prof:
        kiln.ones(1) + 1
    kiln.ones(1) * 3
    assert "kiln::mul" not in names(prof.events())


def test_cuda_activity_without_a_gpu_warns_once_and_records_host_events():
    if kiln.cuda.is_available():
        pytest.skip("checks the no-GPU fallback")
    import kiln.profiler._profile as impl

    impl._warned_no_device = False
    with pytest.warns(UserWarning, match="CUDA activity is not recorded"):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            kiln.ones(1) + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with profile(activities=[ProfilerActivity.CUDA]):
            pass
    assert "kiln::add" in names(prof.events())
    assert "Self CUDA" in prof.key_averages().table()


def test_errors():
    with pytest.raises(TypeError, match="ProfilerActivity"):
        profile(activities=["cpu"])
    with pytest.raises(TypeError, match="schedule must be callable"):
        profile(schedule=3)
    with pytest.raises(AssertionError, match="Invalid profiler schedule"):
        schedule(wait=0, warmup=1, active=0)
    with pytest.raises(TypeError, match="record_function"):
        record_function(3)
    with pytest.raises(AssertionError, match="Profiler must be initialized"):
        profile(activities=CPU).events()
    with profile(activities=CPU) as prof:
        with pytest.raises(RuntimeError, match="already running"):
            with profile(activities=CPU):
                pass
    with pytest.raises(AttributeError, match="unknown sort_by 'nope'"):
        prof.key_averages().table(sort_by="nope")


def test_autograd_profiler_spelling():
    from kiln.autograd import profiler as legacy

    with legacy.profile(record_shapes=True) as prof:
        with legacy.record_function("range"):
            kiln.ones(2) + 1
    assert "kiln::add" in prof.table()
    assert {"range", "kiln::add"} <= set(names(prof.function_events))
    with pytest.raises(RuntimeError, match="didn't finish"):
        legacy.profile().key_averages()


def test_kiln_profiler_is_loaded_lazily():
    import subprocess
    import sys

    code = "import sys, kiln; print('kiln.profiler' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- with_stack ------------------------------------------------------------------------------

def add_one(x):
    return x + 1  # the line with_stack must name


def twice(x):
    return add_one(add_one(x))


def test_with_stack_records_each_ops_python_stack_innermost_first():
    import inspect
    with profile(activities=CPU, with_stack=True) as prof:
        twice(kiln.ones(3))
    (add,) = {tuple(e.stack) for e in prof.events() if e.name == "kiln::add"}
    line = inspect.getsourcelines(add_one)[1] + 1
    assert add[0].endswith(f"test_profiler.py({line}): add_one")
    assert add[1].endswith(f"test_profiler.py({line + 4}): twice")
    assert "test_with_stack_records_each_ops_python_stack_innermost_first" in add[2]
    ones = next(e for e in prof.events() if e.name == "kiln::full")  # kiln.ones
    assert ones.stack[0].endswith(": test_with_stack_records_each_ops_python_stack_innermost_first")


def test_stacks_are_not_recorded_unless_asked():
    with profile(activities=CPU) as prof:
        twice(kiln.ones(3))
    assert all(e.stack == [] for e in prof.events())


def test_key_averages_group_by_stack_n_splits_call_sites():
    with profile(activities=CPU, with_stack=True) as prof:
        x = kiln.ones(3)
        for _ in range(3):
            add_one(x)
        x + 1
    plain = [a for a in prof.key_averages() if a.key == "kiln::add"]
    assert [a.count for a in plain] == [4] and plain[0].stack == []
    by_site = {a.stack[0].rsplit(": ", 1)[1]: a for a in prof.key_averages(group_by_stack_n=1)
               if a.key == "kiln::add"}
    assert {k: a.count for k, a in by_site.items()} == {
        "add_one": 3, "test_key_averages_group_by_stack_n_splits_call_sites": 1}
    assert all(len(a.stack) == 1 for a in by_site.values())
    assert len(next(iter(prof.key_averages(group_by_stack_n=2))).stack) <= 2
    table = prof.key_averages(group_by_stack_n=2).table(sort_by="count", row_limit=3)
    header = table.splitlines()[1]
    assert header.rstrip().endswith("Source Location")
    assert any("add_one" in line for line in table.splitlines())


def test_stack_goes_into_the_chrome_trace_and_export_stacks(tmp_path):
    with profile(activities=CPU, with_stack=True) as prof:
        twice(kiln.ones(1 << 18))  # export_stacks writes whole microseconds: ops that take some
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    ops = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "kiln::add"]
    assert len(ops) == 2
    frames = ops[0]["args"]["Call stack"].split(";")
    assert frames[-1].endswith("add_one") and frames[-2].endswith("twice")
    stacks = tmp_path / "stacks.txt"
    prof.export_stacks(str(stacks), "self_cpu_time_total")
    lines = stacks.read_text().splitlines()
    assert lines and all(len(line.rsplit(" ", 1)) == 2 for line in lines)
    assert any(";" in line and "add_one" in line.rsplit(" ", 1)[0].split(";")[-1]
               for line in lines)
    with pytest.raises(ValueError, match="metric should be one of"):
        prof.events().export_stacks(str(stacks), "bogus")


def test_export_stacks_without_with_stack_says_so(tmp_path):
    with profile(activities=CPU) as prof:
        kiln.ones(1) + 1
    with pytest.raises(AssertionError, match="with_stack=True"):
        prof.export_stacks(str(tmp_path / "s.txt"))


# --- with_flops ------------------------------------------------------------------------------

def flops_of(prof, name):
    return sum(e.flops for e in prof.events() if e.name == name)


def test_with_flops_uses_pytorch_formulae_for_products_and_convolutions():
    a, b = kiln.randn(4, 8), kiln.randn(8, 16)
    p, q = kiln.randn(3, 4, 5), kiln.randn(3, 5, 6)
    x, w = kiln.randn(4, 8), kiln.randn(16, 8)
    img, k = kiln.randn(2, 3, 10, 10), kiln.randn(5, 3, 3, 3)
    grouped, gk = kiln.randn(1, 4, 6, 6), kiln.randn(4, 2, 3, 3)
    with profile(activities=CPU, with_flops=True) as prof:
        with record_function("mm"):
            kiln.mm(a, b)
        with record_function("bmm"):
            kiln.bmm(p, q)
        with record_function("linear"):
            F.linear(x, w)
        with record_function("conv"):
            F.conv2d(img, k, stride=2, padding=1)          # output [2, 5, 5, 5]
        with record_function("grouped"):
            F.conv2d(grouped, gk, groups=2)                # output [1, 4, 4, 4]
    ranges = {e.name: e for e in prof.events() if e.kind == 1}

    def inside(name):
        return sum(d.flops for d in descendants(ranges[name]))

    assert inside("mm") == 2 * 4 * 8 * 16
    assert inside("bmm") == 2 * 3 * 4 * 5 * 6
    assert inside("linear") == 2 * 4 * 16 * 8
    # 2 * N * out_h * out_w * k_h * k_w * C_in * C_out / groups
    assert inside("conv") == 2 * 2 * 5 * 5 * 3 * 3 * 3 * 5
    assert inside("grouped") == 2 * 1 * 4 * 4 * 3 * 3 * 4 * 4 // 2
    # Counted once, on the outermost op with a formula (the ops it calls carry none).
    for name in ("mm", "bmm", "linear", "conv", "grouped"):
        assert sum(1 for d in descendants(ranges[name]) if d.flops) == 1, name
    assert all(e.input_shapes for e in prof.events() if e.flops)  # shapes came on with flops


def test_flops_column_in_the_table_and_none_unless_asked():
    a = kiln.randn(64, 64)
    with profile(activities=CPU, with_flops=True) as prof:
        for _ in range(3):
            a @ a
    table = prof.key_averages().table(sort_by="cpu_time_total")
    header = table.splitlines()[1]
    assert "Total KFLOPs" in header or "Total MFLOPs" in header
    (row,) = [a for a in prof.key_averages() if a.flops]
    assert row.flops == 3 * 2 * 64 ** 3
    assert "--" in table  # rows without an estimate
    with profile(activities=CPU) as plain:
        a @ a
    assert all(e.flops == 0 for e in plain.events())
    assert "FLOPs" not in plain.key_averages().table()


def test_flops_match_pytorch_profiler():
    torch = pytest.importorskip("torch")
    import numpy as np
    an, bn = np.random.rand(6, 7).astype(np.float32), np.random.rand(7, 9).astype(np.float32)
    xn, wn = np.random.rand(2, 3, 9, 9).astype(np.float32), np.random.rand(4, 3, 3, 3).astype(
        np.float32)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                with_flops=True) as tp:
        torch.mm(torch.from_numpy(an), torch.from_numpy(bn))
        torch.nn.functional.conv2d(torch.from_numpy(xn), torch.from_numpy(wn), stride=2,
                                   padding=1)
    torch_flops = {e.key: e.flops for e in tp.key_averages() if e.flops}
    with profile(activities=CPU, with_flops=True) as kp_:
        kiln.mm(kiln.tensor(an), kiln.tensor(bn))
        F.conv2d(kiln.tensor(xn), kiln.tensor(wn), stride=2, padding=1)
    assert sum(e.flops for e in kp_.events()) == sum(torch_flops.values())
    assert torch_flops.get("aten::mm") == flops_of(kp_, "kiln::mm")
