#!/usr/bin/env bash
# onnx and onnxruntime for the tests of kiln.onnx (tests/python/test_onnx_export.py): test
# dependencies only, like PyTorch (scripts/install_test_torch.sh, whose layout this follows).
# Where both already import nothing is installed; otherwise PyPI's wheels go to
# third_party/onnx (git-ignored) with `pip --target`, out of the user's environment, and
# tests/python/conftest.py appends that folder to the import path after site-packages.
# KILN_TEST_ONNX=0 skips this, and the ONNX tests then skip.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
[ "${KILN_TEST_ONNX:-1}" = 0 ] && exit 0
"$PYTHON" -c "import onnx, onnxruntime" >/dev/null 2>&1 && exit 0
target="$(cd "$(dirname "$0")/.." && pwd)/third_party/onnx"
[ -f "$target/.complete" ] && exit 0
echo "install_test_onnx: installing onnx and onnxruntime into third_party/onnx for the ONNX" \
     "tests (KILN_TEST_ONNX=0 skips this)"
rm -rf "$target"
if "$PYTHON" -m pip install -q --retries 1 --timeout 60 --no-warn-script-location \
       --target "$target" onnx onnxruntime; then
  touch "$target/.complete"
else
  rm -rf "$target"
  echo "install_test_onnx: could not install onnx/onnxruntime: the ONNX tests will skip"
fi
