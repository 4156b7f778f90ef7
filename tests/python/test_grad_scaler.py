"""kiln.amp.GradScaler: skipped steps on inf/NaN gradients, back-off and
growth of the scale, unscale_ protocol errors, state round trips through
kiln.save/kiln.load, the device-side C++ steps, bfloat16 pass-through, and
mixed-precision training (bf16 on CPU; fp16 + scaler on CUDA)."""

import warnings

import numpy as np
import pytest

import kiln
from helpers import requires_gpu

F = kiln.nn.functional
RNG = np.random.default_rng(0)


def setup(device="cpu", **kw):
    kiln.manual_seed(0)
    model = kiln.nn.Linear(4, 3).to(device)
    opt = kiln.optim.SGD(model.parameters(), lr=0.1)
    scaler = kiln.amp.GradScaler(device, **kw)
    x = kiln.tensor(RNG.normal(size=(5, 4)).astype(np.float32), device=device)
    return model, opt, scaler, x


def backward(model, scaler, x, poison=None):
    model.zero_grad()
    scaler.scale(model(x).pow(2).mean()).backward()
    if poison is not None:
        with kiln.no_grad():
            model.weight.grad[0, 1] = poison


@pytest.mark.parametrize("poison", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_grad_skips_step_and_backs_off(poison):
    model, opt, scaler, x = setup(init_scale=1024.0)
    before = model.weight.detach().clone()
    backward(model, scaler, x, poison)
    assert scaler.step(opt) is False
    np.testing.assert_array_equal(model.weight.detach().numpy(), before.numpy())
    scaler.update()
    assert scaler.get_scale() == 512.0
    # The next clean iteration steps again.
    backward(model, scaler, x)
    assert scaler.step(opt) is True
    scaler.update()
    assert not np.array_equal(model.weight.detach().numpy(), before.numpy())
    assert scaler.get_scale() == 512.0


def test_grows_after_growth_interval_clean_steps():
    model, opt, scaler, x = setup(init_scale=8.0, growth_interval=3, growth_factor=4.0)
    scales = []
    for _ in range(7):
        backward(model, scaler, x)
        assert scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [8.0, 8.0, 32.0, 32.0, 32.0, 128.0, 128.0]
    # An overflow resets the count of clean steps.
    backward(model, scaler, x, float("inf"))
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 64.0
    assert scaler._get_growth_tracker() == 0


def test_unscale_divides_grads_by_scale():
    model, opt, scaler, x = setup(init_scale=256.0)
    model.zero_grad()
    model(x).pow(2).mean().backward()
    plain = model.weight.grad.numpy().copy()
    backward(model, scaler, x)
    np.testing.assert_allclose(model.weight.grad.numpy(), 256.0 * plain, rtol=1e-5)
    scaler.unscale_(opt)
    np.testing.assert_allclose(model.weight.grad.numpy(), plain, rtol=1e-5)
    assert scaler.step(opt) is True  # step() after unscale_() does not unscale again
    scaler.update()


def test_unscale_twice_and_step_twice_raise():
    model, opt, scaler, x = setup()
    backward(model, scaler, x)
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"\[GradScaler.unscale_\].*already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"\[GradScaler.step\].*already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"\[GradScaler.unscale_\].*after step"):
        scaler.unscale_(opt)
    scaler.update()
    backward(model, scaler, x)
    scaler.unscale_(opt)  # a new iteration after update()


