import pytest

import kiln
from helpers import rand, requires_gpu


@pytest.fixture(autouse=True)
def restore_flags():
    saved = (kiln.backends.cuda.matmul.allow_tf32, kiln.backends.cudnn.allow_tf32,
             kiln.backends.cudnn.benchmark, kiln.backends.cudnn.deterministic)
    yield
    (kiln.backends.cuda.matmul.allow_tf32, kiln.backends.cudnn.allow_tf32,
     kiln.backends.cudnn.benchmark, kiln.backends.cudnn.deterministic) = saved


def test_defaults_match_pytorch():
    assert kiln.backends.cuda.matmul.allow_tf32 is False
    assert kiln.backends.cudnn.allow_tf32 is True
    assert kiln.backends.cudnn.benchmark is False
    assert kiln.backends.cudnn.deterministic is False
    assert kiln.get_float32_matmul_precision() == "highest"


def test_flags_round_trip_through_cpp():
    kiln.backends.cuda.matmul.allow_tf32 = True
    assert kiln._C._get_backend_flag("matmul_allow_tf32") is True
    assert kiln.get_float32_matmul_precision() == "high"
    kiln.set_float32_matmul_precision("highest")
    assert kiln.backends.cuda.matmul.allow_tf32 is False
    kiln.backends.cudnn.benchmark = True
    assert kiln._C._get_backend_flag("cudnn_benchmark") is True
    with pytest.raises(RuntimeError, match=r"\[set_float32_matmul_precision\].*'low'"):
        kiln.set_float32_matmul_precision("low")


def test_num_threads():
    n = kiln.get_num_threads()
    assert n >= 1
    kiln.set_num_threads(1)
    assert kiln.get_num_threads() == 1
    kiln.set_num_threads(n)
    with pytest.raises(RuntimeError, match=r"\[set_num_threads\].*-2"):
        kiln.set_num_threads(-2)


@requires_gpu
def test_tf32_changes_float32_matmul_precision_on_gpu():
    a, b = rand(512, 512).astype("float32"), rand(512, 512).astype("float32")
    exact = a.astype("float64") @ b.astype("float64")
    ga, gb = kiln.tensor(a, device="cuda"), kiln.tensor(b, device="cuda")
    full = (ga @ gb).cpu().numpy()
    kiln.backends.cuda.matmul.allow_tf32 = True
    fast = (ga @ gb).cpu().numpy()
    err_full, err_fast = abs(full - exact).max(), abs(fast - exact).max()
    assert err_full < 1e-3 and 1e-3 < err_fast < 0.5  # TF32 keeps a 10-bit mantissa
