// kiln._C._cuda_*: device enumeration (the rest of kiln.cuda comes with the CUDA backend).
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "cuda/device.h"
#include "ops/backend.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_cuda(py::module_& m) {
  // A visible GPU is usable once every kernel family has a CUDA kernel.
  m.def("_cuda_is_available", [] {
    return cuda::is_available() && has_cuda_backend() &&
           missing_kernel_families(cuda_backend()).empty();
  });
  // What the CUDA backend still lacks (all families when it is not built).
  m.def("_cuda_missing_kernels", [] {
    std::vector<std::string> out;
    for (const char* f : missing_kernel_families(has_cuda_backend() ? cuda_backend() : Backend()))
      out.emplace_back(f);
    return out;
  });
  m.def("_cuda_device_count", &cuda::device_count);
  m.def("_cuda_is_built", &cuda::is_built);
}

}  // namespace kiln::python
