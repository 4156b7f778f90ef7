"""RNG states and generators: get/set_rng_state, fork_rng, kiln.cuda's seeding, generator=."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import requires_gpu

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


def draws(device="cpu", generator=None):
    """One value of every random factory and in-place sampler, as NumPy arrays.
    dropout takes no generator, so it is drawn only from the default stream."""
    g = {"generator": generator}
    p = kiln.full((16,), 0.3, device=device)
    out = [
        kiln.rand(5, device=device, **g),
        kiln.randn(2, 3, device=device, **g),
        kiln.randint(0, 1000, (7,), device=device, **g),
        kiln.randperm(11, device=device, **g),
        kiln.normal(1.0, 2.0, (4,), device=device, **g),
        kiln.normal(kiln.zeros(3, device=device), kiln.ones(3, device=device), **g),
        kiln.bernoulli(p, **g),
        kiln.multinomial(kiln.ones(10, device=device), 4, **g),
        kiln.empty(6, device=device).uniform_(-1, 1, **g),
        kiln.empty(6, device=device).normal_(3.0, 0.5, **g),
        kiln.empty(6, device=device).random_(0, 50, **g),
        kiln.empty(9, device=device).bernoulli_(0.4, **g),
    ]
    if generator is None:
        out.append(F.dropout(kiln.ones(64, device=device), 0.5, training=True))
    return [t.cpu().numpy() for t in out]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def assert_differ(a, b):
    assert any(not np.array_equal(x, y) for x, y in zip(a, b))


# --- the global CPU stream -------------------------------------------------------


def test_get_rng_state_is_a_uint8_vector_copy():
    s = kiln.get_rng_state()
    assert s.dtype == kiln.uint8 and s.dim() == 1 and s.device.type == "cpu"
    kiln.rand(3)
    assert not np.array_equal(kiln.get_rng_state().numpy(), s.numpy())  # a copy, not a view


def test_set_rng_state_replays_every_sampler():
    kiln.manual_seed(7)
    kiln.rand(10)  # a nonzero offset, so the state is more than the seed
    state = kiln.get_rng_state()
    first = draws()
    kiln.set_rng_state(state)
    assert_same(draws(), first)
    assert_differ(draws(), first)  # the stream moved on
    assert np.array_equal(kiln.random.get_rng_state().numpy(), kiln.get_rng_state().numpy())


def test_set_rng_state_round_trips_through_numpy_bytes():
    state = kiln.get_rng_state()
    copy = kiln.tensor(list(state.numpy().tobytes()), dtype=kiln.uint8)
    a = draws()
    kiln.set_rng_state(copy)
    assert_same(draws(), a)


def test_set_rng_state_rejects_bad_states():
    with pytest.raises(TypeError, match=r"\[set_state\]"):
        kiln.set_rng_state(kiln.zeros(16))
    with pytest.raises(TypeError, match=r"\[set_state\]"):
        kiln.set_rng_state([0] * 16)
    with pytest.raises(RuntimeError, match=r"\[set_state\].*16 bytes"):
        kiln.set_rng_state(kiln.zeros(5, dtype=kiln.uint8))


# --- fork_rng --------------------------------------------------------------------


def test_fork_rng_restores_the_outer_stream():
    kiln.manual_seed(3)
    expected = draws()
    kiln.manual_seed(3)
    with kiln.random.fork_rng():
        inside = draws()
    assert_same(inside, expected)
    assert_same(draws(), expected)  # drawing inside did not advance the outer stream


def test_fork_rng_restores_after_an_exception():
    state = kiln.get_rng_state()
    with pytest.raises(ZeroDivisionError):
        with kiln.random.fork_rng(devices=[]):
            kiln.rand(4)
            1 / 0
    assert np.array_equal(kiln.get_rng_state().numpy(), state.numpy())


def test_fork_rng_disabled_passes_through():
    state = kiln.get_rng_state()
    with kiln.random.fork_rng(enabled=False):
        kiln.rand(4)
    assert not np.array_equal(kiln.get_rng_state().numpy(), state.numpy())


# --- kiln.Generator --------------------------------------------------------------


def test_generator_seeding_and_state():
    g = kiln.Generator()
    assert g.manual_seed(42) is g and g.initial_seed() == 42
    state = g.get_state()
    first = draws(generator=g)
    g.set_state(state)
    assert_same(draws(generator=g), first)
    g.manual_seed(42)
    assert_same(draws(generator=g), first)
    g.manual_seed(43)
    assert_differ(draws(generator=g), first)
    s = g.seed()
    assert isinstance(s, int) and g.initial_seed() == s


def test_generator_is_independent_of_the_global_stream():
    g = kiln.Generator().manual_seed(5)
    g_state = g.get_state()
    global_state = kiln.get_rng_state()
    draws(generator=g)
    assert np.array_equal(kiln.get_rng_state().numpy(), global_state.numpy())
    g.set_state(g_state)
    kiln.rand(100)  # global draws leave the generator alone
    assert np.array_equal(g.get_state().numpy(), g_state.numpy())
    # Two generators with one seed give one stream, whatever the default stream does.
    h = kiln.Generator().manual_seed(5)
    a = draws(generator=g)
    kiln.randn(50)
    assert_same(draws(generator=h), a)


def test_generator_device_must_match():
    g = kiln.Generator("cuda:0")  # no GPU needed: only the device type is compared
    assert g.device == kiln.device("cuda:0")
    with pytest.raises(RuntimeError, match=r"\[rand\].*generator"):
        kiln.rand(3, generator=g)
    with pytest.raises(TypeError, match=r"\[randn\] generator"):
        kiln.randn(3, generator=5)


# --- kiln.cuda's default generators ----------------------------------------------


def test_cuda_rng_state_of_an_explicit_device_round_trips():
    # Generators are host objects, so this runs without a GPU.
    state = kiln.cuda.get_rng_state("cuda:0")
    assert state.dtype == kiln.uint8 and state.numel() == 16
    g = kiln.Generator("cuda:0").manual_seed(99)
    kiln.cuda.set_rng_state(g.get_state(), "cuda:0")
    assert np.array_equal(kiln.cuda.get_rng_state(0).numpy(), g.get_state().numpy())
    cpu_state = kiln.get_rng_state()
    kiln.cuda.set_rng_state(state, kiln.device("cuda:0"))
    assert np.array_equal(kiln.cuda.get_rng_state("cuda:0").numpy(), state.numpy())
    assert np.array_equal(kiln.get_rng_state().numpy(), cpu_state.numpy())


def test_cuda_seeding_without_a_gpu_is_a_no_op():
    if kiln.cuda.is_available():
        pytest.skip("needs a machine without a GPU")
    kiln.cuda.manual_seed(1)
    kiln.cuda.manual_seed_all(1)
    kiln.cuda.seed()
    kiln.cuda.seed_all()
    assert kiln.cuda.get_rng_state_all() == []


def test_cuda_default_generators_are_the_ones_kiln_cuda_seeds():
    gens = kiln.cuda.default_generators
    assert len(gens) == kiln.cuda.device_count()
    for i, g in enumerate(gens):
        assert g.device == kiln.device(f"cuda:{i}")
        assert np.array_equal(g.get_state().numpy(), kiln.cuda.get_rng_state(i).numpy())
    with pytest.raises(AttributeError):
        kiln.cuda.no_such_attribute


@requires_gpu
def test_cuda_rng_state_replays_cuda_samplers():
    kiln.cuda.manual_seed(11)
    assert kiln.cuda.initial_seed() == 11
    assert kiln.cuda.default_generators[kiln.cuda.current_device()].initial_seed() == 11
    state = kiln.cuda.get_rng_state()
    cpu_state = kiln.get_rng_state()
    first = draws("cuda")
    assert np.array_equal(kiln.get_rng_state().numpy(), cpu_state.numpy())  # CUDA stream only
    kiln.cuda.set_rng_state(state)
    assert_same(draws("cuda"), first)
    kiln.cuda.set_rng_state_all([state] * kiln.cuda.device_count())
    assert_same(draws("cuda"), first)
    kiln.cuda.manual_seed_all(11)
    assert_same(draws("cuda"), first)
    states = kiln.cuda.get_rng_state_all()
    assert len(states) == kiln.cuda.device_count()


@requires_gpu
def test_cuda_generator_and_fork_rng():
    g = kiln.Generator("cuda").manual_seed(4)
    a = draws("cuda", generator=g)
    g.manual_seed(4)
    state = kiln.cuda.get_rng_state()
    with kiln.random.fork_rng():
        kiln.randn(10, device="cuda")
        assert_same(draws("cuda", generator=g), a)
    assert np.array_equal(kiln.cuda.get_rng_state().numpy(), state.numpy())


# --- the same script under PyTorch -----------------------------------------------


def reproducibility_script(mod, device):
    """Facts about the RNG API that hold for PyTorch and must hold for kiln."""
    facts = {}
    mod.manual_seed(0)
    get = mod.get_rng_state if device == "cpu" else mod.cuda.get_rng_state
    put = mod.set_rng_state if device == "cpu" else mod.cuda.set_rng_state
    s = get()
    facts["state_dtype"] = str(s.dtype).split(".")[-1]
    a = mod.randn(8, device=device)
    put(s)
    facts["replays"] = bool((mod.randn(8, device=device) == a).all())
    before = get()
    with mod.random.fork_rng(devices=[0] if device == "cuda" else []):
        mod.rand(5, device=device)
    facts["fork_restores"] = bool((get() == before).all())
    b = mod.randn(8, device=device)
    facts["stream_moves"] = not bool((b == a).all())
    g = mod.Generator(device=device).manual_seed(9)
    x = mod.rand(6, device=device, generator=g)
    before = get()
    g.manual_seed(9)
    facts["gen_replays"] = bool((mod.rand(6, device=device, generator=g) == x).all())
    facts["gen_independent"] = bool((get() == before).all())
    facts["gen_initial_seed"] = g.initial_seed()
    y = mod.empty(6, device=device).uniform_(0, 1, generator=g.manual_seed(9))
    facts["inplace_gen"] = bool((y == x).all())
    return facts


@pytest.mark.parametrize("device", DEVICES)
def test_rng_api_behaves_as_pytorch(device):
    torch = pytest.importorskip("torch")
    assert reproducibility_script(kiln, device) == reproducibility_script(torch, device)
