"""kiln.load reading files torch.save wrote (issue 17, item 3): the zip format and the
legacy one, through a restricted unpickler that never runs code from the file.

Files are written by tests/python/torch_files.py (no PyTorch needed) and, where
PyTorch is installed, by torch.save itself."""

import collections
import io
import os
import pickle

import numpy as np
import pytest

import kiln
import torch_files as tf


def _load_bytes(data, **kwargs):
    return kiln.load(io.BytesIO(data), **kwargs)


@pytest.fixture(params=["zip", "legacy"])
def write(request):
    return tf.zip_file if request.param == "zip" else tf.legacy_file


def test_a_state_dict_loads_with_names_dtypes_and_values(write):
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    b = np.array([1, -2, 3], dtype=np.int64)
    sd = collections.OrderedDict([("fc.weight", tf.tensor(w, "0")),
                                  ("fc.bias", tf.tensor(b, "1")),
                                  ("mask", tf.tensor(np.array([True, False]), "2"))])
    out = _load_bytes(write(sd))
    assert isinstance(out, collections.OrderedDict)
    assert list(out) == ["fc.weight", "fc.bias", "mask"]
    assert out["fc.weight"].dtype == kiln.float32 and out["fc.bias"].dtype == kiln.int64
    np.testing.assert_array_equal(out["fc.weight"].numpy(), w)
    np.testing.assert_array_equal(out["fc.bias"].numpy(), b)
    assert out["mask"].tolist() == [True, False]


@pytest.mark.parametrize("dtype", ["float16", "float64", "int8", "int16", "int32", "uint8"])
def test_every_storage_type(write, dtype):
    arr = (np.arange(6) - 2).astype(dtype).reshape(2, 3)
    out = _load_bytes(write({"x": tf.tensor(arr, "0")}))
    assert out["x"].dtype == getattr(kiln, dtype)
    np.testing.assert_array_equal(out["x"].numpy(), arr)


def test_views_share_their_storage_with_offsets_and_strides(write):
    storage = tf.Storage(np.arange(10, dtype=np.float32), "7")
    whole = tf.Tensor(storage, 0, (10,), (1,))
    transposed = tf.Tensor(storage, 1, (3, 2), (1, 3))  # a strided window at offset 1
    out = _load_bytes(write([whole, transposed, 5, "s", (1.5, None)]))
    np.testing.assert_array_equal(out[1].numpy(),
                                  np.arange(10, dtype=np.float32)[1:7].reshape(2, 3).T)
    out[0].add_(100)  # one storage in PyTorch: one in kiln
    assert out[1][0, 0].item() == 101
    assert out[2:] == [5, "s", (1.5, None)]


