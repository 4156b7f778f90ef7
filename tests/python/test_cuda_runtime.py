"""The CUDA runtime: copies between host and device (all dtypes, casts, strides),
fill, the caching allocator (statistics, reuse, out-of-memory), device queries,
streams, events and pinned memory. GPU tests skip where there is no GPU (CI)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from helpers import RNG, requires_gpu

DTYPES = [kiln.bool, kiln.uint8, kiln.int8, kiln.int16, kiln.int32, kiln.int64,
          kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64]


def sample(shape, dtype):
    """Values every dtype holds exactly or rounds the same way on both sides:
    non-negative (float -> uint8 of negatives is undefined), with fractions."""
    a = RNG.integers(0, 40, size=shape) / 4.0
    return kiln.tensor(a).to(dtype)


def values(t):
    """A float64 NumPy array of a CPU or CUDA tensor's values."""
    return t.cpu().double().numpy()


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype(dtype):
    x = sample((3, 4, 5), dtype)
    y = x.cuda()
    assert y.is_cuda and y.device.type == "cuda" and y.dtype == dtype and y.shape == x.shape
    back = y.cpu()
    assert back.device.type == "cpu"
    np.testing.assert_array_equal(values(back), values(x))
    np.testing.assert_array_equal(values(x.to("cuda").to("cpu")), values(x))


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_sources_and_destinations(dtype):
    x = sample((3, 4, 5), dtype)
    ref = values(x)
    # non-contiguous host source
    np.testing.assert_array_equal(values(x.transpose(0, 2).cuda()), ref.transpose(2, 1, 0))
    np.testing.assert_array_equal(values(x.narrow(1, 1, 2).cuda()), ref[:, 1:3])
    # non-contiguous device source, to host and within the device
    y = x.cuda()
    np.testing.assert_array_equal(values(y.transpose(0, 2)), ref.transpose(2, 1, 0))
    np.testing.assert_array_equal(values(y.select(2, 3)), ref[:, :, 3])
    np.testing.assert_array_equal(values(y.permute(2, 0, 1).contiguous()), ref.transpose(2, 0, 1))
    # non-contiguous destinations: on the device (from host and device), and on the host
    d = kiln.zeros(5, 4, 3, dtype=dtype, device="cuda").transpose(0, 2)
    d.copy_(x)
    np.testing.assert_array_equal(values(d), ref)
    d2 = kiln.zeros(5, 4, 3, dtype=dtype, device="cuda").transpose(0, 2)
    d2.copy_(y)
    np.testing.assert_array_equal(values(d2), ref)
    h = kiln.zeros(5, 4, 3, dtype=dtype).transpose(0, 2)
    h.copy_(y)
    np.testing.assert_array_equal(values(h), ref)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width,offset", [(768, 0), (768, 768), (24, 8), (3, 1), (5, 2)])
def test_copies_of_rows_into_and_out_of_slices(dtype, width, offset):
    """Same-dtype copies whose last dim is contiguous on both sides take the row kernel
    (cuda/copy.cu) with 16-, 8- or 4-byte words when everything is aligned to them, the
    element kernel otherwise (odd widths and offsets): both must place every element."""
    rows, full = 6, 2 * width + offset
    src = sample((2, rows, width), dtype)
    ref = values(src)
    dst = kiln.zeros(2, rows, full, dtype=dtype, device="cuda")
    dst[:, :, offset:offset + width] = src.cuda()  # into a slice of the last dim
    want = np.zeros((2, rows, full))
    want[:, :, offset:offset + width] = ref
    np.testing.assert_array_equal(values(dst), want)
    out = dst[:, :, offset:offset + width].contiguous()  # out of one
    np.testing.assert_array_equal(values(out), ref)
    cat = kiln.cat([src.cuda(), dst[:, :, :offset + 1]], dim=-1)
    np.testing.assert_array_equal(values(cat), np.concatenate([ref, want[:, :, :offset + 1]], -1))
    rows_bcast = kiln.empty(2, rows, width, dtype=dtype, device="cuda")
    rows_bcast.copy_(src.cuda()[:, :1])  # a broadcast row
    np.testing.assert_array_equal(values(rows_bcast), np.broadcast_to(ref[:, :1], ref.shape))


