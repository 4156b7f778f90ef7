// Matrix products.
#include <pybind11/stl.h>

#include "ops/einsum.h"
#include "ops/linalg.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_linalg(py::module_& m, TensorClass& cls) {
  using Fn2 = Tensor (*)(const Tensor&, const Tensor&);
  for (auto [name, fn] : std::initializer_list<std::pair<const char*, Fn2>>{
           {"matmul", &matmul}, {"mm", &mm}, {"bmm", &bmm}, {"dot", &dot}, {"mv", &mv},
           {"outer", &outer}, {"ger", &outer}, {"inner", &inner}}) {
    m.def(name, fn, py::arg("input"), py::arg("other"));
    cls.def(name, fn, py::arg("other"));
  }
  m.def("diag", [](const Tensor& x, int64_t k) { return diag(x, k); }, py::arg("input"),
        py::arg("diagonal") = 0);
  cls.def("diag", [](const Tensor& x, int64_t k) { return diag(x, k); }, py::arg("diagonal") = 0);
  m.def("trace", [](const Tensor& x) { return trace(x); }, py::arg("input"));
  cls.def("trace", [](const Tensor& x) { return trace(x); });
  auto addmm_fn = [](const Tensor& input, const Tensor& m1, const Tensor& m2, Scalar beta,
                     Scalar alpha) { return addmm(input, m1, m2, beta, alpha); };
  m.def("addmm", addmm_fn, py::arg("input"), py::arg("mat1"), py::arg("mat2"), py::kw_only(),
        py::arg("beta") = Scalar(1), py::arg("alpha") = Scalar(1));
  // einsum("ij,jk->ik", a, b) or einsum("ij,jk->ik", [a, b]).
  m.def("einsum", [](const std::string& equation, py::args operands) {
    std::vector<Tensor> ts;
    if (operands.size() == 1 && !py::isinstance<TensorImpl>(operands[0])) {
      for (py::handle h : operands[0]) ts.push_back(to_tensor_arg(h, "einsum", "operands"));
    } else {
      for (py::handle h : operands) ts.push_back(to_tensor_arg(h, "einsum", "operands"));
    }
    return einsum(equation, ts);
  }, py::arg("equation"));
  cls.def("addmm", addmm_fn, py::arg("mat1"), py::arg("mat2"), py::kw_only(),
          py::arg("beta") = Scalar(1), py::arg("alpha") = Scalar(1));
}

}  // namespace kiln::python
