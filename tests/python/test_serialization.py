"""kiln.save / kiln.load: safetensors checkpoints, their structure metadata,
atomic writes, interchange with the safetensors package and rejection of
malformed files (including a fuzz test)."""

import collections
import io
import json
import math
import os
import re
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import kiln
from kiln import _tensor_bytes
from helpers import requires_gpu, rerun_without_cuda

ALL_DTYPES = [kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64, kiln.int8, kiln.uint8,
              kiln.int16, kiln.int32, kiln.int64, kiln.bool]


def _random(shape, dtype, seed=0):
    values = np.random.default_rng(seed).uniform(-100, 100, shape)
    return kiln.from_numpy(values).to(dtype)


def _same(a, b):
    return (a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
            and str(a.device) == str(b.device) and bool((a == b).all()))


def _round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    kiln.save(obj, buf)
    buf.seek(0)
    return kiln.load(buf, **load_kwargs)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_round_trip_every_dtype(dtype, tmp_path):
    tensors = {
        "matrix": _random((3, 5), dtype),
        "scalar": _random((), dtype, seed=1),
        "empty": kiln.zeros((0, 4), dtype=dtype),
        "transposed": _random((4, 3), dtype, seed=2).t(),
        "strided": _random((6, 4), dtype, seed=3)[::2, 1:],
    }
    path = tmp_path / "ck.safetensors"
    kiln.save(tensors, path)
    loaded = kiln.load(path)
    assert list(loaded) == list(tensors)
    for name, t in tensors.items():
        assert _same(loaded[name], t), name
        assert loaded[name].is_contiguous()


def test_bfloat16_bytes_are_the_high_half_of_float32():
    t = kiln.tensor([1.0, -2.5, 3.140625, 1e30], dtype=kiln.bfloat16)
    buf = io.BytesIO()
    kiln.save({"x": t}, buf)
    raw = buf.getvalue()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert header["x"]["dtype"] == "BF16" and header["x"]["data_offsets"] == [0, 8]
    bits = np.frombuffer(raw[8 + n:8 + n + 8], dtype="<u2").astype(np.uint32) << 16
    assert bits.view(np.float32).tolist() == t.float().tolist()


def test_nested_structures_and_plain_values():
    obj = {
        "model": collections.OrderedDict([("z.weight", _random((2, 2), kiln.float32)),
                                          ("a.bias", _random((2,), kiln.float32))]),
        7: [kiln.tensor(True), (kiln.tensor(3, dtype=kiln.int8), "text", None)],
        "numbers": {"int": 2**70, "float": 0.1, "inf": math.inf, "flag": False},
        "empty": {"list": [], "tuple": (), "dict": {}},
        "dtype": kiln.bfloat16,
        "device": kiln.device("cpu"),
    }
    out = _round_trip(obj)
    assert list(out) == ["model", 7, "numbers", "empty", "dtype", "device"]
    assert isinstance(out["model"], collections.OrderedDict)
    assert list(out["model"]) == ["z.weight", "a.bias"]
    assert _same(out["model"]["a.bias"], obj["model"]["a.bias"])
    assert isinstance(out[7], list) and isinstance(out[7][1], tuple)
    assert _same(out[7][0], obj[7][0]) and _same(out[7][1][0], obj[7][1][0])
    assert out[7][1][1:] == ("text", None)
    assert out["numbers"] == obj["numbers"]
    assert out["empty"] == {"list": [], "tuple": (), "dict": {}}
    assert out["dtype"] == kiln.bfloat16 and out["device"] == kiln.device("cpu")
    assert _same(_round_trip(kiln.tensor([1.5, 2.5])), kiln.tensor([1.5, 2.5]))
    assert _round_trip(["no tensors", 1]) == ["no tensors", 1]


