"""Makes the test-only packages of scripts/install_test_torch.sh (third_party/torch) and
scripts/install_test_onnx.sh (third_party/onnx) importable, after the environment's own
packages, in this process and in the subprocesses tests start."""

import os
import sys
from pathlib import Path

_THIRD_PARTY = Path(__file__).resolve().parents[2] / "third_party"

for _dir in (_THIRD_PARTY / "torch", _THIRD_PARTY / "onnx"):
    if (_dir / ".complete").exists() and str(_dir) not in sys.path:
        sys.path.append(str(_dir))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.environ.get("PYTHONPATH"), str(_dir)) if p)
