"""Makes the test-only PyTorch of scripts/install_test_torch.sh (third_party/torch) importable,
after the environment's own packages, in this process and in the subprocesses tests start."""

import os
import sys
from pathlib import Path

_TORCH = Path(__file__).resolve().parents[2] / "third_party" / "torch"

if (_TORCH / ".complete").exists() and str(_TORCH) not in sys.path:
    sys.path.append(str(_TORCH))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH"), str(_TORCH)) if p)
