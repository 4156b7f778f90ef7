// The kiln._C extension module.
#include <pybind11/pybind11.h>

#include "core/error.h"
#include "python/bindings.h"

namespace py = pybind11;
using namespace kiln::python;

namespace kiln::python {

// kiln._C._export (bind_export.cpp). Declared here rather than in bindings.h so that adding it
// does not recompile every binding file.
void init_export(pybind11::module_& m);
// Sparse operands for mm/matmul/addmm (bind_sparse.cpp), after init_linalg's dense overloads.
void init_sparse(pybind11::module_& m, TensorClass& cls);
void init_profiler(pybind11::module_& m);

void init_errors(py::module_& m) {
  // kiln.OutOfMemoryError is a RuntimeError, as torch.OutOfMemoryError is.
  static py::exception<kiln::Error> oom(m, "OutOfMemoryError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kiln::Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (e.kind()) {
        case ErrorKind::Value: type = PyExc_ValueError; break;
        case ErrorKind::Type: type = PyExc_TypeError; break;
        case ErrorKind::Index: type = PyExc_IndexError; break;
        case ErrorKind::NotImplemented: type = PyExc_NotImplementedError; break;
        case ErrorKind::OutOfMemory: type = oom.ptr(); break;
        case ErrorKind::Runtime: break;
      }
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace kiln::python

PYBIND11_MODULE(_C, m) {
  m.doc() = "kiln's C++ core";
  init_errors(m);
  init_dtype_device(m);
  // Tensor is kiln::TensorImpl itself (see Note [Python Tensor identity]).
  TensorClass cls(m, "Tensor", py::dynamic_attr());
  tensor_type_info_slot() = py::detail::get_type_info(typeid(kiln::TensorImpl), true);
  init_tensor(m, cls);
  init_creation(m, cls);
  init_elementwise(m, cls);
  init_special(m, cls);
  init_view(m, cls);
  init_shape(m, cls);
  init_reduce(m, cls);
  init_linalg(m, cls);
  init_sparse(m, cls);
  init_linalg_decomp(m, cls);
  init_index(m, cls);
  init_nn(m, cls);
  init_random(m, cls);
  init_autograd(m, cls);
  init_cuda(m);
  init_nvrtc(m);
  init_flags(m);
  init_optim(m);
  init_amp(m);
  init_conv(m);
  init_distributed_store(m);
  init_distributed(m);
  init_build_info(m);
  init_dlpack(m, cls);
  init_export(m);
  init_inplace(m);
  init_profiler(m);
  init_numpy_aliases(m, cls);
}
