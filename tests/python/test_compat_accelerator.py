"""kiln.accelerator: torch.accelerator's device-agnostic API (issue 17, item 1)."""

import pytest

import kiln
from helpers import requires_gpu


def test_answers_without_a_gpu_match_pytorch():
    if kiln.cuda.is_available():
        pytest.skip("checks the answers on a machine without a GPU")
    expected = kiln.device("cuda") if kiln.cuda.is_built() else None
    assert kiln.accelerator.current_accelerator() == expected
    assert kiln.accelerator.current_accelerator(check_available=True) is None
    assert kiln.accelerator.is_available() is False
    assert kiln.accelerator.device_count() == 0
    for call in (kiln.accelerator.current_device_index, kiln.accelerator.synchronize,
                 lambda: kiln.accelerator.set_device_index(0),
                 kiln.accelerator.memory_allocated, kiln.accelerator.get_memory_info):
        with pytest.raises(RuntimeError, match=r"\[accelerator\.\w+\] Cannot access accelerator"):
            call()
    with kiln.accelerator.device_index(None):  # None changes nothing and needs no device
        pass
    with pytest.raises(RuntimeError, match="Cannot access accelerator"):
        with kiln.accelerator.device_index(0):
            pass
    kiln.accelerator.empty_cache()  # harmless without a device, as in PyTorch


def test_the_pytorch_spellings_exist():
    torch = pytest.importorskip("torch")
    missing = [n for n in torch.accelerator.__all__
               if n not in ("Graph", "empty_host_cache") and not hasattr(kiln.accelerator, n)]
    assert missing == []


@requires_gpu
def test_with_a_gpu():
    acc = kiln.accelerator
    assert acc.is_available() and acc.current_accelerator() == kiln.device("cuda")
    assert acc.current_accelerator(check_available=True) == kiln.device("cuda")
    assert acc.device_count() == kiln.cuda.device_count() >= 1
    assert acc.current_device_index() == kiln.cuda.current_device()
    acc.set_device_index("cuda:0")
    acc.set_device_index(kiln.device("cuda", 0))
    with acc.device_index(0):
        assert acc.current_device_index() == 0
    x = kiln.ones(1024, device="cuda")
    acc.synchronize()
    acc.synchronize("cuda:0")
    assert acc.memory_allocated() >= x.nbytes
    assert acc.max_memory_allocated(0) >= acc.memory_allocated(0)
    free, total = acc.get_memory_info()
    assert 0 < free <= total
    assert kiln.float32 in acc.get_device_capability()["supported_dtypes"]
    assert acc.current_stream().cuda_stream == kiln.cuda.current_stream().cuda_stream
    with pytest.raises(ValueError, match="cpu doesn't match the current accelerator cuda"):
        acc.set_device_index("cpu")
    with pytest.raises(TypeError, match="expected an int, str or kiln.device"):
        acc.synchronize(1.5)
