// kiln._C._distributed process groups: ProcessGroup, Work, ReduceOp (distributed/process_group.h).
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_distributed(py::module_& m) {}

}  // namespace kiln::python
