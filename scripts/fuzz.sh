#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets of tests/fuzz with clang (into $FUZZ_DIR, build-fuzz)
# against the main build's libkiln, then runs each for FUZZ_SECONDS (default 30) from its seed
# corpus in tests/fuzz/corpus/<target>. New inputs go to $FUZZ_DIR/corpus, not into the repo; a
# crash leaves its input in $FUZZ_DIR/crashes and fails the run. A crash, once fixed, becomes a
# GoogleTest case beside the parser's tests (the store counter overflow in
# tests/cpp/distributed/test_store.cpp is the model) and its input joins the seed corpus.
# FUZZ_TARGETS="json" runs a subset.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD="${FUZZ_DIR:-build-fuzz}"
SECONDS_EACH="${FUZZ_SECONDS:-30}"
JOBS="${JOBS:-2}"
TARGETS="${FUZZ_TARGETS:-json safetensors exported store_protocol}"

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S tests/fuzz -B "$BUILD" "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$BUILD" -j "$JOBS"

mkdir -p "$BUILD/crashes"
failed=()
for target in $TARGETS; do
  mkdir -p "$BUILD/corpus/$target"
  echo "fuzz: $target for ${SECONDS_EACH} s"
  if ! "$BUILD/fuzz_$target" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$target-" \
      "$BUILD/corpus/$target" "tests/fuzz/corpus/$target" 2>"$BUILD/$target.log"; then
    failed+=("$target")
    tail -n 60 "$BUILD/$target.log"
  fi
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)" "$BUILD/$target.log" || true
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $BUILD/crashes)"
  exit 1
fi
echo "fuzz: no crashes"
