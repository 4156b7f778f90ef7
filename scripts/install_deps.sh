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
