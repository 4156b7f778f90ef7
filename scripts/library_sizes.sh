#!/usr/bin/env bash
# Prints the sizes of libkiln.so, libkiln.a and the stripped statically linked inference program
# (run_exported_static) of one or more build trees, as the Markdown table in docs/benchmarks.md.
# Each build tree needs -DKILN_BUILD_STATIC=ON and a built `run_exported_static` target, e.g.
#   cmake -S . -B build -DKILN_BUILD_STATIC=ON && cmake --build build -j 2
#   cmake -S . -B build-cpu -DKILN_CUDA=OFF -DKILN_BUILD_STATIC=ON \
#     -DKILN_PYTHON_PACKAGE_DIR=$PWD/build-cpu/package && cmake --build build-cpu -j 2
#   scripts/library_sizes.sh build build-cpu
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "usage: $0 BUILD_DIR [BUILD_DIR...]" >&2
  exit 2
fi

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# The size of a file after `strip --strip-unneeded`, measured on a copy.
stripped_size() {
  local tmp
  tmp=$(mktemp)
  cp "$1" "$tmp"
  strip --strip-unneeded "$tmp"
  stat -c %s "$tmp"
  rm -f "$tmp"
}

cached() { sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt"; }

echo "| build | libkiln.so | libkiln.so stripped | libkiln.a | run_exported_static (stripped) | its shared libraries |"
echo "|---|---|---|---|---|---|"
for build in "$@"; do
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    echo "$0: $build is not a configured build tree" >&2
    exit 1
  fi
  package=$(cached "$build" KILN_PYTHON_PACKAGE_DIR)
  so="$package/libkiln.so"
  a="$build/libkiln.a"
  program="$build/run_exported_static"
  for f in "$so" "$a" "$program"; do
    if [[ ! -f "$f" ]]; then
      echo "$0: $f is missing: build $build with -DKILN_BUILD_STATIC=ON" >&2
      exit 1
    fi
  done
  if readelf -d "$so" | grep -q 'NEEDED.*libcudart'; then kind="CUDA"; else kind="CPU-only"; fi
  needed=$(readelf -d "$program" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | sed 's/\.so.*//' |
           paste -sd ' ' -)
  echo "| $kind ($(basename "$build")) | $(mib "$(stat -c %s "$so")") |" \
       "$(mib "$(stripped_size "$so")") | $(mib "$(stat -c %s "$a")") |" \
       "$(mib "$(stat -c %s "$program")") | $needed |"
done
