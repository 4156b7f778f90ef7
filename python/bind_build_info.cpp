// kiln._C._build_info and friends: what kiln.__config__, kiln.version, kiln.cuda.nccl and the
// doctor ask about the build (Note [Build facts] in runtime/build_info.cpp).
#include <pybind11/pybind11.h>

#include "runtime/build_info.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_build_info(py::module_& m) {
  m.def(
      "_build_info",
      [] {
        py::dict d;
        for (const auto& [key, value] : build_info()) d[py::str(key)] = value;
        return d;
      },
      "libkiln's build facts as a dict of strings (runtime/build_info.h lists the keys).");
  // The same CMake facts compiled into this extension: they differ from _build_info()'s when
  // kiln._C was loaded next to a libkiln from another build.
  py::dict seen;
#ifdef KILN_BUILD_VERSION
  seen["version"] = KILN_BUILD_VERSION;
  seen["git_version"] = KILN_BUILD_GIT_VERSION;
  seen["build_type"] = KILN_BUILD_TYPE;
  seen["cxx_compiler"] = KILN_BUILD_CXX_COMPILER;
  seen["cxx_flags"] = KILN_BUILD_CXX_FLAGS;
  seen["cuda_architectures"] = KILN_BUILD_CUDA_ARCHITECTURES;
#endif
#ifdef KILN_WITH_CUDA
  seen["cuda"] = "ON";
#else
  seen["cuda"] = "OFF";
#endif
#ifdef KILN_WITH_NCCL
  seen["nccl"] = "ON";
#else
  seen["nccl"] = "OFF";
#endif
#ifdef KILN_WITH_GLOO
  seen["gloo"] = "ON";
#else
  seen["gloo"] = "OFF";
#endif
  m.attr("_extension_build_info") = seen;
  m.def("_cuda_runtime_version", &cuda_runtime_version,
        "The CUDA runtime's version (13000 for 13.0), 0 without CUDA.");
  m.def("_cuda_driver_version", &cuda_driver_version,
        "The newest CUDA version the installed driver supports (13000 for 13.0), 0 without one.");
  m.def("_nccl_version", &nccl_version, "NCCL's version code (22809 for 2.28.9), 0 without NCCL.");
}

}  // namespace kiln::python
