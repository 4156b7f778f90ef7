// Sparse operands for kiln.mm, kiln.matmul, kiln.addmm and Tensor.mm/matmul: overloads
// tried only after the dense ones fail to bind, which hand the call to kiln.sparse
// (Note [Sparse COO tensors] in python/kiln/sparse/_coo.py).
#include <pybind11/pybind11.h>

#include "core/scalar.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// kiln.sparse's tensor class; registered when kiln.sparse is first imported (before
// that, no sparse tensor can exist, so nothing binds as one).
py::object& sparse_class() {
  static py::object* cls = new py::object();  // leaked: outlives interpreter teardown order
  return *cls;
}

// An argument that is a kiln sparse tensor.
struct SparseArg {
  py::object obj;
};

py::object sparse_op(const char* name) {
  return py::module_::import("kiln.sparse._ops").attr(name);
}

}  // namespace
}  // namespace kiln::python

namespace pybind11::detail {
template <>
struct type_caster<kiln::python::SparseArg> {
  PYBIND11_TYPE_CASTER(kiln::python::SparseArg, const_name("SparseTensor"));
  bool load(handle src, bool) {
    const object& cls = kiln::python::sparse_class();
    if (!cls || !isinstance(src, cls)) return false;
    value.obj = reinterpret_borrow<object>(src);
    return true;
  }
  static handle cast(const kiln::python::SparseArg& s, return_value_policy, handle) {
    return s.obj.inc_ref();
  }
};
}  // namespace pybind11::detail

namespace kiln::python {

void init_sparse(py::module_& m, TensorClass& cls) {
  m.def("_register_sparse_class", [](py::type c) { sparse_class() = std::move(c); });
  for (const char* name : {"mm", "matmul"}) {
    // Sparse on the left or on the right; each returns a dense tensor, as in PyTorch.
    m.def(
        name, [name](SparseArg a, py::object b) { return sparse_op(name)(a.obj, b); },
        py::arg("input"), py::arg("other"));
    m.def(
        name, [name](const Tensor& a, SparseArg b) { return sparse_op(name)(a, b.obj); },
        py::arg("input"), py::arg("other"));
    cls.def(
        name, [name](const Tensor& a, SparseArg b) { return sparse_op(name)(a, b.obj); },
        py::arg("other"));
  }
  auto addmm = [](const Tensor& input, SparseArg a, py::object b, py::object beta,
                  py::object alpha) {
    return sparse_op("addmm")(input, a.obj, b, py::arg("beta") = beta, py::arg("alpha") = alpha);
  };
  m.def("addmm", addmm, py::arg("input"), py::arg("mat1"), py::arg("mat2"), py::kw_only(),
        py::arg("beta") = 1, py::arg("alpha") = 1);
  cls.def("addmm", addmm, py::arg("mat1"), py::arg("mat2"), py::kw_only(), py::arg("beta") = 1,
          py::arg("alpha") = 1);
}

}  // namespace kiln::python
