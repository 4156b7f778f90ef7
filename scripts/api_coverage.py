#!/usr/bin/env python3
"""How much of PyTorch's public Python API kiln has, per namespace.

Needs an installed PyTorch (the reference) and kiln on PYTHONPATH:

    PYTHONPATH=python python3 scripts/api_coverage.py            # the table
    PYTHONPATH=python python3 scripts/api_coverage.py --missing  # and the missing names
    PYTHONPATH=python python3 scripts/api_coverage.py --write docs/api_coverage.md

A namespace's public names are its `__all__` where it defines one, otherwise the
callables in `dir()` without a leading underscore that are neither modules nor
imported helpers (typing, torch.overrides, ...). A name counts as present
when the matching kiln object has the attribute (torch.nn.functional.relu ->
kiln.nn.functional.relu, torch.Tensor.add_ -> kiln.Tensor.add_). Names kiln leaves
out on purpose are listed below with a reason and are not counted either way.
"""

import argparse
import datetime
import importlib
import inspect
import re
import sys

# Namespaces measured, in the order of the issue (torch.Tensor is a class, not a module).
NAMESPACES = [
    "torch", "torch.Tensor", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.optim",
    "torch.optim.lr_scheduler", "torch.linalg", "torch.special", "torch.distributions",
    "torch.utils.data", "torch.cuda", "torch.amp", "torch.autograd", "torch.distributed",
    "torch.accelerator",
]

# Names kiln leaves out on purpose, by pattern over the bare name: (regex, reason), or
# (regex, reason, namespaces) for a pattern that only applies in those namespaces.
EXCLUDED_PATTERNS = [
    (r"^(q_|quantize|quantized|dequantize|fake_quantize|fbgemm_|qscheme|int_repr|quint|qint|"
     r"per_tensor_|per_channel_|choose_qparams)|_quantized_|quantized_",
     "quantized tensors: kiln has no quantized dtypes or kernels"),
    (r"(^|_)(mps|xpu|mtia|hpu|ipu|vulkan|mkldnn|miopen|xla|ort|ve|privateuse1)(_|$)",
     "another backend's API: kiln runs on CPU and CUDA only"),
    (r"^nested_|nested_tensor|^to_padded_tensor$", "nested (jagged) tensors are not planned"),
    (r"^(refine_names|rename_?|align_to|align_as|names|has_names)$",
     "named tensors: a PyTorch prototype that kiln does not plan"),
    (r"^(complex(32|64|128)?|cfloat|cdouble|chalf|bcomplex32|polar|view_as_complex(_copy)?|"
     r"view_as_real(_copy)?|ComplexType)$",
     "complex dtypes: not planned this wave (real tensors get conj/real/imag/angle/adjoint)",
     ("torch", "torch.Tensor")),
    (r"^(sym_[a-z_]+|Sym(Int|Float|Bool)|[A-Za-z]+Type|import_ir_module(_from_buffer)?|parse_ir|"
     r"parse_schema|parse_type_comment|merge_type_from_type_comment|unify_type_list|fork|wait|"
     r"Graph|Block|Value|Use|Code|CompilationUnit|FileCheck|FunctionSchema|Argument|"
     r"ArgumentSpec|CompleteArgumentSpec|GraphExecutorState|ExecutionPlan|Gradient|"
     r"Script(Class|ClassFunction|Dict|DictIterator|DictKeyIterator|List|ListIterator|Method|"
     r"Object|ObjectProperty|ModuleSerializer)|ConcreteModuleType(Builder)?|"
     r"LiteScriptModule|AliasDb|IODescriptor|TracingState|ErrorReport|JITException|"
     r"StaticModule|DeserializationStorageContext|SerializationStorageContext)$",
     "TorchScript/JIT internals and symbolic shapes: kiln has no TorchScript (kiln.compile runs "
     "eagerly) and no symbolic tracing", ("torch",)),
    (r"_quantized$|fake_quant", "quantized tensors: kiln has no quantized dtypes or kernels"),
]

# Single names kiln leaves out on purpose, per namespace: name -> reason.
EXCLUDED_NAMES = {
    "torch": {
        "compiled_with_cxx11_abi": "describes how PyTorch's C++ library was built",
        "ScriptModule": "TorchScript is not planned (kiln.compile runs eagerly)",
        "ScriptFunction": "TorchScript is not planned (kiln.compile runs eagerly)",
        "TypedStorage": "legacy storage classes; kiln exposes untyped_storage only",
    },
    "torch.nn.functional": {
        **{name: "a type or dispatch helper that torch.nn.functional imports, not its API"
           for name in ("Tensor", "ScalingType", "SwizzleType", "assert_int_or_pair",
                        "has_torch_function", "has_torch_function_unary",
                        "has_torch_function_variadic")},
        **{name: "scaled float8 GEMMs: kiln has no float8 dtypes this wave"
           for name in ("scaled_mm", "scaled_grouped_mm", "scaled_addmm", "scaled_addmm_")},
        "grouped_mm": "MoE grouped GEMM with float8/bf16 kernel layout rules: not this wave",
    },
    "torch.Tensor": {
        "storage_type": "legacy typed storages",
    },
}

_CACHE = {}

# Where torch's dispatch and typing helpers live; modules without __all__ import them.
_HELPER_MODULES = ("torch.overrides", "torch._jit_internal", "torch.types", "torch._C._VariableFunctions")


