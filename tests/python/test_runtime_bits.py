"""Runtime switches and queries: deterministic algorithms, kiln.cuda/kiln.backends queries,
cuda.nvtx, and utils.data.DistributedSampler."""

import math
import warnings

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import requires_gpu
from kiln.utils.data import DistributedSampler

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


@pytest.fixture
def deterministic():
    """Turns deterministic algorithms on for a test and restores the previous setting."""
    saved = (kiln.are_deterministic_algorithms_enabled(),
             kiln.is_deterministic_algorithms_warn_only_enabled())
    kiln.use_deterministic_algorithms(True)
    yield
    kiln.use_deterministic_algorithms(saved[0], warn_only=saved[1])


# --- deterministic algorithms ----------------------------------------------------


def test_deterministic_flag_getters(deterministic):
    assert kiln.are_deterministic_algorithms_enabled()
    assert not kiln.is_deterministic_algorithms_warn_only_enabled()
    kiln.use_deterministic_algorithms(True, warn_only=True)
    assert kiln.are_deterministic_algorithms_enabled()
    assert kiln.is_deterministic_algorithms_warn_only_enabled()
    kiln.use_deterministic_algorithms(False)
    assert not kiln.are_deterministic_algorithms_enabled()
    assert not kiln.is_deterministic_algorithms_warn_only_enabled()


@pytest.mark.parametrize("mode,expected", [(0, (False, False)), ("warn", (True, True)),
                                           (2, (True, False)), ("default", (False, False))])
def test_deterministic_debug_mode(deterministic, mode, expected):
    kiln.set_deterministic_debug_mode(mode)
    assert (kiln.are_deterministic_algorithms_enabled(),
            kiln.is_deterministic_algorithms_warn_only_enabled()) == expected
    assert kiln.get_deterministic_debug_mode() == {(False, False): 0, (True, True): 1,
                                                   (True, False): 2}[expected]


def test_deterministic_debug_mode_rejects_unknown_modes():
    with pytest.raises(RuntimeError, match=r"\[set_deterministic_debug_mode\] invalid mode"):
        kiln.set_deterministic_debug_mode("loud")
    with pytest.raises(RuntimeError, match=r"\[set_deterministic_debug_mode\] invalid mode 3"):
        kiln.set_deterministic_debug_mode(3)


def test_deterministic_mode_must_be_a_bool():
    with pytest.raises(TypeError, match=r"\[use_deterministic_algorithms\] mode must be a bool"):
        kiln.use_deterministic_algorithms(1)
    assert not kiln.are_deterministic_algorithms_enabled()


def accumulating_ops(device, dtype=kiln.float32):
    """Ops that accumulate with atomics on CUDA, each as (name, thunk)."""
    idx = kiln.tensor([0, 2, 0, 1], device=device)
    src = kiln.arange(8, device=device).reshape(4, 2).to(dtype)
    weight = kiln.randn(3, 2, device=device).requires_grad_()

    def embedding_backward():
        F.embedding(idx, weight).sum().backward()
        return weight.grad

    return [
        ("index_add", lambda: kiln.zeros(3, 2, device=device, dtype=dtype).index_add_(0, idx, src)),
        ("scatter_add", lambda: kiln.zeros(3, 2, device=device, dtype=dtype).scatter_add_(
            0, kiln.tensor([[0, 1], [2, 0], [0, 0], [1, 2]], device=device), src)),
        ("index_put", lambda: kiln.zeros(3, device=device, dtype=dtype).index_put_(
            (idx,), kiln.ones(4, device=device, dtype=dtype), accumulate=True)),
        ("embedding_backward", embedding_backward),
        ("bincount", lambda: kiln.bincount(idx, weights=src[:, 0].float())),
    ]


@pytest.mark.parametrize("case", range(5))
def test_cpu_ops_stay_allowed(deterministic, case):
    name, fn = accumulating_ops("cpu")[case]
    fn()


