#!/usr/bin/env bash
# PyTorch for the tests that compare kiln with it (torch_compare.py, test_*_vs_torch.py, ...):
# a test dependency only, never one of kiln's, so `make test` runs this and `make train` does
# not. Where `import torch` already works (the GPU machine's torch) nothing is installed.
# Otherwise the CPU wheel from PyTorch's index where that is reachable (a fraction of the
# download), else PyPI's wheel, goes to third_party/torch (git-ignored) with `pip --target`,
# out of the user's environment; tests/python/conftest.py appends that folder to the import
# path (after site-packages, so it never shadows the environment's packages).
# KILN_TEST_TORCH=0 skips this, and the comparison tests then skip.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
[ "${KILN_TEST_TORCH:-1}" = 0 ] && exit 0
"$PYTHON" -c "import torch" >/dev/null 2>&1 && exit 0
target="$(cd "$(dirname "$0")/.." && pwd)/third_party/torch"
[ -f "$target/.complete" ] && exit 0
echo "install_test_torch: installing PyTorch into third_party/torch for the comparison tests" \
     "(KILN_TEST_TORCH=0 skips this)"
rm -rf "$target"
quick=(--retries 1 --timeout 60 --no-warn-script-location)
if "$PYTHON" -m pip install -q "${quick[@]}" --target "$target" \
       --index-url https://download.pytorch.org/whl/cpu torch >/dev/null 2>&1 ||
   "$PYTHON" -m pip install -q "${quick[@]}" --target "$target" torch; then
  touch "$target/.complete"
else
  rm -rf "$target"
  echo "install_test_torch: could not install PyTorch: the tests that compare with it will skip"
fi
