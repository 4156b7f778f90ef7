"""CUDA graphs (kiln.cuda.CUDAGraph, kiln.cuda.graph, graph_pool_handle,
make_graphed_callables): capture and replay of forward, backward and whole training steps
matching eager bit for bit, random ops drawing fresh numbers per replay, capture errors,
memory pools, and capturable optimizers. GPU tests skip where there is no GPU (CI); the API
checks and CPU behaviour run everywhere."""

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from helpers import requires_gpu

no_gpu = pytest.mark.skipif(kiln.cuda.is_available(), reason="checks the no-GPU errors")


def same(a, b):
    """Bitwise equality of two tensors (any device)."""
    return np.array_equal(a.detach().cpu().float().numpy(), b.detach().cpu().float().numpy())


def mlp(seed=0, dropout=0.0):
    kiln.manual_seed(seed)
    layers = [nn.Linear(32, 64), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(64, 10))
    return nn.Sequential(*layers).cuda()


def batches(n, seed=1):
    g = np.random.default_rng(seed)
    return [(kiln.tensor(g.standard_normal((16, 32)).astype(np.float32)).cuda(),
             kiln.tensor(g.integers(0, 10, size=16)).cuda()) for _ in range(n)]


# --- the API without a GPU ---------------------------------------------------------------------

def test_graph_api_exists_under_pytorch_names():
    for name in ("CUDAGraph", "graph", "graph_pool_handle", "make_graphed_callables",
                 "is_current_stream_capturing"):
        assert callable(getattr(kiln.cuda, name))
    assert kiln.cuda.graphs.graph.default_capture_stream is None or kiln.cuda.is_available()


@no_gpu
def test_without_a_gpu_the_graph_api_raises_clear_errors():
    with pytest.raises(RuntimeError, match=r"\[cuda.CUDAGraph\].*CUDA"):
        kiln.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"\[cuda.graph_pool_handle\].*CUDA"):
        kiln.cuda.graph_pool_handle()
    with pytest.raises(RuntimeError, match=r"\[cuda.make_graphed_callables\].*CUDA"):
        kiln.cuda.make_graphed_callables(nn.Linear(2, 2), (kiln.ones(1, 2),))
    assert kiln.cuda.is_current_stream_capturing() is False


def test_graph_context_manager_rejects_what_is_not_a_graph():
    with pytest.raises(TypeError, match=r"\[cuda.graph\] cuda_graph must be"):
        kiln.cuda.graph(object())


def test_capturable_adam_on_cpu_matches_the_host_step():
    # capturable=True keeps the step on the parameter's device; on the CPU that is the host
    # path, and the values are PyTorch's either way.
    results = []
    for capturable in (False, True):
        kiln.manual_seed(0)
        model = nn.Linear(4, 3)
        opt = kiln.optim.Adam(model.parameters(), lr=0.1, capturable=capturable)
        for _ in range(3):
            opt.zero_grad()
            model(kiln.ones(2, 4)).pow(2).sum().backward()
            opt.step()
        results.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*results):
        assert same(a, b)


# --- capture and replay --------------------------------------------------------------------------

@requires_gpu
def test_replayed_forward_matches_eager_bit_for_bit_on_new_inputs():
    model = mlp()
    static_x = kiln.randn(16, 32, device="cuda")
    with kiln.no_grad():
        model(static_x)  # warm-up: cuBLAS and every lazily made table exist before capture
        g = kiln.cuda.CUDAGraph()
        with kiln.cuda.graph(g):
            static_y = model(static_x)
        for x, _ in batches(4):
            static_x.copy_(x)
            g.replay()
            assert same(static_y, model(x))


@requires_gpu
def test_capture_does_not_run_the_work_and_replay_does():
    x = kiln.ones(8, device="cuda")
    g = kiln.cuda.CUDAGraph()
    with kiln.cuda.graph(g):
        x.add_(1)
    assert x.cpu().tolist() == [1.0] * 8
    g.replay()
    g.replay()
    assert x.cpu().tolist() == [3.0] * 8


@requires_gpu
def test_replayed_forward_and_backward_match_eager():
    model, ref = mlp(), mlp()
    static_x, static_t = batches(1)[0]
    for p in model.parameters():
        p.grad = None
    F.cross_entropy(model(static_x), static_t).backward()  # warm-up
    for p in model.parameters():
        p.grad = None
    g = kiln.cuda.CUDAGraph()
    with kiln.cuda.graph(g):
        static_loss = F.cross_entropy(model(static_x), static_t)
        static_loss.backward()
    for x, t in batches(3, seed=5):
        static_x.copy_(x)
        static_t.copy_(t)
        g.replay()
        for p in ref.parameters():
            p.grad = None
        loss = F.cross_entropy(ref(x), t)
        loss.backward()
        assert same(static_loss, loss)
        for p, q in zip(model.parameters(), ref.parameters()):
            assert same(p.grad, q.grad)