@requires_gpu
@pytest.mark.parametrize("case", range(5))
def test_cuda_atomic_ops_raise(deterministic, case):
    name, fn = accumulating_ops("cuda")[case]
    with pytest.raises(RuntimeError, match=r"\[" + name + r"_?\] does not have a deterministic "
                       r"implementation on cuda.*kiln.use_deterministic_algorithms\(True\)"):
        fn()


@requires_gpu
@pytest.mark.parametrize("case", range(5))
def test_cuda_atomic_ops_warn_only(deterministic, case):
    kiln.use_deterministic_algorithms(True, warn_only=True)
    name, fn = accumulating_ops("cuda")[case]
    with pytest.warns(UserWarning, match=r"\[" + name + r"_?\] does not have a deterministic"):
        out = fn()
    expected = accumulating_ops("cpu")[case][1]() if case != 3 else None
    if expected is not None:
        np.testing.assert_allclose(out.cpu().numpy(), expected.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_mask_indexing_backward_stays_allowed(deterministic, device):
    # A mask picks each element once, so its backward needs no accumulation.
    x = kiln.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], device=device).requires_grad_()
    (x[x > 0] * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), [[2, 0, 2], [0, 2, 0]])
    y = kiln.tensor([1.0, 2.0, 3.0], device=device).requires_grad_()
    if device == "cuda":
        with pytest.raises(RuntimeError, match=r"\[index_put\] does not have a deterministic"):
            y[kiln.tensor([0, 0, 2], device=device)].sum().backward()
    else:
        y[kiln.tensor([0, 0, 2])].sum().backward()
        np.testing.assert_array_equal(y.grad.numpy(), [2, 0, 1])


@requires_gpu
def test_cuda_integer_accumulation_is_deterministic(deterministic):
    # Integer atomic sums do not depend on the order, so nothing is refused.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = accumulating_ops("cuda", kiln.int64)[0][1]()
        counts = kiln.bincount(kiln.tensor([0, 2, 2], device="cuda"))
    np.testing.assert_array_equal(out.cpu().numpy(), [[4, 6], [6, 7], [2, 3]])
    np.testing.assert_array_equal(counts.cpu().numpy(), [1, 0, 2])