def test_state_dicts_keep_their_names(tmp_path):
    model = {"layer1.weight": _random((4, 3), kiln.float32), "layer1.bias": kiln.zeros(4)}
    optimizer = {"state": {0: {"step": 3, "exp_avg": kiln.ones(4, 3)}},
                 "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1]}]}
    path = tmp_path / "ck.safetensors"
    kiln.save({"model": model, "optimizer": optimizer}, str(path))
    raw = safetensors.numpy.load_file(str(path))
    assert sorted(raw) == ["model.layer1.bias", "model.layer1.weight",
                           "optimizer.state.0.exp_avg"]
    out = kiln.load(path)
    assert out["optimizer"]["state"][0]["step"] == 3
    assert out["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert _same(out["model"]["layer1.weight"], model["layer1.weight"])

    kiln.save(model, path)
    assert sorted(safetensors.numpy.load_file(str(path))) == ["layer1.bias", "layer1.weight"]


def test_key_collisions_shared_storage_and_requires_grad():
    base = _random((4,), kiln.float64)
    obj = {"a.b": base, "a": {"b": base[1:]}, "__metadata__": kiln.ones(1)}
    out = _round_trip(obj)
    assert _same(out["a.b"], base) and _same(out["a"]["b"], base[1:])
    out["a.b"].add_(1)  # saved separately: no storage shared after loading
    assert _same(out["a"]["b"], base[1:])
    assert _same(out["__metadata__"], kiln.ones(1))

    w = kiln.randn(3, requires_grad=True)
    loaded = _round_trip({"w": w, "frozen": kiln.ones(2)})
    assert loaded["w"].requires_grad and loaded["w"].is_leaf
    assert not loaded["frozen"].requires_grad


def test_file_objects_and_positions():
    buf = io.BytesIO()
    buf.write(b"prefix")
    kiln.save({"x": kiln.arange(5)}, buf)
    buf.seek(6)
    assert kiln.load(buf)["x"].tolist() == [0, 1, 2, 3, 4]

    class Stream:  # readable but not seekable
        def __init__(self, data):
            self.data = io.BytesIO(data)

        def read(self, n=-1):
            return self.data.read(n)

    data = io.BytesIO()
    kiln.save([kiln.ones(2)], data)
    assert kiln.load(Stream(data.getvalue()), weights_only=False)[0].tolist() == [1, 1]


def test_unsupported_objects():
    with pytest.raises(TypeError, match=r"\[kiln.save\].*type lock at 'a.0'"):
        kiln.save({"a": [threading.Lock()]}, io.BytesIO())
    with pytest.raises(TypeError, match=r"\[kiln.save\] dict keys must be str or int.*\(1, 2\)"):
        kiln.save({(1, 2): 3}, io.BytesIO())
    cyclic = [1]
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match=r"\[kiln.save\].*cycle at '1'"):
        kiln.save(cyclic, io.BytesIO())


def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ck.safetensors"
    kiln.save({"old": kiln.ones(3)}, path)
    before = path.read_bytes()

    calls = []
    real = _tensor_bytes.to_bytes

    def fail_on_second(t):
        calls.append(t)
        if len(calls) == 2:
            raise OSError("disk on fire")
        return real(t)

    monkeypatch.setattr(_tensor_bytes, "to_bytes", fail_on_second)
    with pytest.raises(OSError, match="disk on fire"):
        kiln.save({"a": kiln.zeros(1000), "b": kiln.zeros(1000)}, path)
    assert len(calls) == 2
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ck.safetensors"]  # no temporary file left behind

    with pytest.raises(TypeError):
        kiln.save({"bad": object()}, tmp_path / "new.safetensors")
    assert os.listdir(tmp_path) == ["ck.safetensors"]

    # The replacement file gets ordinary permissions, not a private temp file's 0600.
    umask = os.umask(0o022)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def test_header_layout_and_safetensors_interop(tmp_path):
    path = tmp_path / "ck.safetensors"
    tensors = {name: _random((2, 3), dt) for name, dt in zip("abcdefghi", ALL_DTYPES)
               if dt != kiln.bfloat16}  # NumPy, and so safetensors.numpy, has no bfloat16
    kiln.save(tensors, path)
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0 and raw[8:8 + n].decode().rstrip(" ").endswith("}")
    loaded = safetensors.numpy.load_file(str(path))
    for name, t in tensors.items():
        np.testing.assert_array_equal(loaded[name], t.numpy())
        assert loaded[name].dtype == t.numpy().dtype
    with safetensors.safe_open(str(path), framework="numpy") as f:
        assert "kiln.structure" in f.metadata()

    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "m": np.array([True, False]),
              "i": np.array(7, dtype=np.int64), "h": np.ones((2, 0), dtype=np.float16)}
    theirs = tmp_path / "theirs.safetensors"
    safetensors.numpy.save_file(arrays, str(theirs), metadata={"format": "np"})
    out = kiln.load(theirs)
    assert sorted(out) == sorted(arrays)
    for name, a in arrays.items():
        np.testing.assert_array_equal(out[name].numpy(), a)
        assert out[name].numpy().dtype == a.dtype


def _file_on(device_name, tmp_path):
    path = tmp_path / "on_device.safetensors"
    structure = {"kind": "dict", "items": [["w", {"kind": "tensor", "key": "w",
                                                  "device": device_name,
                                                  "requires_grad": False}]]}
    safetensors.numpy.save_file({"w": np.arange(3, dtype=np.float32)}, str(path),
                                metadata={"kiln.structure": json.dumps(structure)})
    return path