def test_protocol_errors():
    model, opt, scaler, x = setup()
    with pytest.raises(RuntimeError, match=r"\[GradScaler.step\].*scale\(\)"):
        scaler.step(opt)
    backward(model, scaler, x)
    with pytest.raises(RuntimeError, match=r"\[GradScaler.update\].*No inf checks"):
        scaler.update()
    with pytest.raises(RuntimeError, match=r"\[GradScaler.step\].*Closure"):
        scaler.step(opt, closure=lambda: 0.0)
    with pytest.raises(ValueError, match=r"\[GradScaler.scale\].*str"):
        scaler.scale("loss")
    with pytest.raises(ValueError, match=r"\[GradScaler\] growth_factor"):
        kiln.amp.GradScaler("cpu", growth_factor=0.5)
    with pytest.raises(ValueError, match=r"\[GradScaler\] backoff_factor"):
        kiln.amp.GradScaler("cpu", backoff_factor=1.5)
    with pytest.raises(RuntimeError, match=r"\[GradScaler\] unsupported device"):
        kiln.amp.GradScaler("tpu")
    half = kiln.nn.Linear(2, 2).to(kiln.float16)
    hopt = kiln.optim.SGD(half.parameters(), lr=0.1)
    scaler.scale(half(kiln.ones(1, 2, dtype=kiln.float16)).sum()).backward()
    with pytest.raises(ValueError, match=r"\[GradScaler.unscale_\].*FP16"):
        scaler.unscale_(hopt)


def test_scale_nested_outputs():
    _, _, scaler, _ = setup(init_scale=4.0)
    a, b = kiln.tensor([1.0, 2.0]), kiln.tensor(3.0)
    out = scaler.scale([a, (b, [a])])
    assert isinstance(out, list) and isinstance(out[1], tuple) and isinstance(out[1][1], list)
    np.testing.assert_array_equal(out[0].numpy(), [4.0, 8.0])
    assert out[1][0].item() == 12.0 and out[1][1][0].shape == (2,)
    assert scaler.scale(kiln.tensor([1.0], dtype=kiln.float16)).dtype == kiln.float16


def test_update_with_new_scale_and_setters():
    model, opt, scaler, x = setup()
    backward(model, scaler, x)
    scaler.step(opt)
    scaler.update(new_scale=3.0)
    assert scaler.get_scale() == 3.0
    scaler.update(new_scale=kiln.tensor([5.0]))
    assert scaler.get_scale() == 5.0
    scaler.set_growth_factor(3.0)
    scaler.set_backoff_factor(0.25)
    scaler.set_growth_interval(7)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(),
            scaler.get_growth_interval()) == (3.0, 0.25, 7)
    assert scaler.is_enabled()


def test_state_round_trips_through_save_load(tmp_path):
    model, opt, scaler, x = setup(init_scale=64.0, growth_interval=5, growth_factor=3.0)
    for _ in range(2):
        backward(model, scaler, x)
        scaler.step(opt)
        scaler.update()
    backward(model, scaler, x, float("nan"))
    scaler.step(opt)
    scaler.update()
    backward(model, scaler, x)
    scaler.step(opt)
    scaler.update()
    sd = scaler.state_dict()
    assert sd == {"scale": 32.0, "growth_factor": 3.0, "backoff_factor": 0.5,
                  "growth_interval": 5, "_growth_tracker": 1}
    kiln.save(sd, tmp_path / "scaler.safetensors")
    fresh = kiln.amp.GradScaler("cpu")
    fresh.load_state_dict(kiln.load(tmp_path / "scaler.safetensors"))
    assert fresh.state_dict() == sd
    # The loaded state drives the next steps: 4 more clean steps reach the interval.
    model2, opt2, _, _ = setup()
    for _ in range(4):
        backward(model2, fresh, x)
        fresh.step(opt2)
        fresh.update()
    assert fresh.get_scale() == 96.0


def test_disabled_scaler_passes_through():
    model, opt, scaler, x = setup(enabled=False)
    loss = model(x).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    assert scaler.step(opt) is True
    scaler.update()
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    with pytest.raises(RuntimeError, match=r"\[GradScaler.load_state_dict\].*empty"):
        kiln.amp.GradScaler("cpu").load_state_dict({})


def test_bfloat16_autocast_passes_through_and_warns_once():
    model, opt, scaler, x = setup()
    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        loss = model(x).float().pow(2).mean()
    with pytest.warns(UserWarning, match=r"\[GradScaler\] bfloat16 autocast"):
        scaled = scaler.scale(loss)
    assert scaled is loss and scaler.get_scale() == 1.0
    loss.backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert scaler.step(opt) is True
        scaler.update()
        scaler.scale(loss)