def test_deterministic_flags_match_pytorch():
    torch = pytest.importorskip("torch")
    saved = (torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        for mode, warn_only in [(True, False), (True, True), (False, True), (False, False)]:
            for mod in (torch, kiln):
                mod.use_deterministic_algorithms(mode, warn_only=warn_only)
            assert (kiln.are_deterministic_algorithms_enabled(),
                    kiln.is_deterministic_algorithms_warn_only_enabled()) == (
                        torch.are_deterministic_algorithms_enabled(),
                        torch.is_deterministic_algorithms_warn_only_enabled())
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        kiln.use_deterministic_algorithms(False)


# --- device queries --------------------------------------------------------------


def test_backend_queries():
    assert kiln.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2", "AVX512")
    assert kiln.backends.mps.is_available() is False
    assert kiln.backends.mps.is_built() is False
    assert kiln.cuda.is_bf16_supported() is kiln.cuda.is_available()  # H200: compute 9.0


@requires_gpu
def test_cuda_queries_match_pytorch():
    free, total = kiln.cuda.mem_get_info()
    assert isinstance(free, int) and 0 < free <= total
    torch = pytest.importorskip("torch")
    assert kiln.cuda.is_bf16_supported() == torch.cuda.is_bf16_supported()
    assert total == torch.cuda.mem_get_info()[1]


def test_nvtx_calls_keep_working():
    nvtx = kiln.cuda.nvtx
    assert nvtx.range_push("outer") == 0
    assert nvtx.range_push("inner") == 1
    assert nvtx.range_pop() == 1
    assert nvtx.range_pop() == 0
    assert nvtx.range_pop() == -1
    nvtx.mark("event")
    nvtx.range_end(nvtx.range_start("span"))
    with nvtx.range("step {}", 3):
        assert nvtx.range_push("x") == 1
        nvtx.range_pop()

    @nvtx.range("decorated")
    def f(x):
        return nvtx.range_push("y")

    assert f(1) == 1
    nvtx.range_pop()
    assert nvtx.range_pop() == -1


# --- DistributedSampler ----------------------------------------------------------


def reference_indices(n, replicas, rank, drop_last, order=None):
    """PyTorch's documented assignment, in NumPy: pad by wrapping around (or truncate),
    then take every replicas-th index from rank."""
    order = np.arange(n) if order is None else np.asarray(order)
    if drop_last and n % replicas:
        per_replica = math.ceil((n - replicas) / replicas)
    else:
        per_replica = math.ceil(n / replicas)
    total = per_replica * replicas
    padded = np.resize(order, total) if n else order  # np.resize repeats the array cyclically
    return padded[:total][rank::replicas].tolist()


CASES = [(10, 3, False), (10, 3, True), (12, 4, False), (12, 4, True), (2, 5, False),
         (2, 5, True), (7, 7, False), (1, 3, False), (0, 2, False), (11, 2, True), (5, 1, False)]


@pytest.mark.parametrize("n,replicas,drop_last", CASES)
def test_distributed_sampler_matches_reference(n, replicas, drop_last):
    shares = []
    for rank in range(replicas):
        s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False,
                               drop_last=drop_last)
        got = list(s)
        assert got == reference_indices(n, replicas, rank, drop_last)
        assert len(s) == len(got)
        shares.append(got)
    assert len({len(x) for x in shares}) == 1
    if not drop_last and n:
        assert set(sum(shares, [])) == set(range(n))


def test_distributed_sampler_shuffles_per_epoch():
    n, replicas = 23, 4
    samplers = [DistributedSampler(range(n), replicas, r, seed=5) for r in range(replicas)]
    epoch0 = [list(s) for s in samplers]
    g = kiln.Generator().manual_seed(5)
    order = kiln.randperm(n, generator=g).tolist()
    for r in range(replicas):
        assert epoch0[r] == reference_indices(n, replicas, r, False, order)
    assert set(sum(epoch0, [])) == set(range(n))
    assert [list(s) for s in samplers] == epoch0  # same epoch, same order
    for s in samplers:
        s.set_epoch(1)
    epoch1 = [list(s) for s in samplers]
    assert epoch1 != epoch0 and set(sum(epoch1, [])) == set(range(n))
    other_seed = DistributedSampler(range(n), replicas, 0, seed=6)
    assert list(other_seed) != epoch0[0]


def test_distributed_sampler_in_a_dataloader():
    data = kiln.utils.data.TensorDataset(kiln.arange(10))
    s = DistributedSampler(data, num_replicas=2, rank=1, shuffle=False)
    batches = [b[0].tolist() for b in kiln.utils.data.DataLoader(data, batch_size=2, sampler=s)]
    assert batches == [[1, 3], [5, 7], [9]]


def test_distributed_sampler_bad_arguments():
    with pytest.raises(ValueError, match=r"\[DistributedSampler\] Invalid rank 3"):
        DistributedSampler(range(5), num_replicas=3, rank=3)
    with pytest.raises(ValueError, match=r"\[DistributedSampler\] Invalid rank -1"):
        DistributedSampler(range(5), num_replicas=3, rank=-1)
    with pytest.raises((RuntimeError, ValueError), match=r"\[DistributedSampler\] num_replicas"):
        DistributedSampler(range(5), rank=0)
    with pytest.raises((RuntimeError, ValueError), match=r"\[DistributedSampler\] rank"):
        DistributedSampler(range(5), num_replicas=2)


@pytest.mark.parametrize("n,replicas,drop_last", CASES)
def test_distributed_sampler_matches_pytorch(n, replicas, drop_last):
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = TorchSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
