// Reductions: kiln.sum(x, dim=None, keepdim=False, dtype=None), x.sum(...), ...
#include <pybind11/stl.h>

#include "ops/reduce.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_reduce(py::module_& m, TensorClass& cls) {
  auto sum_fn = [](const Tensor& x, py::object dim, bool keepdim, py::object dtype) {
    return sum(x, parse_dims(dim, "sum"), keepdim, parse_dtype(dtype, "sum"));
  };
  m.def("sum", sum_fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false,
        py::kw_only(), py::arg("dtype") = py::none());
  cls.def("sum", sum_fn, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(),
          py::arg("dtype") = py::none());
  auto mean_fn = [](const Tensor& x, py::object dim, bool keepdim, py::object dtype) {
    return mean(x, parse_dims(dim, "mean"), keepdim, parse_dtype(dtype, "mean"));
  };
  m.def("mean", mean_fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false,
        py::kw_only(), py::arg("dtype") = py::none());
  cls.def("mean", mean_fn, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(),
          py::arg("dtype") = py::none());
}

}  // namespace kiln::python