def test_map_location(tmp_path):
    path = _file_on("cpu", tmp_path)
    for loc in ("cpu", kiln.device("cpu"), {"cuda:0": "cpu"}, None):
        assert kiln.load(path, map_location=loc)["w"].tolist() == [0, 1, 2]
    seen = []

    def double(t, location):
        seen.append(location)
        return t * 2

    assert kiln.load(path, map_location=double)["w"].tolist() == [0, 2, 4] and seen == ["cpu"]
    assert kiln.load(path, map_location=lambda t, loc: None)["w"].tolist() == [0, 1, 2]
    with pytest.raises(TypeError, match=r"\[kiln.load\] map_location"):
        kiln.load(path, map_location=3)


def test_cuda_checkpoint_without_cuda(tmp_path):
    if kiln.cuda.is_available():
        return rerun_without_cuda(__file__, "test_cuda_checkpoint_without_cuda")
    path = _file_on("cuda:0", tmp_path)
    with pytest.raises(RuntimeError, match=r"tensor 'w' was saved on cuda:0.*map_location='cpu'"):
        kiln.load(path)
    assert kiln.load(path, map_location="cpu")["w"].tolist() == [0, 1, 2]
    assert kiln.load(path, map_location={"cuda:0": "cpu"})["w"].is_cpu


@requires_gpu
def test_cuda_round_trip(tmp_path):
    t = kiln.randn(3, 4).cuda()
    path = tmp_path / "gpu.safetensors"
    kiln.save({"t": t, "c": kiln.ones(2)}, path)
    out = kiln.load(path)
    assert out["t"].is_cuda and out["t"].cpu().tolist() == t.cpu().tolist() and out["c"].is_cpu
    assert kiln.load(path, map_location="cpu")["t"].is_cpu
    assert kiln.load(path, map_location={"cpu": "cuda:0"})["c"].is_cuda


# ----------------------------------------------------------------------------- malformed files


def _file(header, data=b"", raw_header=None):
    body = raw_header if raw_header is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(body)) + body + data


GOOD = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize("data, match", [
    (b"", "0 bytes, too short"),
    (b"\x01\x00", "2 bytes, too short"),
    (struct.pack("<Q", 100) + b"{}", "header length 100 runs past"),
    (struct.pack("<Q", 100_000_001) + b"{}", "header length 100000001 exceeds the safetensors "
     "limit of 100000000 bytes"),
    (_file(None, raw_header=b"{not json"), "not valid JSON"),
    (_file(None, raw_header=b"\xff\xfe"), "not valid JSON"),
    (_file(None, raw_header=b'{"a": 1, "a": 2}'), "duplicate keys"),
    (_file([1, 2]), "must be a JSON object; got list"),
    (_file({"w": 5}), "tensor 'w': entry must be a JSON object"),
    (_file({"w": {"dtype": "F32"}}), "tensor 'w': entry lacks"),
    (_file({"w": dict(GOOD, dtype="C64")}, bytes(8)), "tensor 'w': unknown or unsupported dtype"),
    (_file({"w": dict(GOOD, dtype=["F32"])}, bytes(8)), "tensor 'w': unknown or unsupported"),
    (_file({"w": dict(GOOD, shape=[-2])}, bytes(8)), "tensor 'w': shape must be"),
    (_file({"w": dict(GOOD, shape=[2.0])}, bytes(8)), "tensor 'w': shape must be"),
    (_file({"w": dict(GOOD, shape="2")}, bytes(8)), "tensor 'w': shape must be"),
    (_file({"w": dict(GOOD, data_offsets=[0, 4, 8])}, bytes(8)), "tensor 'w': data_offsets must"),
    (_file({"w": dict(GOOD, data_offsets=[8, 0])}, bytes(8)), "tensor 'w': data_offsets must"),
    (_file({"w": dict(GOOD, data_offsets=[False, 8])}, bytes(8)), "tensor 'w': data_offsets must"),
    (_file({"w": dict(GOOD, data_offsets=[0, 12])}, bytes(12)), "span 12 bytes .* need 8"),
    # Sizes no tensor may have (Note [Checked shape arithmetic]): too many elements or bytes,
    # or no elements but strides past int64.
    (_file({"w": dict(GOOD, shape=[2**62, 2**62])}, bytes(8)),
     "tensor 'w': shape \\[4611686018427387904, 4611686018427387904\\] of dtype F32 is too large"),
    (_file({"w": dict(GOOD, shape=[2**62])}, bytes(8)), "tensor 'w': shape .* is too large"),
    (_file({"w": dict(GOOD, shape=[0, 2**62, 4], data_offsets=[0, 0])}),
     "tensor 'w': shape .* is too large"),
    (_file({"w": GOOD}, bytes(4)), "tensor 'w': data_offsets \\[0, 8\\] run past the data region"),
    (_file({"w": GOOD, "__metadata__": {"k": 1}}, bytes(8)), "__metadata__ must be"),
    (_file({"w": GOOD, "__metadata__": {"kiln.structure": "{"}}, bytes(8)),
     "kiln.structure metadata is not valid JSON"),
    (_file({"w": GOOD, "__metadata__": {"kiln.structure": '{"kind": "set"}'}}, bytes(8)),
     "kiln.structure metadata is malformed at '<root>'"),
    (_file({"w": GOOD, "__metadata__": {"kiln.structure": json.dumps(
        {"kind": "dtype", "name": ["float32"]})}}, bytes(8)),
     "kiln.structure metadata is malformed at '<root>'"),
    (_file({"w": GOOD, "__metadata__": {"kiln.structure": json.dumps(
        {"kind": "dict", "items": [[1.5, 2]]})}}, bytes(8)),
     "kiln.structure metadata is malformed at '<root>'"),
    (_file({"w": GOOD, "__metadata__": {"kiln.structure": json.dumps(
        {"kind": "tensor", "key": "v", "device": "cpu", "requires_grad": False})}}, bytes(8)),
     "tensor 'v': the kiln.structure metadata names a tensor that the file does not hold"),
    (_file({"w": GOOD, "__metadata__": {"kiln.structure": json.dumps(
        {"kind": "tensor", "key": "w", "device": "tpu", "requires_grad": False})}}, bytes(8)),
     "invalid device 'tpu'"),
    (_file({"w": dict(GOOD, dtype="I32"), "__metadata__": {"kiln.structure": json.dumps(
        {"kind": "tensor", "key": "w", "device": "cpu", "requires_grad": True})}}, bytes(8)),
     "only floating-point tensors"),
    (_file({"w": GOOD, "__metadata__": {"kiln.structure": "[" * 100000 + "]" * 100000}},
           bytes(8)), "not valid JSON|nested too deeply"),
])
def test_malformed_files_raise_value_error(data, match, tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=r"\[kiln.load\] " + re.escape(str(path))
                       + ".*(" + match + ")"):
        kiln.load(path)


