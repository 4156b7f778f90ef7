#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer above its own.

The build runs it before compiling libkiln (target kiln_layers) and ctest runs it as
`check_layers`, so an upward include fails both. It also checks the public header set
(cmake/public_headers.txt): the set includes nothing outside itself, so the installed tree is
complete, and the C++ examples include nothing else.

Usage: scripts/check_layers.py [--root DIR] [--print-dag]
"""

# Note [Layers]
# libkiln is built as one object library per layer (CMakeLists.txt), and a file may include
# headers of its own layer and of the layers below it, never above:
#
#   python                      the kiln._C bindings
#   runtime    distributed      files (safetensors, exported programs), build facts | collectives
#        \      /
#          ops                  op front ends and autograd: one layer, because the engine sums
#        /     \                gradients with ops and every front end records autograd nodes
#     cpu      cuda             kernels: the CPU loops | the CUDA runtime, allocator, kernels
#        \     /
#       contract                the kernel contract: the per-device tables and what kernels
#          |                    share with front ends (a fixed list of ops/ headers below)
#        core                   Device, DType, Storage, Tensor, shapes, errors, JSON
#
# The contract lives in ops/ beside the front ends it serves, so it is named file by file.
# cpu and cuda never see each other or a front end: a backend that needs a tensor allocates it
# with core's make_tensor, and an accelerator's operands are laid out by its caller in ops/
# (cuDNN convolution computes on what ops/conv.cpp made dense). The check has no exceptions.
# Tests and benchmarks are outside the layers; the C++ examples may include only the public
# headers.

import argparse
import os
import re
import sys

# (layer, path prefixes or files, layers it builds on directly).
LAYERS = [
    ("core", ["core/"], []),
    ("contract", [
        "ops/activation_grad.h", "ops/attention.h", "ops/backend.h", "ops/conv_backend.h",
        "ops/math/", "ops/dispatch.h", "ops/generator.h", "ops/generator.cpp",
        "ops/kernel_families.h", "ops/linear_backend.h", "ops/op_table.h", "ops/optim.h",
        "ops/optim_math.h", "ops/philox.h", "ops/philox_capture.h", "ops/pool2d.h",
        "ops/scan_table.h", "ops/special_math.h",
    ], ["core"]),
    ("cpu", ["ops/cpu/"], ["contract"]),
    ("cuda", ["cuda/"], ["contract"]),
    ("ops", ["ops/", "autograd/"], ["cpu", "cuda"]),
    ("runtime", ["runtime/"], ["ops"]),
    ("distributed", ["distributed/"], ["ops"]),
    ("python", ["python/"], ["runtime", "distributed"]),
]

SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
PUBLIC_HEADERS = "cmake/public_headers.txt"
INCLUDE = re.compile(r'\s*#\s*include\s*"([^"]+)"')


def layer_of(path):
    """The layer of a repository path, or None outside libkiln: exact files win over prefixes,
    longer prefixes over shorter."""
    best, best_len = None, -1
    for name, members, _ in LAYERS:
        for m in members:
            exact = not m.endswith("/")
            if (exact and path == m) or (not exact and path.startswith(m)):
                score = len(m) + (10_000 if exact else 0)
                if score > best_len:
                    best, best_len = name, score
    return best


def allowed_layers():
    """Each layer with every layer it may include: itself and all below it."""
    direct = {name: below for name, _, below in LAYERS}
    closure = {}
    for name in direct:
        seen, stack = {name}, list(direct[name])
        while stack:
            b = stack.pop()
            if b not in seen:
                seen.add(b)
                stack.extend(direct[b])
        closure[name] = seen
    return closure


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield lineno, m.group(1)


def source_files(root, folders):
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            # The Python package folder holds built libraries, not C++ sources.
            dirnames[:] = sorted(d for d in dirnames if d != "kiln")
            for fn in sorted(filenames):
                if fn.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")


def read_public_headers(root):
    path = os.path.join(root, PUBLIC_HEADERS)
    with open(path, encoding="utf-8") as f:
        return [l.split("#")[0].strip() for l in f if l.split("#")[0].strip()]


def check(root):
    errors = []
    closure = allowed_layers()
    layer_folders = sorted({m.split("/")[0] for _, members, _ in LAYERS for m in members})
    for path in source_files(root, layer_folders):
        mine = layer_of(path)
        for lineno, inc in includes(os.path.join(root, path)):
            theirs = layer_of(inc)
            if theirs is None or theirs in closure[mine]:
                continue
            errors.append(f"{path}:{lineno}: layer '{mine}' includes \"{inc}\" of layer "
                          f"'{theirs}' above it; '{mine}' may include "
                          f"{', '.join(sorted(closure[mine]))} (Note [Layers], "
                          f"scripts/check_layers.py)")

    public = read_public_headers(root)
    public_set = set(public)
    for h in public:
        if not os.path.exists(os.path.join(root, h)):
            errors.append(f"{PUBLIC_HEADERS}: {h} does not exist")
            continue
        for lineno, inc in includes(os.path.join(root, h)):
            if inc not in public_set:
                errors.append(f"{h}:{lineno}: public header includes \"{inc}\", which "
                              f"{PUBLIC_HEADERS} does not list (the installed tree would miss it)")
    for path in source_files(root, ["examples/cpp"]):
        for lineno, inc in includes(os.path.join(root, path)):
            if inc not in public_set:
                errors.append(f"{path}:{lineno}: the C++ examples may include only public "
                              f"headers ({PUBLIC_HEADERS}); \"{inc}\" is not one")
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(here), help="repository root")
    parser.add_argument("--print-dag", action="store_true",
                        help="print each layer with the layers it may include, and exit")
    args = parser.parse_args()
    if args.print_dag:
        closure = allowed_layers()
        for name, _, _ in LAYERS:
            print(f"{name}: {' '.join(n for n, _, _ in LAYERS if n in closure[name])}")
        return 0
    errors = check(args.root)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} layering error(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
