"""pip install . / pip install -e .: builds libkiln and kiln._C through CMake.

CMake writes both libraries into python/kiln/ (see CMakeLists.txt), so the
package directory is complete after the build, for editable installs too.
"""

import os
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def run(self):
        # Separate from `make`'s build/ (which also builds the C++ tests).
        build_dir = os.path.join(ROOT, "build", "pip")
        cfg = [
            "cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}", "-DKILN_BUILD_TESTS=OFF",
        ]
        if os.environ.get("KILN_CUDA"):
            cfg.append(f"-DKILN_CUDA={os.environ['KILN_CUDA']}")
        subprocess.check_call(cfg)
        subprocess.check_call(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2)])
        # Copy the built libraries next to the installed package (non-editable installs).
        for ext in self.extensions:
            target_dir = os.path.dirname(self.get_ext_fullpath(ext.name))
            os.makedirs(target_dir, exist_ok=True)
            src_dir = os.path.join(ROOT, "python", "kiln")
            if os.path.abspath(target_dir) == os.path.abspath(src_dir):
                continue
            for f in os.listdir(src_dir):
                if f.endswith(".so"):
                    self.copy_file(os.path.join(src_dir, f), os.path.join(target_dir, f))


setup(
    packages=find_packages("python"),
    package_dir={"": "python"},
    package_data={"kiln": ["*.so", "*.pyi", "py.typed"]},
    ext_modules=[CMakeExtension("kiln._C")],
    cmdclass={"build_ext": CMakeBuild},
)