@requires_gpu
def test_many_dims_and_broadcast_copies():
    x = sample((2, 3, 2, 3, 2, 3, 2, 2, 3), kiln.float32)
    ref = values(x)
    perm = (8, 0, 7, 1, 6, 2, 5, 3, 4)
    np.testing.assert_array_equal(values(x.cuda().permute(*perm)), ref.transpose(perm))
    d = kiln.empty(4, 3, device="cuda")
    d.copy_(kiln.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(values(d), np.tile([1.0, 2.0, 3.0], (4, 1)))
    e = kiln.empty(2, 3, dtype=kiln.int64, device="cuda")
    e.copy_(kiln.tensor([[5.0], [7.0]], device="cuda"))
    np.testing.assert_array_equal(values(e), [[5] * 3, [7] * 3])
    empty = kiln.empty(0, 3, device="cuda")
    assert empty.cpu().shape == (0, 3)


@requires_gpu
@pytest.mark.parametrize("src", DTYPES)
def test_casts_during_copy_match_cpu(src):
    x = sample((4, 6), src)
    y = x.cuda()
    for dst in DTYPES:
        expected = values(x.to(dst))
        np.testing.assert_array_equal(values(y.to(dst)), expected)        # on the device
        np.testing.assert_array_equal(values(y.t().to(dst)), expected.T)  # strided source
        h = kiln.empty(4, 6, dtype=dst)
        h.copy_(y)                                                        # device -> host
        np.testing.assert_array_equal(values(h), expected)
        d = kiln.empty(6, 4, dtype=dst, device="cuda").t()
        d.copy_(x)                                                        # host -> device
        np.testing.assert_array_equal(values(d), expected)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_and_factories(dtype):
    t = kiln.full((3, 4), 3, dtype=dtype, device="cuda")
    assert t.is_cuda
    np.testing.assert_array_equal(values(t), values(kiln.full((3, 4), 3, dtype=dtype)))
    z = kiln.zeros(4, 6, dtype=dtype, device="cuda")
    z.narrow(1, 1, 2).fill_(1)
    z.t().select(0, 5).fill_(1)
    ref = np.zeros((4, 6))
    ref[:, 1:3] = 1
    ref[:, 5] = 1
    np.testing.assert_array_equal(values(z), ref)
    np.testing.assert_array_equal(values(kiln.ones(5, dtype=dtype, device="cuda")), np.ones(5))


@requires_gpu
def test_creation_and_python_conversion():
    t = kiln.tensor([[1.5, 2.0], [3.0, -4.25]], device="cuda")
    assert t.is_cuda and t.dtype == kiln.float32
    assert t.tolist() == [[1.5, 2.0], [3.0, -4.25]]
    assert t[1, 1].item() == -4.25
    assert kiln.zeros(3, device="cuda").tolist() == [0.0, 0.0, 0.0]
    assert kiln.arange(5, device="cuda").tolist() == [0, 1, 2, 3, 4]
    assert kiln.tensor(7, device="cuda").item() == 7
    with pytest.raises(TypeError, match=r"cuda"):
        t.numpy()
    x = kiln.tensor([1.0, 2.0])
    assert x.to("cuda", kiln.float64).dtype == kiln.float64
    assert x.cuda(0).device == kiln.device("cuda:0")
    assert x.to(t).is_cuda


@requires_gpu
def test_bad_device_index_is_a_clear_error():
    n = kiln.cuda.device_count()
    with pytest.raises(RuntimeError, match=rf"cuda:{n + 3}"):
        kiln.zeros(2, device=f"cuda:{n + 3}")


@requires_gpu
def test_memory_stats_follow_tensors():
    kiln.cuda.synchronize()
    base = kiln.cuda.memory_allocated()
    x = kiln.empty(1 << 20, device="cuda")  # 4 MiB
    assert kiln.cuda.memory_allocated() - base >= 4 << 20
    assert kiln.cuda.memory_reserved() >= kiln.cuda.memory_allocated()
    assert kiln.cuda.max_memory_allocated() >= base + (4 << 20)
    del x
    assert kiln.cuda.memory_allocated() == base
    kiln.cuda.reset_peak_memory_stats()
    assert kiln.cuda.max_memory_allocated() == base
    assert kiln.cuda.max_memory_reserved() == kiln.cuda.memory_reserved()
    stats = kiln.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == base
    assert "kiln CUDA memory summary" in kiln.cuda.memory_summary()
    free, total = kiln.cuda.mem_get_info()
    assert 0 < free <= total


@requires_gpu
def test_freed_blocks_are_reused_without_cuda_malloc():
    x = kiln.empty(3 << 20, dtype=kiln.uint8, device="cuda")
    small = kiln.empty(100, device="cuda")
    del x, small
    before = kiln.cuda.memory_stats()["num_device_alloc"]
    for _ in range(5):
        y = kiln.empty(3 << 20, dtype=kiln.uint8, device="cuda")
        small = kiln.empty(100, device="cuda")
        del y, small
    assert kiln.cuda.memory_stats()["num_device_alloc"] == before


@requires_gpu
def test_empty_cache_returns_unused_memory():
    kiln.cuda.empty_cache()
    x = kiln.empty(64 << 20, dtype=kiln.uint8, device="cuda")
    reserved = kiln.cuda.memory_reserved()
    del x
    assert kiln.cuda.memory_reserved() == reserved  # cached, not freed
    kiln.cuda.empty_cache()
    assert kiln.cuda.memory_reserved() <= reserved - (64 << 20)
    assert kiln.cuda.memory_reserved() >= kiln.cuda.memory_allocated()


@requires_gpu
def test_out_of_memory_is_actionable_and_recoverable():
    keep = kiln.ones(1 << 24, device="cuda")  # 64 MiB: above the 32 MiB GEMM workspaces
    request = 200 * 2**30
    with pytest.raises(kiln.cuda.OutOfMemoryError) as info:
        kiln.empty(request, dtype=kiln.uint8, device="cuda")
    assert isinstance(info.value, RuntimeError)
    assert kiln.OutOfMemoryError is kiln.cuda.OutOfMemoryError
    msg = str(info.value)
    assert str(request) in msg and "cuda:0" in msg
    assert str(kiln.cuda.memory_allocated()) in msg
    assert "free" in msg and "total" in msg and "reserved but unused" in msg
    assert "[16777216] float32" in msg and str(64 << 20) in msg  # the live tensor, by shape
    assert kiln.cuda.memory_stats()["num_ooms"] >= 1
    # the process goes on
    y = kiln.full((1000,), 2.0, device="cuda")
    assert y.cpu().tolist() == [2.0] * 1000 and keep.cpu()[0].item() == 1.0


@requires_gpu
def test_training_continues_after_filling_the_device():
    kiln.manual_seed(0)
    model = kiln.nn.Sequential(kiln.nn.Linear(256, 512), kiln.nn.ReLU(), kiln.nn.Linear(512, 10))
    model.to("cuda")
    x = kiln.randn(4096, 256, device="cuda")
    target = kiln.randint(0, 10, (4096,), device="cuda")

    def step():
        model.zero_grad()
        loss = kiln.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        with kiln.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        return loss.item()

    first = step()
    hog = []
    with pytest.raises(kiln.cuda.OutOfMemoryError) as info:
        while True:  # the whole card, 4 GiB at a time
            hog.append(kiln.empty(4 << 30, dtype=kiln.uint8, device="cuda"))
    assert len(hog) >= 2 and "[4294967296] uint8" in str(info.value)
    with pytest.raises(kiln.cuda.OutOfMemoryError):
        kiln.empty(8 << 30, dtype=kiln.uint8, device="cuda")
    hog.clear()
    losses = [step() for _ in range(5)]
    assert all(np.isfinite(losses)) and losses[-1] < first


@requires_gpu
def test_device_queries():
    n = kiln.cuda.device_count()
    assert n >= 1 and kiln.cuda.current_device() == 0
    props = kiln.cuda.get_device_properties(0)
    assert props.total_memory > 0 and props.multi_processor_count > 0 and props.major >= 1
    assert kiln.cuda.get_device_name() == props.name
    assert kiln.cuda.get_device_capability(0) == (props.major, props.minor)
    with kiln.cuda.device(0):
        assert kiln.cuda.current_device() == 0
    kiln.cuda.set_device(0)
    kiln.cuda.synchronize()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    tp = torch.cuda.get_device_properties(0)
    assert (props.name, props.total_memory, props.multi_processor_count) == (
        tp.name, tp.total_memory, tp.multi_processor_count)
    assert kiln.cuda.get_device_capability(0) == torch.cuda.get_device_capability(0)
    assert n == torch.cuda.device_count()


@requires_gpu
def test_streams_and_events():
    default = kiln.cuda.current_stream()
    assert default == kiln.cuda.default_stream() and default.cuda_stream == 0
    s = kiln.cuda.Stream()
    assert s != default and s.device == kiln.device("cuda:0")
    x = kiln.tensor(RNG.uniform(-1, 1, (256, 256)).astype(np.float32))
    with kiln.cuda.stream(s):
        assert kiln.cuda.current_stream() == s
        y = x.cuda()
        z = y.t().contiguous()
        back = z.cpu()
    assert kiln.cuda.current_stream() == default
    with s:
        assert kiln.cuda.current_stream() == s
    assert kiln.cuda.current_stream() == default
    np.testing.assert_array_equal(back.numpy(), x.numpy().T)
    s.synchronize()
    assert s.query()
    default.wait_stream(s)

    start, end = kiln.cuda.Event(enable_timing=True), kiln.cuda.Event(enable_timing=True)
    start.record()
    big = kiln.empty(16 << 20, device="cuda")
    big.fill_(1.5)
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0
    e = s.record_event()
    e.wait(default)
    e.synchronize()
    assert e.query()
    with pytest.raises(RuntimeError, match=r"enable_timing"):
        kiln.cuda.Event().elapsed_time(kiln.cuda.Event())
    big.record_stream(s)
    del big
    again = kiln.empty(16 << 20, device="cuda")
    again.fill_(2.0)
    assert again[5].item() == 2.0


@requires_gpu
def test_pinned_memory_and_non_blocking_copies():
    x = kiln.tensor(RNG.uniform(-1, 1, (64, 32)).astype(np.float32))
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p.pin_memory() is p
    np.testing.assert_array_equal(p.numpy(), x.numpy())
    y = p.to("cuda", non_blocking=True)
    del p  # the pinned block must survive until the copy has run
    kiln.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), x.numpy())
    np.testing.assert_array_equal(x.t().pin_memory().numpy(), x.numpy().T)
    with pytest.raises(RuntimeError, match=r"\[pin_memory\]"):
        y.pin_memory()


def test_cuda_request_without_gpu_is_a_clear_error():
    # Runs everywhere: hiding the GPUs gives a process with none.
    code = (
        "import kiln\n"
        "for f in (lambda: kiln.zeros(3, device='cuda'), lambda: kiln.tensor([1.0]).cuda(),\n"
        "          lambda: kiln.cuda.memory_allocated(),\n"
        "          lambda: kiln.tensor([1.0]).pin_memory()):\n"
        "    try:\n"
        "        f()\n"
        "    except RuntimeError as e:\n"
        "        print(type(e).__name__, e)\n"
        "print(kiln.cuda.is_available(), kiln.tensor([1.0]).is_pinned())\n"
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 5, out.stdout
    assert "cuda:0" in lines[0] and "no CUDA device" in lines[0]
    assert "cuda:0" in lines[1] and "no CUDA device" in lines[1]
    assert lines[2].startswith("RuntimeError") and lines[3].startswith("RuntimeError")
    assert lines[4] == "False False"