def exclusion_reason(namespace, name):
    """The reason a name is left out on purpose, or None when it is counted."""
    explicit = EXCLUDED_NAMES.get(namespace, {})
    if name in explicit:
        return explicit[name]
    for pattern, reason, *where in EXCLUDED_PATTERNS:
        if where and namespace not in where[0]:
            continue
        if re.search(pattern, name):
            if name.startswith("is_") and "quant" not in name:
                return None  # device predicates (Tensor.is_xpu, ...) are API kiln provides
            return reason
    return None


def resolve(root, path):
    """The object at a dotted path (modules imported as needed), or None."""
    if path in _CACHE:
        return _CACHE[path]
    obj = None
    try:
        obj = importlib.import_module(path)
    except Exception:
        parent, _, attr = path.rpartition(".")
        if parent:
            base = resolve(root, parent)
            obj = getattr(base, attr, None) if base is not None else None
    _CACHE[path] = obj
    return obj


def public_names(obj):
    """Public API names of a torch module or class (see the module docstring)."""
    if inspect.isclass(obj):
        return sorted(n for n in dir(obj) if not n.startswith("_"))
    names = getattr(obj, "__all__", None)
    if names is not None:
        return sorted(set(n for n in names if not n.startswith("_")))
    result = []
    for name in dir(obj):
        if name.startswith("_"):
            continue
        value = getattr(obj, name, None)
        if inspect.ismodule(value):
            continue
        if not callable(value):
            continue  # constants and type aliases (TYPE_CHECKING, BroadcastingList1, ...)
        origin = getattr(value, "__module__", None) or "torch"
        if not origin.startswith("torch") or origin in _HELPER_MODULES:
            continue  # imported helpers: typing.Optional, handle_torch_function, ...
        result.append(name)
    return sorted(result)


def measure():
    """[(namespace, total, excluded, present, missing_names)] plus the derived
    rows the issue's targets name (nn modules, top-level functions)."""
    import warnings

    import torch
    import kiln  # noqa: F401

    warnings.filterwarnings("ignore")  # deprecated torch aliases warn when touched
    rows = []
    for ns in NAMESPACES:
        torch_obj = resolve(torch, ns)
        kiln_obj = resolve(kiln, "kiln" + ns[len("torch"):])
        names = public_names(torch_obj)
        counted = [n for n in names if exclusion_reason(ns, n) is None]
        missing = [n for n in counted if kiln_obj is None or not hasattr(kiln_obj, n)]
        rows.append((ns, len(names), len(names) - len(counted), len(counted) - len(missing),
                     missing))
        if ns == "torch":
            funcs = [n for n in counted if callable(getattr(torch, n, None))
                     and not inspect.isclass(getattr(torch, n))]
            fmissing = [n for n in funcs if n in missing]
            rows.append(("torch (functions)", len(funcs), 0, len(funcs) - len(fmissing), fmissing))
        if ns == "torch.nn":
            mods = [n for n in counted if inspect.isclass(getattr(torch.nn, n, None))
                    and issubclass(getattr(torch.nn, n), torch.nn.Module)]
            mmissing = [n for n in mods if n in missing]
            rows.append(("torch.nn (modules)", len(mods), 0, len(mods) - len(mmissing), mmissing))
    return rows


def table(rows):
    lines = ["| namespace | public names | left out on purpose | counted | kiln has | coverage |",
             "|---|---:|---:|---:|---:|---:|"]
    for ns, total, excluded, present, missing in rows:
        counted = total - excluded
        pct = 100.0 * present / counted if counted else 100.0
        lines.append(f"| `{ns}` | {total} | {excluded} | {counted} | {present} | {pct:.1f}% |")
    return "\n".join(lines)


def exclusions_text():
    lines = ["Patterns (over the bare name):", ""]
    for pattern, reason, *where in EXCLUDED_PATTERNS:
        scope = f" (in {', '.join(f'`{ns}`' for ns in where[0])})" if where else ""
        lines.append(f"- `{pattern}`{scope}: {reason}")
    lines += ["", "Single names:", ""]
    for ns, names in EXCLUDED_NAMES.items():
        for name, reason in names.items():
            lines.append(f"- `{ns}.{name}`: {reason}")
    return "\n".join(lines)


def document(rows):
    import torch
    parts = [
        "# PyTorch API coverage",
        "",
        f"Generated by `scripts/api_coverage.py` against PyTorch {torch.__version__} on "
        f"{datetime.date.today().isoformat()}. Regenerate with "
        "`PYTHONPATH=python python3 scripts/api_coverage.py --write docs/api_coverage.md`.",
        "",
        "A name is counted as present when the matching kiln object has the attribute; "
        "it says nothing about whether every argument is supported. The issue 17 targets are "
        "97% for `torch.Tensor`, `torch.nn.functional`, `torch.nn` modules and `torch.optim`, "
        "and 90% for top-level `torch` functions.",
        "",
        table(rows),
        "",
        "## Left out on purpose",
        "",
        exclusions_text(),
        "",
        "## Missing, per namespace",
        "",
    ]
    for ns, _, _, _, missing in rows:
        if missing and not ns.endswith(")"):
            parts += [f"### `{ns}` ({len(missing)})", "", ", ".join(f"`{n}`" for n in missing), ""]
    return "\n".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", action="store_true", help="also print the missing names")
    parser.add_argument("--write", metavar="PATH", help="write the Markdown report to PATH")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("api_coverage.py needs PyTorch installed as the reference (pip install torch)")
    rows = measure()
    print(table(rows))
    if args.missing:
        for ns, _, _, _, missing in rows:
            if missing:
                print(f"\n{ns} ({len(missing)} missing):\n  " + " ".join(missing))
    if args.write:
        with open(args.write, "w") as f:
            f.write(document(rows))
        print(f"\nwrote {args.write}")


if __name__ == "__main__":
    main()
