// kiln._C._distributed stores: HashStore, PrefixStore and TCPStore (distributed/store.h).
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_distributed_store(py::module_& m) {
  // The submodule both distributed binding files add to.
  m.def_submodule("_distributed", "kiln.distributed's C++ core");
}

}  // namespace kiln::python
