#!/usr/bin/env bash
# Installs what kiln's build and tests need, and only what is missing: on a
# machine that has everything (the GPU machine, which is offline) it changes
# nothing and touches no network.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

missing_debs=()
need_deb() {  # need_deb <package> <test command...>
  local pkg="$1"; shift
  if ! "$@" >/dev/null 2>&1; then missing_debs+=("$pkg"); fi
}
need_deb cmake command -v cmake
need_deb ninja-build command -v ninja
need_deb g++ command -v g++
need_deb libeigen3-dev test -f /usr/include/eigen3/Eigen/Core
need_deb libgtest-dev test -f /usr/include/gtest/gtest.h
need_deb ccache command -v ccache
# Gloo: CPU collectives for kiln.distributed (optional in the build; the distributed tests
# that need it skip without it, so the offline GPU machine, which lacks it, still builds).
need_deb libgloo-dev test -f /usr/include/gloo/config.h
# The CPU math libraries (Note [CPU math libraries]): OpenBLAS's OpenMP build for GEMM, oneDNN
# for convolution and pooling. Optional in the build: without them the CPU kernels use Eigen.
need_deb libopenblas-openmp-dev test -f /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h
need_deb libdnnl-dev test -f /usr/include/oneapi/dnnl/dnnl.hpp

# clang and its libFuzzer runtime, only for `make fuzz` (KILN_FUZZ_DEPS=1), not for make test.
if [ "${KILN_FUZZ_DEPS:-0}" = 1 ]; then
  need_deb clang command -v clang++
  need_deb libclang-rt-dev sh -c 'printf "%s\n" "#include <cstddef>" "#include <cstdint>" \
    "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }" |
    clang++ -x c++ -fsanitize=fuzzer - -o /dev/null'
fi

if [ "${#missing_debs[@]}" -gt 0 ]; then
  echo "install_deps: installing Debian packages: ${missing_debs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing_debs[@]}"
fi

missing_py=()
need_py() {  # need_py <pip name> <module>
  if ! "$PYTHON" -c "import $2" >/dev/null 2>&1; then missing_py+=("$1"); fi
}
need_py numpy numpy
need_py pybind11 pybind11
need_py pytest pytest
need_py scikit-learn sklearn
need_py safetensors safetensors

if [ "${#missing_py[@]}" -gt 0 ]; then
  echo "install_deps: installing Python packages: ${missing_py[*]}"
  "$PYTHON" -m pip install -q "${missing_py[@]}"
fi

# The cuDNN frontend: NVIDIA's header-only C++ API for cuDNN graphs (Apache-2.0 AND MIT), used
# by cuda/cudnn_attention.cpp only (Note [cuDNN attention]). PyPI's nvidia-cudnn-frontend wheel
# carries the headers: its include/ (and license files) go to third_party/cudnn_frontend, which
# git ignores. Every wheel of a release holds the same headers, so one platform's is fetched
# wherever this runs. Offline (the GPU machine) nothing is fetched: the folder is carried there,
# and a build without it compiles a stub that reports cuDNN attention unavailable.
CUDNN_FRONTEND_VERSION=1.32.0
fe_dir="$(cd "$(dirname "$0")/.." && pwd)/third_party/cudnn_frontend"
fe_header="$fe_dir/include/cudnn_frontend_version.h"
fe_have=""
if [ -f "$fe_header" ]; then
  fe_have="$(awk '/define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION/ {printf "%s%s", sep, $3; sep="."}' "$fe_header")"
fi
if [ "$fe_have" != "$CUDNN_FRONTEND_VERSION" ]; then
  fe_tmp="$(mktemp -d)"
  if "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
      --python-version 3.12 --implementation cp --retries 0 --timeout 20 \
      -d "$fe_tmp" "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" >/dev/null 2>&1; then
    echo "install_deps: extracting the cuDNN frontend $CUDNN_FRONTEND_VERSION headers into $fe_dir"
    "$PYTHON" - "$fe_tmp"/nvidia_cudnn_frontend-*.whl "$fe_tmp/out" <<'PY'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.endswith("/"):
            continue
        if name.startswith("include/"):
            target = os.path.join(dest, name)
        elif ".dist-info/licenses/" in name:
            target = os.path.join(dest, "licenses", os.path.basename(name))
        else:
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(name) as src, open(target, "wb") as out:
            out.write(src.read())
PY
    rm -rf "$fe_dir"
    mkdir -p "$(dirname "$fe_dir")"
    mv "$fe_tmp/out" "$fe_dir"
  elif [ -n "$fe_have" ]; then
    echo "install_deps: cannot reach PyPI for nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION; keeping the $fe_have headers in $fe_dir"
  else
    echo "install_deps: cannot reach PyPI for nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION:" \
      "cuDNN attention will be built as a stub (carry third_party/cudnn_frontend from a connected machine)"
  fi
  rm -rf "$fe_tmp"
fi