def _training_step(model, opt, x, t):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), t)
    loss.backward()
    opt.step()
    return loss


@requires_gpu
@pytest.mark.parametrize("make_opt", [
    lambda ps: kiln.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: kiln.optim.Adam(ps, lr=1e-2, capturable=True),
    lambda ps: kiln.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, capturable=True),
], ids=["sgd", "adam", "adamw"])
def test_a_whole_training_step_replays_like_eager_bit_for_bit(make_opt):
    graphed, eager = mlp(), mlp()
    opt_g, opt_e = make_opt(graphed.parameters()), make_opt(eager.parameters())
    data = batches(8)
    static_x, static_t = data[0][0].clone(), data[0][1].clone()
    # Warm-up on a side stream (as PyTorch's docs do), mirrored by the eager copy.
    side = kiln.cuda.Stream()
    side.wait_stream(kiln.cuda.current_stream())
    with kiln.cuda.stream(side):
        for x, t in data[:3]:
            static_x.copy_(x)
            static_t.copy_(t)
            _training_step(graphed, opt_g, static_x, static_t)
    kiln.cuda.current_stream().wait_stream(side)
    for x, t in data[:3]:
        _training_step(eager, opt_e, x, t)

    g = kiln.cuda.CUDAGraph()
    opt_g.zero_grad(set_to_none=True)
    with kiln.cuda.graph(g):
        static_loss = F.cross_entropy(graphed(static_x), static_t)
        static_loss.backward()
        opt_g.step()
    for x, t in data[3:]:
        static_x.copy_(x)
        static_t.copy_(t)
        g.replay()
        loss = _training_step(eager, opt_e, x, t)
        assert same(static_loss, loss)
        for p, q in zip(graphed.parameters(), eager.parameters()):
            assert same(p, q)


@requires_gpu
def test_capturable_adam_agrees_with_host_step_adam():
    results = []
    for capturable in (False, True):
        model = mlp()
        opt = kiln.optim.Adam(model.parameters(), lr=1e-2, capturable=capturable)
        for x, t in batches(4):
            _training_step(model, opt, x, t)
        if capturable:
            assert opt.state[next(iter(model.parameters()))]["step"].is_cuda
        results.append([p.detach().cpu().numpy() for p in model.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --- random numbers ------------------------------------------------------------------------------

@requires_gpu
def test_dropout_in_a_graph_draws_fresh_masks_and_matches_eager():
    x = kiln.ones(4096, device="cuda")
    F.dropout(x, 0.5)  # warm-up
    g = kiln.cuda.CUDAGraph()
    with kiln.cuda.graph(g):
        static_y = F.dropout(x, 0.5)
        static_r = kiln.rand(1000, device="cuda")
    kiln.cuda.manual_seed(1234)
    seen = []
    for _ in range(3):
        state = kiln.cuda.get_rng_state()
        g.replay()
        after = kiln.cuda.get_rng_state()
        replayed = (static_y.clone(), static_r.clone())
        # The same generator state in eager mode draws the same numbers and advances as far.
        kiln.cuda.set_rng_state(state)
        assert same(replayed[0], F.dropout(x, 0.5))
        assert same(replayed[1], kiln.rand(1000, device="cuda"))
        assert kiln.cuda.get_rng_state().tolist() == after.tolist()
        seen.append(replayed[0])
    assert not same(seen[0], seen[1]) and not same(seen[1], seen[2])


@requires_gpu
def test_a_generator_the_graph_does_not_know_raises_and_a_registered_one_works():
    gen = kiln.Generator("cuda")
    gen.manual_seed(7)
    g = kiln.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="register_generator_state"):
        with kiln.cuda.graph(g):
            kiln.rand(8, device="cuda", generator=gen)
    g2 = kiln.cuda.CUDAGraph()
    g2.register_generator_state(gen)
    with kiln.cuda.graph(g2):
        out = kiln.rand(8, device="cuda", generator=gen)
    g2.replay()
    first = out.clone()
    g2.replay()
    assert not same(first, out)
    gen.manual_seed(7)
    assert same(first, kiln.rand(8, device="cuda", generator=gen))


# --- capture errors ------------------------------------------------------------------------------

@requires_gpu
@pytest.mark.parametrize("sync, op", [
    (lambda x: x.sum().item(), "copy_"),
    (lambda x: x.cpu(), "copy_"),
    (lambda x: x.tolist(), "copy_"),
    (lambda x: kiln.nonzero(x), ""),
    (lambda x: kiln.cuda.synchronize(), "cuda.synchronize"),
    (lambda x: kiln.cuda.current_stream().synchronize(), "cuda.Stream.synchronize"),
    (lambda x: kiln.tensor([1.0, 2.0], device="cuda"), "copy_"),
], ids=["item", "cpu", "tolist", "nonzero", "synchronize", "stream_synchronize",
        "pageable_copy"])
def test_host_syncs_during_capture_raise_naming_the_op(sync, op):
    x = kiln.ones(16, device="cuda")
    g = kiln.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"\[" + op + r".*not allowed while capturing a CUDA graph"):
        with kiln.cuda.graph(g):
            y = x * 2
            sync(y)
    # The capture itself was left intact: what came before the error replays.
    g.replay()
    kiln.cuda.synchronize()