def _valid_checkpoint():
    obj = {"w": _random((3, 4), kiln.float32).requires_grad_(True),
           "b": _random((4,), kiln.bfloat16), "n": [kiln.arange(3), 2, "s"],
           "flag": kiln.tensor([True, False])}
    buf = io.BytesIO()
    kiln.save(obj, buf)
    return buf.getvalue()


def fuzz(seed=1234):
    """Loads several hundred corrupted copies of a valid checkpoint; each must load or raise
    ValueError. Returns how many of each, and how many truncated copies were rejected."""
    rng = np.random.default_rng(seed)
    valid = _valid_checkpoint()
    (n,) = struct.unpack("<Q", valid[:8])
    truncated = [valid[:k] for k in range(0, len(valid), 3)]
    corrupted = []
    for _ in range(250):
        data = bytearray(valid)
        for pos in rng.integers(0, 8 + n, size=rng.integers(1, 4)):
            data[pos] = int(rng.integers(0, 256))
        corrupted.append(bytes(data))
    for length in list(rng.integers(0, 2 * n, size=40)) + [0, 7, n - 8, n + 1, 2**63, 2**64 - 1]:
        corrupted.append(struct.pack("<Q", int(length)) + valid[8:])
    for _ in range(30):  # inside the data region the bytes are values: these must load
        data = bytearray(valid)
        data[int(rng.integers(8 + n, len(valid)))] ^= 0xFF
        corrupted.append(bytes(data))
    outcome = collections.Counter()
    for data in truncated + corrupted:
        try:
            kiln.load(io.BytesIO(data))
            outcome["loaded"] += 1
        except ValueError:
            outcome["rejected"] += 1
            outcome["truncated_rejected"] += data in truncated
    outcome["truncated"] = len(truncated)
    return outcome


def test_fuzz_corrupted_files_raise_value_error_or_load():
    outcome = fuzz()
    assert outcome["truncated_rejected"] == outcome["truncated"] > 100
    assert outcome["loaded"] >= 30 and outcome["rejected"] > 300


def test_fuzz_does_not_crash_the_process():
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [here, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-c", "import test_serialization as t; print(dict(t.fuzz(seed=99)))"],
        env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "'rejected'" in result.stdout


def test_path_types(tmp_path):
    for path in (tmp_path / "p.safetensors", str(tmp_path / "s.safetensors")):
        kiln.save({"x": kiln.ones(1)}, path)
        assert kiln.load(path)["x"].tolist() == [1.0]
