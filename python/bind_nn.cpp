// Bindings of ops/nn* (filled in by the nn op family).
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_nn(py::module_& m, TensorClass& cls) {}

}  // namespace kiln::python
