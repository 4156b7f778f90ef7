// Bindings of ops/random* (filled in by the random op family).
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_random(py::module_& m, TensorClass& cls) {}

}  // namespace kiln::python