def test_created_inside_bfloat16_region_passes_through():
    with kiln.autocast("cpu"):
        with pytest.warns(UserWarning, match=r"\[GradScaler\] bfloat16"):
            scaler = kiln.amp.GradScaler("cpu")
    loss = kiln.tensor(2.0)
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    # A scaler created after bfloat16 regions (earlier in the program) still scales.
    assert kiln.amp.GradScaler("cpu", init_scale=4.0).scale(loss).item() == 8.0


def test_float16_autocast_still_scales():
    model, opt, scaler, x = setup(init_scale=16.0)
    with kiln.autocast("cpu", dtype=kiln.float16):
        loss = model(x).float().pow(2).mean()
    assert scaler.scale(loss).item() == pytest.approx(16.0 * loss.item())


def test_foreach_unscale_op():
    grads = [kiln.tensor([2.0, 4.0]), kiln.tensor([[8.0]], dtype=kiln.float16), kiln.tensor(6.0)]
    found = kiln.zeros(())
    kiln._C._amp_foreach_non_finite_check_and_unscale_(grads, found, kiln.tensor(0.5))
    assert found.item() == 0.0
    np.testing.assert_array_equal(grads[0].numpy(), [1.0, 2.0])
    assert grads[1].item() == 4.0 and grads[1].dtype == kiln.float16 and grads[2].item() == 3.0
    bad = [kiln.tensor([1.0, float("nan")])]
    kiln._C._amp_foreach_non_finite_check_and_unscale_(bad, found, kiln.tensor(0.5))
    assert found.item() == 1.0
    # The flag accumulates: a later clean call does not reset it.
    kiln._C._amp_foreach_non_finite_check_and_unscale_(grads, found, kiln.tensor(1.0))
    assert found.item() == 1.0
    op = kiln._C._amp_foreach_non_finite_check_and_unscale_
    with pytest.raises(RuntimeError, match=r"\[_amp_foreach_non_finite_check_and_unscale_\] found_inf"):
        op(grads, kiln.zeros(2), kiln.tensor(1.0))
    with pytest.raises(RuntimeError, match=r"\[_amp_foreach_non_finite_check_and_unscale_\] inv_scale"):
        op(grads, found, kiln.tensor(1.0).double())


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_gpu)])
@pytest.mark.parametrize("poison_at", [None, "small", "straddling", "strided"])
def test_foreach_unscale_many_tensors(device, poison_at):
    # 70 gradients (more than one CUDA launch holds), mixed dtypes, one of 2**24 + 2**22 + 5
    # elements whose chunks straddle two launches, and a transposed (non-contiguous) one.
    rng = np.random.default_rng(0)
    sizes = [int(n) for n in rng.integers(1, 5000, size=66)] + [2**24 + 2**22 + 5, 3, 1]
    grads = []
    for i, n in enumerate(sizes):
        dtype = [kiln.float32, kiln.float16, kiln.bfloat16, kiln.float64][i % 4]
        grads.append(kiln.full((n,), 4.0, dtype=dtype, device=device))
    grads.append(kiln.full((3, 5), 4.0, device=device).t())
    if poison_at == "small":
        grads[5][-1] = float("inf")
    elif poison_at == "straddling":
        grads[66][2**24 + 2**22 + 4] = float("nan")  # the very last element
    elif poison_at == "strided":
        grads[-1][4, 2] = float("-inf")
    found = kiln.zeros((), device=device)
    kiln._C._amp_foreach_non_finite_check_and_unscale_(grads, found,
                                                       kiln.tensor(0.25, device=device))
    assert found.item() == (0.0 if poison_at is None else 1.0)
    for i, g in enumerate(grads):
        finite = g[kiln.isfinite(g)].float()
        assert finite.numel() >= g.numel() - 1
        assert (finite == 1.0).all().item(), (i, g.dtype, g.shape)
    assert not grads[-1].is_contiguous()  # unscaled in place through its copy


