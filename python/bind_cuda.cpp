// kiln._C._cuda_*: device enumeration (the rest of kiln.cuda comes with the CUDA backend).
#include "cuda/device.h"
#include "ops/backend.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_cuda(py::module_& m) {
  // A visible GPU is usable only once the CUDA kernels are registered.
  m.def("_cuda_is_available", [] { return cuda::is_available() && has_cuda_backend(); });
  m.def("_cuda_device_count", &cuda::device_count);
  m.def("_cuda_is_built", &cuda::is_built);
}

}  // namespace kiln::python
