#!/usr/bin/env bash
# One build-test-benchmark cycle on the GPU machine (see ../shared/GPU.md):
# configure for sm_90 with Ninja, build on all cores, run the C++ and Python
# suites, then the benchmarks; full logs go to $LOG_DIR, a summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG_DIR="${LOG_DIR:-${OUT:-/tmp}}"
mkdir -p "$LOG_DIR"
export PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
summary=()

step() {  # step <name> <command...>
  local name="$1"; shift
  local t0=$SECONDS
  if "$@" >"$LOG_DIR/$name.log" 2>&1; then
    summary+=("$name: ok ($((SECONDS - t0)) s) $(tail -n 1 "$LOG_DIR/$name.log")")
  else
    summary+=("$name: FAILED ($((SECONDS - t0)) s) $(tail -n 3 "$LOG_DIR/$name.log" | tr '\n' ' ')")
  fi
}

# KILN_NATIVE=ON: this build never leaves the machine, and the benchmark tables were measured
# with -march=native (Note [Portable by default]).
step configure cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_NATIVE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v python3)"
# cuDNN attention needs third_party/cudnn_frontend, carried here (this machine is offline).
summary+=("$(grep -o -m1 'kiln: cuDNN attention .*' "$LOG_DIR/configure.log" ||
  echo 'kiln: cuDNN attention not reported by configure')")
step build cmake --build build -j "$(nproc)"
step test-cpp ctest --test-dir build --output-on-failure -j "$(nproc)"
step test-python python3 -m pytest -q -rs -p no:cacheprovider tests/python
if [ "${KILN_SKIP_BENCH:-0}" != 1 ]; then  # KILN_SKIP_BENCH=1: build and test only
  step bench-cpu-overhead python3 benchmarks/cpu_overhead.py
  cat "$LOG_DIR/bench-cpu-overhead.log"
fi
printf '%s\n' "${summary[@]}"
