#!/usr/bin/env bash
# Copies the CPU math library kiln uses (oneDNN: Note [CPU math libraries] in
# ops/cpu/cpu_libraries.h) from this machine's Debian install into third_party/dnnl/{lib,include}
# (git-ignored), where cmake/cpu_libraries.cmake looks first. That is how a machine without the
# library (the offline GPU machine) gets it: carry third_party/dnnl with the working tree,
# configure a fresh build dir (or one whose cache says KILN_DNNL_LIBRARY-NOTFOUND, which CMake
# searches again), build, and libkiln finds the copy through its RPATH (check with ldd).
#
# Copied as plain files under their SONAMEs, not symlinks (a carry may not keep links):
# libdnnl.so.2 (~40 MB) and the OpenCL ICD loader libOpenCL.so.1 (~70 KB) that Debian's
# libdnnl.so.2 needs at load time even on the CPU; cpu_libraries.cmake links the loader too, so
# libkiln's RPATH finds it. Run from anywhere:  scripts/stage_cpu_libs.sh [--check]
# --check prints what libkiln (python/kiln/libkiln.so) resolves the two libraries to.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --check ]; then
  ldd python/kiln/libkiln.so | grep -E 'libdnnl|libOpenCL'
  exit 0
fi

multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
find_lib() {  # find_lib <soname>: the real file behind the installed soname
  local d
  for d in "/usr/lib/$multiarch" "/lib/$multiarch" /usr/lib64 /usr/lib; do
    if [ -e "$d/$1" ]; then readlink -f "$d/$1"; return 0; fi
  done
  echo "stage_cpu_libs: $1 not found; install libdnnl-dev (Debian) first" >&2
  return 1
}

dnnl="$(find_lib libdnnl.so.2)"
opencl="$(find_lib libOpenCL.so.1)"
if [ ! -f /usr/include/oneapi/dnnl/dnnl.h ]; then
  echo "stage_cpu_libs: /usr/include/oneapi/dnnl missing; install libdnnl-dev (Debian)" >&2
  exit 1
fi

dest=third_party/dnnl
rm -rf "$dest"
mkdir -p "$dest/lib" "$dest/include/oneapi"
cp "$dnnl" "$dest/lib/libdnnl.so.2"
cp "$opencl" "$dest/lib/libOpenCL.so.1"
cp -r /usr/include/oneapi/dnnl "$dest/include/oneapi/"
du -sh "$dest" | sed "s|^|stage_cpu_libs: staged $(basename "$dnnl") and $(basename "$opencl"): |"