@requires_gpu
def test_cpu_tensor_work_during_capture_is_fine():
    x = kiln.ones(4, device="cuda")
    g = kiln.cuda.CUDAGraph()
    with kiln.cuda.graph(g):
        host = (kiln.arange(4.0) * 2).sum().item()
        y = x * host
    g.replay()
    assert y.cpu().tolist() == [12.0] * 4


@requires_gpu
def test_arange_inside_a_capture_computes_its_values_on_the_device():
    g = kiln.cuda.CUDAGraph()
    with kiln.cuda.graph(g):
        ints = kiln.arange(3, 40, 4, device="cuda")
        floats = kiln.arange(-1.0, 1.0, 0.1, device="cuda")
        halves = kiln.arange(0, 7, 1, dtype=kiln.float16, device="cuda")
    g.replay()
    for captured, eager in ((ints, kiln.arange(3, 40, 4, device="cuda")),
                            (floats, kiln.arange(-1.0, 1.0, 0.1, device="cuda")),
                            (halves, kiln.arange(0, 7, 1, dtype=kiln.float16, device="cuda"))):
        assert captured.dtype == eager.dtype
        assert same(captured, eager)


@requires_gpu
def test_capture_misuse_raises_clear_errors():
    g = kiln.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"\[CUDAGraph.replay\].*without a successful capture"):
        g.replay()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()
    with pytest.raises(RuntimeError, match="Unknown capture error mode"):
        with kiln.cuda.stream(kiln.cuda.Stream()):
            g.capture_begin(capture_error_mode="loose")
    with pytest.raises(TypeError, match="pool must be"):
        g.capture_begin(pool=3)
    x = kiln.ones(4, device="cuda")
    with kiln.cuda.graph(g):
        x.add_(1)
    with pytest.raises(RuntimeError, match="already holds a graph"):
        with kiln.cuda.graph(g):
            pass
    g.reset()
    with kiln.cuda.graph(g, capture_error_mode="thread_local"):
        x.add_(1)
    g.replay()
    assert x.cpu().tolist() == [2.0] * 4


@requires_gpu
def test_capturing_a_host_step_optimizer_raises():
    model = mlp()
    opt = kiln.optim.Adam(model.parameters(), lr=1e-3)
    x, t = batches(1)[0]
    _training_step(model, opt, x, t)
    g = kiln.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="capturable=True"):
        with kiln.cuda.graph(g):
            F.cross_entropy(model(x), t).backward()
            opt.step()


@requires_gpu
def test_is_current_stream_capturing():
    assert not kiln.cuda.is_current_stream_capturing()
    g = kiln.cuda.CUDAGraph()
    flags = []
    with kiln.cuda.graph(g):
        flags.append(kiln.cuda.is_current_stream_capturing())
    assert flags == [True]
    assert not kiln.cuda.is_current_stream_capturing()


# --- memory pools --------------------------------------------------------------------------------

@requires_gpu
def test_two_graphs_share_a_pool_and_replay_in_capture_order():
    x = kiln.randn(1024, device="cuda")
    handle = kiln.cuda.graph_pool_handle()
    g1, g2 = kiln.cuda.CUDAGraph(), kiln.cuda.CUDAGraph()
    with kiln.cuda.graph(g1, pool=handle):
        y = x * 2
    with kiln.cuda.graph(g2, pool=g1.pool()):
        z = y + 1
    assert g1.pool() == g2.pool() == handle
    for _ in range(2):
        x.copy_(kiln.randn(1024, device="cuda"))
        g1.replay()
        g2.replay()
        assert same(z, x * 2 + 1)


