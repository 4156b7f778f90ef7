"""kiln and PyTorch in one process (Note [Loading NCCL]): either import order works, tensors
cross by DLPack both ways sharing memory, and `import kiln` loads no NCCL (so a
PyTorch wheel bundling a newer NCCL than the system's still binds its own). Each case runs in a
fresh interpreter: the import order is the point. The exchange skips without PyTorch."""

import importlib.util
import os
import subprocess
import sys

import pytest

requires_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                    reason="could not import 'torch'")

EXCHANGE = """
import numpy as np
k = kiln.arange(6, dtype=kiln.float32).reshape(2, 3)
t = torch.from_dlpack(k)
assert t.shape == (2, 3) and t.dtype == torch.float32, (t.shape, t.dtype)
t[1, 2] = 50.0
assert k[1, 2].item() == 50.0, "torch's view of a kiln tensor does not share its memory"
s = torch.linspace(0, 1, 5, dtype=torch.float64)[::2]
m = kiln.from_dlpack(s)
np.testing.assert_array_equal(m.numpy(), s.numpy())
s.mul_(2)
np.testing.assert_array_equal(m.numpy(), s.numpy())
print("exchanged")
"""

NO_EAGER_LIBRARIES = """
with open("/proc/self/maps") as f:
    maps = f.read()
loaded = [n for n in ("libnccl",) if n in maps]
assert not loaded, f"import kiln loaded {loaded}"
"""


def run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ), timeout=300)


@requires_torch
@pytest.mark.parametrize("first", ["kiln", "torch"])
def test_both_import_orders_exchange_tensors_by_dlpack(first):
    second = "torch" if first == "kiln" else "kiln"
    r = run(f"import {first}\nimport {second}\n" + EXCHANGE)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "exchanged" in r.stdout


def test_import_kiln_loads_no_nccl():
    r = run("import kiln\n" + NO_EAGER_LIBRARIES)
    assert r.returncode == 0, r.stderr[-3000:]
