"""Why kiln._C does or does not load: used by ``import kiln`` when the import fails and by
``python -m kiln.doctor``. Standard library only, so it works while kiln itself cannot."""

import glob
import importlib.machinery
import os
import sys

REBUILD = ("rebuild kiln with this interpreter: cmake -S . -B build "
           f"-DPython_EXECUTABLE={sys.executable} && ninja -C build")


def check_extension(package_dir, loaded_path=None, import_error=None, suffixes=None):
    """(ok, detail, hint) for the kiln._C extension in package_dir.

    loaded_path: the file that imported (None when the import failed with import_error).
    suffixes: the extension suffixes this interpreter loads (importlib's by default).
    """
    suffixes = importlib.machinery.EXTENSION_SUFFIXES if suffixes is None else suffixes
    py = f"Python {sys.version_info.major}.{sys.version_info.minor}"
    if loaded_path is not None:
        return True, f"{os.path.basename(loaded_path)} loads in {py} ({package_dir})", ""
    found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(package_dir, "_C.*"))
                   if p.endswith((".so", ".pyd")))
    if not found:
        return False, f"no kiln._C extension in {package_dir}", REBUILD
    if not any(name[len("_C"):] in suffixes for name in found):
        return False, (f"kiln._C was built for another Python ({', '.join(found)}), this is "
                       f"{py}"), REBUILD
    message = str(import_error)
    if "libkiln" in message and "cannot open" in message:
        return False, f"kiln._C cannot find libkiln.so: {message}", (
            f"libkiln.so must sit next to kiln._C in {package_dir}: rebuild (ninja -C build) or "
            "reinstall kiln")
    if "undefined symbol" in message:
        return False, f"kiln._C and libkiln.so do not match: {message}", (
            "they come from different builds (or LD_LIBRARY_PATH points to another libkiln): "
            "rebuild both (ninja -C build) or reinstall kiln")
    return False, f"kiln._C does not import: {message}", (
        "a library it needs is missing (ldd " + os.path.join(package_dir, found[0]) +
        " names it) or " + REBUILD)