def test_update_scale_op():
    scale, tracker = kiln.tensor(4.0), kiln.zeros((), dtype=kiln.int32)
    up = kiln._C._amp_update_scale_
    up(scale, tracker, kiln.tensor(0.0), 2.0, 0.5, 2)
    assert (scale.item(), tracker.item()) == (4.0, 1)
    up(scale, tracker, kiln.tensor(0.0), 2.0, 0.5, 2)
    assert (scale.item(), tracker.item()) == (8.0, 0)
    up(scale, tracker, kiln.tensor(1.0), 2.0, 0.5, 2)
    assert (scale.item(), tracker.item()) == (4.0, 0)
    # Growth that would overflow float32 keeps the scale but still restarts the count.
    big = kiln.tensor(3e38)
    up(big, tracker, kiln.tensor(0.0), 2.0, 0.5, 1)
    assert big.item() == pytest.approx(3e38) and tracker.item() == 0
    with pytest.raises(RuntimeError, match=r"\[_amp_update_scale_\] growth_tracker"):
        up(scale, kiln.zeros(()), kiln.tensor(0.0), 2.0, 0.5, 2)
    with pytest.raises(ValueError, match=r"\[_amp_update_scale_\] growth_interval"):
        up(scale, tracker, kiln.tensor(0.0), 2.0, 0.5, 0)


def train_mlp(device, dtype, use_scaler, steps=60):
    kiln.manual_seed(0)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 8)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + 2 * (x[:, 2] > 0)
    x, y = kiln.tensor(x, device=device), kiln.tensor(y, device=device)
    nn = kiln.nn
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = kiln.optim.Adam(model.parameters(), lr=1e-2)
    scaler = kiln.amp.GradScaler(device, enabled=use_scaler)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with kiln.autocast(device, dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        assert loss.dtype == kiln.float32
        scaler.scale(loss).backward()
        assert all(p.grad.dtype == kiln.float32 for p in model.parameters())
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses


def test_mlp_trains_with_bfloat16_autocast_on_cpu():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        losses = train_mlp("cpu", kiln.bfloat16, use_scaler=True)
    assert losses[-1] < 0.5 * losses[0]


def test_mlp_trains_with_float16_autocast_and_scaler_on_cpu():
    losses = train_mlp("cpu", kiln.float16, use_scaler=True)
    assert losses[-1] < 0.5 * losses[0]


@requires_gpu
def test_mlp_trains_with_float16_autocast_and_scaler_on_cuda():
    losses = train_mlp("cuda", kiln.float16, use_scaler=True)
    assert losses[-1] < 0.5 * losses[0]


@requires_gpu
def test_cuda_scaler_state_lives_on_device():
    model, opt, scaler, x = setup("cuda", init_scale=8.0)
    backward(model, scaler, x, float("inf"))
    assert scaler._scale.device.type == "cuda"
    assert scaler.step(opt) is False
    scaler.update()
    assert scaler.get_scale() == 4.0


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_gpu)])
def test_scale_sequence_matches_torch(device):
    torch = pytest.importorskip("torch")
    pattern = [False, False, True, False, False, False, True, False, False, False]
    results = []
    for lib in (kiln, torch):
        lib.manual_seed(0)
        p = lib.nn.Parameter(lib.ones(3, device=device))
        opt = lib.optim.SGD([p], lr=0.1)
        scaler = lib.amp.GradScaler(device, init_scale=32.0, growth_interval=2)
        scales = []
        for bad in pattern:
            opt.zero_grad()
            scaler.scale((p * p).sum()).backward()
            if bad:
                with lib.no_grad():
                    p.grad[0] = float("nan")
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        results.append((scales, p.detach().cpu().numpy()))
    assert results[0][0] == results[1][0]
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
