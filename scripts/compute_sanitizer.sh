#!/usr/bin/env bash
# The CUDA tests under NVIDIA's compute-sanitizer, on the GPU machine (issue 18): memcheck over
# the CUDA GoogleTest suites and a Python subset that reaches every CUDA kernel family, then
# racecheck and synccheck over the kernels that share memory between threads (the flash
# attention, reduction, scan and softmax kernels the gtests and the subset drive). Prints each
# run's "ERROR SUMMARY" line; exits 1 if any run reports an error.
#
#   scripts/compute_sanitizer.sh [BUILD_DIR]       (after a CUDA build; LOG_DIR for the logs)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
LOG_DIR="${LOG_DIR:-${OUT:-/tmp}}"
mkdir -p "$LOG_DIR"
export PYTHONPATH="$PWD/python"
tool="$(command -v compute-sanitizer || true)"
for dir in "${CUDA_HOME:-}" /usr/local/cuda; do
  [ -z "$tool" ] && [ -n "$dir" ] && [ -x "$dir/bin/compute-sanitizer" ] && tool="$dir/bin/compute-sanitizer"
done
if [ -z "$tool" ]; then
  echo "compute_sanitizer: compute-sanitizer not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"
  exit 2
fi
GTESTS="${SANITIZE_GTESTS:-CudaRuntime.*:CudnnAttention*:CudaLinear*:Cases/FlashAttentionKernels.*:Dtypes/CudaLinear.*}"
PYTESTS="${SANITIZE_PYTESTS:-tests/python/test_cuda_elementwise.py tests/python/test_cuda_math.py
  tests/python/test_cuda_index.py tests/python/test_cuda_fused_nn.py tests/python/test_cuda_bn_pool.py
  tests/python/test_cuda_scan.py}"
status=0
run() {  # run <name> <sanitizer args...> -- <command...>
  local name="$1"; shift
  local log="$LOG_DIR/sanitizer-$name.log"
  # --error-exitcode makes any finding a failure; PyTorch-free, so nothing else loads CUDA.
  "$tool" --error-exitcode 99 --print-limit 20 "$@" >"$log" 2>&1
  local rc=$?
  echo "$name: exit $rc; $(grep -m1 'ERROR SUMMARY' "$log" || tail -n 1 "$log")"
  [ $rc -eq 0 ] || status=1
}
pytests=()
for f in $PYTESTS; do [ -f "$f" ] && pytests+=("$f"); done
run memcheck-gtest --tool memcheck "$BUILD/kiln_tests" --gtest_filter="$GTESTS"
run memcheck-python --tool memcheck python3 -m pytest -q -x -p no:cacheprovider "${pytests[@]}"
run racecheck-gtest --tool racecheck "$BUILD/kiln_tests" --gtest_filter="$GTESTS"
run synccheck-gtest --tool synccheck "$BUILD/kiln_tests" --gtest_filter="$GTESTS"
exit $status