def test_requires_grad_parameters_and_nested_optimizer_state(write):
    p = tf.Tensor(tf.Storage(np.ones(3, np.float32), "0"), 0, (3,), (1,), requires_grad=True,
                  parameter=True)
    state = {"state": {0: {"step": tf.tensor(np.array(3.0, np.float32), "1"),
                           "exp_avg": tf.tensor(np.full(3, 0.5, np.float32), "2")}},
             "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "params": [0]}]}
    out = _load_bytes(write({"param": p, "optimizer": state}))
    assert isinstance(out["param"], kiln.nn.Parameter) and out["param"].requires_grad
    assert out["optimizer"]["state"][0]["step"].item() == 3.0
    assert out["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)


def test_map_location_and_cuda_files_without_cuda(write):
    data = write({"w": tf.tensor(np.ones(2, np.float32), "0", location="cuda:0")})
    if not kiln.cuda.is_available():
        with pytest.raises(RuntimeError, match="saved on cuda:0.*map_location='cpu'"):
            _load_bytes(data)
    out = _load_bytes(data, map_location="cpu")
    assert out["w"].device == kiln.device("cpu") and out["w"].tolist() == [1, 1]
    seen = []
    _load_bytes(data, map_location=lambda t, loc: seen.append(loc) or t)
    assert seen == ["cuda:0"]


def test_a_path_and_a_module_state_dict_load_into_a_kiln_module(tmp_path):
    model = kiln.nn.Linear(4, 2)
    w = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    path = tmp_path / "model.pt"
    path.write_bytes(tf.zip_file({"weight": tf.tensor(w, "0"),
                                  "bias": tf.tensor(np.zeros(2, np.float32), "1")},
                                 root="model"))
    model.load_state_dict(kiln.load(path))
    np.testing.assert_array_equal(model.weight.detach().numpy(), w)


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("container", [tf.zip_with_pickle, tf.legacy_with_pickle])
def test_a_pickle_that_would_run_code_is_refused_without_running(tmp_path, container):
    marker = tmp_path / "pwned"
    data = container(pickle.dumps({"w": _Evil(marker)}, protocol=2))
    with pytest.raises(pickle.UnpicklingError,
                       match=r"Unsupported global: GLOBAL (posix|os|nt)\.system.*state_dict"):
        _load_bytes(data)
    assert not marker.exists()


def test_pytorch_weights_only_globals_load_and_others_are_refused():
    data = tf.zip_with_pickle(pickle.dumps(collections.Counter(a=1), protocol=2))
    assert _load_bytes(data) == collections.Counter(a=1)  # allowed by PyTorch's rules too
    data = tf.zip_with_pickle(pickle.dumps(np.float64(1.5), protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL numpy.*add_safe_globals"):
        _load_bytes(data)


def test_unreadable_files_say_what_they_look_like(tmp_path):
    cases = [
        (b"\x93NUMPY\x01\x00" + bytes(100), "NumPy .npy file"),
        (pickle.dumps({"a": 1}, protocol=2), "Python pickle that torch.save did not write"),
        (b"hello world, this is text" * 4, "looks like text"),
        (b"\x1f\x8b\x08" + bytes(50), "gzip"),
    ]
    for data, match in cases:
        with pytest.raises(ValueError, match=match):
            _load_bytes(data)
    tar = bytearray(1024)
    tar[257:262] = b"ustar"
    with pytest.raises(ValueError, match="tar archive.*before version 0.4"):
        _load_bytes(bytes(tar))


def test_malformed_torch_files_raise_unpickling_error():
    good = tf.zip_file({"w": tf.tensor(np.ones(4, np.float32), "0")})
    import zipfile

    # A storage record that is missing, and a tensor that runs past its storage.
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(buf, "w") as dst:
        for name in src.namelist():
            if name != "archive/data/0":
                dst.writestr(name, src.read(name))
    with pytest.raises(pickle.UnpicklingError, match="storage record archive/data/0 is missing"):
        _load_bytes(buf.getvalue())
    long = tf.Tensor(tf.Storage(np.ones(4, np.float32), "0"), 2, (3,), (1,))
    with pytest.raises(pickle.UnpicklingError, match="runs past storage 0 of 4 elements"):
        _load_bytes(tf.zip_file(long))
    with pytest.raises(pickle.UnpicklingError, match="without a <root>/data.pkl"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("x/other.txt", "hi")
        _load_bytes(buf.getvalue())
    legacy = tf.legacy_file({"w": tf.tensor(np.ones(4, np.float32), "0")})
    with pytest.raises(pickle.UnpicklingError, match="runs past the end of the file"):
        _load_bytes(legacy[:-3])


def test_kiln_files_still_load():
    buf = io.BytesIO()
    kiln.save({"x": kiln.arange(3)}, buf)
    assert kiln.load(io.BytesIO(buf.getvalue()))["x"].tolist() == [0, 1, 2]


def test_load_arguments():
    data = tf.zip_file({"x": tf.tensor(np.ones(1, np.float32), "0")})
    assert _load_bytes(data, pickle_module=pickle, weights_only=True, mmap=False)["x"].item() == 1
    with pytest.raises(TypeError, match="pickle_module"):
        _load_bytes(data, pickle_module=object())
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['bogus'\\]"):
        _load_bytes(data, bogus=1)


# ---- the same files written by PyTorch itself --------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("zipped", [True, False])
def test_files_written_by_torch_save(torch, tmp_path, zipped):
    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(5, 4, generator=gen)).sum().backward()
    opt.step()
    base = torch.arange(12, dtype=torch.float64)
    obj = {"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3,
           "views": [base, base[2:8].view(2, 3).t()], "half": torch.ones(2, dtype=torch.float16),
           "bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16), "names": ("a", "b"),
           "param": torch.nn.Parameter(torch.ones(2)), "size": torch.Size([2, 3])}
    path = tmp_path / "ck.pt"
    torch.save(obj, path, _use_new_zipfile_serialization=zipped)
    out = kiln.load(path)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(out["model"][k].numpy(), v.numpy())
        assert str(out["model"][k].dtype) == str(v.dtype).replace("torch", "kiln")
    state = opt.state_dict()
    assert out["optim"]["param_groups"][0]["lr"] == state["param_groups"][0]["lr"]
    np.testing.assert_array_equal(out["optim"]["state"][0]["exp_avg"].numpy(),
                                  state["state"][0]["exp_avg"].numpy())
    assert out["epoch"] == 3 and out["names"] == ("a", "b") and tuple(out["size"]) == (2, 3)
    np.testing.assert_array_equal(out["views"][1].numpy(), obj["views"][1].numpy())
    out["views"][0].add_(1)
    assert out["views"][1][0, 0].item() == 3.0  # still a view of the same storage
    assert out["bf16"].float().tolist() == [1.5, -2.0]
    assert isinstance(out["param"], kiln.nn.Parameter) and out["param"].requires_grad


def test_a_whole_torch_model_is_refused_with_the_fix(torch, tmp_path):
    path = tmp_path / "model.pt"
    torch.save(torch.nn.Linear(2, 2), path)
    with pytest.raises(pickle.UnpicklingError,
                       match=r"GLOBAL torch\.nn\.modules\.linear\.Linear.*state_dict"):
        kiln.load(path, weights_only=False)
