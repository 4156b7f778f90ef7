// Bindings of ops/index* (filled in by the index op family).
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_index(py::module_& m, TensorClass& cls) {}

}  // namespace kiln::python