@requires_gpu
def test_pool_memory_is_never_lent_outside_the_graph_and_is_released_after_reset():
    x = kiln.ones(1 << 20, device="cuda")
    first = kiln.cuda.CUDAGraph()  # makes the capture stream's cuBLAS workspace, which stays
    with kiln.cuda.graph(first):
        x * 1
    first.reset()
    kiln.cuda.synchronize()
    kiln.cuda.empty_cache()
    reserved = kiln.cuda.memory_reserved()
    freed_inside = []
    g = kiln.cuda.CUDAGraph()
    with kiln.cuda.graph(g):
        tmp = x * 3  # freed during the capture: its block stays in the graph's pool
        freed_inside.append(tmp.data_ptr())
        y = tmp + 1
        del tmp
    outside = [kiln.empty(1 << 20, device="cuda") for _ in range(4)]
    assert all(t.data_ptr() != freed_inside[0] for t in outside)
    g.replay()
    assert y.cpu().tolist()[:3] == [4.0] * 3
    del y, outside
    g.reset()
    kiln.cuda.empty_cache()
    assert kiln.cuda.memory_reserved() <= reserved


# --- make_graphed_callables ----------------------------------------------------------------------

@requires_gpu
def test_make_graphed_callables_on_an_mlp_matches_eager():
    graphed, eager = mlp(), mlp()
    x0 = kiln.randn(16, 32, device="cuda", requires_grad=True)
    graphed = kiln.cuda.make_graphed_callables(graphed, (x0,))
    opt_g = kiln.optim.SGD(graphed.parameters(), lr=0.1)
    opt_e = kiln.optim.SGD(eager.parameters(), lr=0.1)
    for x, t in batches(4):
        xg, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
        losses = []
        for model, opt, inp in ((graphed, opt_g, xg), (eager, opt_e, xe)):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(inp), t)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        np.testing.assert_allclose(losses[0].cpu().numpy(), losses[1].cpu().numpy(), rtol=1e-6)
        np.testing.assert_allclose(xg.grad.cpu().numpy(), xe.grad.cpu().numpy(), rtol=1e-5,
                                   atol=1e-7)
        for p, q in zip(graphed.parameters(), eager.parameters()):
            np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(),
                                       rtol=1e-5, atol=1e-7)
    graphed.eval()  # a different training flag runs the eager forward
    x = kiln.randn(3, 32, device="cuda")
    assert tuple(graphed(x).shape) == (3, 10)


@requires_gpu
def test_make_graphed_callables_on_transformer_blocks_matches_eager():
    def make_blocks():
        kiln.manual_seed(0)
        return [nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0,
                                           batch_first=True).cuda() for _ in range(2)]

    blocks, eager = make_blocks(), make_blocks()
    x0 = kiln.randn(4, 8, 64, device="cuda", requires_grad=True)
    h0 = kiln.randn(4, 8, 64, device="cuda", requires_grad=True)
    graphed = kiln.cuda.make_graphed_callables(tuple(blocks), ((x0,), (h0,)))
    for _ in range(2):
        x = kiln.randn(4, 8, 64, device="cuda")
        outs = []
        for pair in (graphed, eager):
            for b in pair:
                b.zero_grad(set_to_none=True)
            y = pair[1](pair[0](x.clone().requires_grad_()))
            y.pow(2).mean().backward()
            outs.append((y.detach(), [p.grad for b in pair for p in b.parameters()]))
        np.testing.assert_allclose(outs[0][0].cpu().numpy(), outs[1][0].cpu().numpy(),
                                   rtol=1e-5, atol=1e-6)
        for a, b in zip(outs[0][1], outs[1][1]):
            np.testing.assert_allclose(a.cpu().numpy(), b.cpu().numpy(), rtol=1e-4, atol=1e-6)


@requires_gpu
def test_make_graphed_callables_checks_its_arguments():
    with pytest.raises(TypeError, match="tuple of tensors"):
        kiln.cuda.make_graphed_callables(mlp(), ([1, 2],))
    with pytest.raises(ValueError, match="CUDA tensors"):
        kiln.cuda.make_graphed_callables(mlp(), (kiln.ones(16, 32),))
    with pytest.raises(ValueError, match="2 callables but 1 sample_args"):
        kiln.cuda.make_graphed_callables((mlp(), mlp()), ((kiln.ones(16, 32, device="cuda"),),))
