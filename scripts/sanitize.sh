#!/usr/bin/env bash
# `make sanitize`: kiln built with AddressSanitizer and UndefinedBehaviorSanitizer, then the C++
# suite and a Python smoke subset run on it.
#
# Note [Sanitizer build]
# - A CPU-only Debug build (KILN_CUDA=OFF: CUDA kernels cannot run on CI and nvcc does not take
#   the flags) in its own folder, $SANITIZE_DIR (build-asan). Debug, but at -O1: at -O0 Eigen's
#   GEMMs make the suite several times slower, and -O1 keeps every check ASan and UBSan make.
#   Its libkiln and kiln._C go to $SANITIZE_DIR/python/kiln beside links to the package's
#   Python files, so the main build's libraries in python/kiln are left alone.
# - UBSan findings abort (-fno-sanitize-recover=all), so they fail the test that hit them.
# - The C++ suite runs with LeakSanitizer on. Python is not built with ASan, so the runtime is
#   preloaded (LD_PRELOAD, the same libasan the build linked) and leaks are not checked there:
#   CPython keeps its interned objects and modules alive at exit by design.
# - The Python subset (SANITIZE_TESTS) covers each C++ area: core (creation, views, overflow
#   checks, conversion, DLPack, safetensors), every op family, autograd, nn, optimizers and the
#   TCPStore / Gloo process group; make sanitize SANITIZE_TESTS="tests/python/..." picks others.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
BUILD="${SANITIZE_DIR:-build-asan}"
JOBS="${JOBS:-2}"
SANITIZERS="${SANITIZERS:-address,undefined}"
TESTS="${SANITIZE_TESTS:-tests/python/test_smoke.py tests/python/test_tensor.py
  tests/python/test_creation.py tests/python/test_view.py tests/python/test_overflow.py
  tests/python/test_bad_input.py tests/python/test_binary.py tests/python/test_unary.py
  tests/python/test_reduce.py tests/python/test_shape.py tests/python/test_index.py
  tests/python/test_sort.py tests/python/test_random.py tests/python/test_einsum.py
  tests/python/test_linalg_decomp.py tests/python/test_conv.py tests/python/test_pooling.py
  tests/python/test_batch_norm.py tests/python/test_fused_nn.py tests/python/test_attention.py
  tests/python/test_nn_functional.py tests/python/test_autograd.py tests/python/test_optim.py
  tests/python/test_serialization.py tests/python/test_dlpack.py tests/python/test_dist_store.py
  tests/python/test_dist_collectives.py}"

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
pkg="$PWD/$BUILD/python/kiln"
cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
  -DKILN_CUDA=OFF -DKILN_SANITIZE="$SANITIZERS" -DKILN_PYTHON_PACKAGE_DIR="$pkg" \
  -DPython_EXECUTABLE="$(command -v "$PYTHON")"
cmake --build "$BUILD" -j "$JOBS"

# The package: the instrumented libraries, and the Python files as links to the source tree.
for f in python/kiln/*; do
  case "$f" in *.so) continue ;; esac
  ln -sfn "$PWD/$f" "$pkg/"
done

export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "sanitize: C++ suite under ${SANITIZERS}"
ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"

echo "sanitize: Python subset under ${SANITIZERS}"
# libstdc++ is preloaded with it: python3 does not link libstdc++, so without it ASan finds no
# real __cxa_throw to forward to and aborts at kiln's first C++ exception ("CHECK failed").
runtime="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so.6)"
# shellcheck disable=SC2086  # TESTS is a list of paths
LD_PRELOAD="$runtime" ASAN_OPTIONS="detect_leaks=0" PYTHONPATH="$PWD/$BUILD/python" \
  "$PYTHON" -m pytest -q -x -p no:cacheprovider $TESTS
