// Matrix products.
#include <pybind11/stl.h>

#include "ops/einsum.h"
#include "ops/elementwise.h"
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
  // beta * input + alpha * product: addmm, baddbmm, addbmm, addmv, addr, their Tensor methods
  // and in-place forms (x.addmm_(m1, m2) writes the result into x).
  using AddProduct = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, Scalar, Scalar);
  struct AddProductOp {
    const char* name;
    const char* inplace_name;
    AddProduct fn;
    const char* arg1;
    const char* arg2;
  };
  for (const AddProductOp& op : {AddProductOp{"addmm", "addmm_", &addmm, "mat1", "mat2"},
                                 AddProductOp{"baddbmm", "baddbmm_", &baddbmm, "batch1", "batch2"},
                                 AddProductOp{"addbmm", "addbmm_", &addbmm, "batch1", "batch2"},
                                 AddProductOp{"addmv", "addmv_", &addmv, "mat", "vec"},
                                 AddProductOp{"addr", "addr_", &addr, "vec1", "vec2"}}) {
    m.def(op.name, op.fn, py::arg("input"), py::arg(op.arg1), py::arg(op.arg2), py::kw_only(),
          py::arg("beta") = Scalar(1), py::arg("alpha") = Scalar(1));
    cls.def(op.name, op.fn, py::arg(op.arg1), py::arg(op.arg2), py::kw_only(),
            py::arg("beta") = Scalar(1), py::arg("alpha") = Scalar(1));
    cls.def(op.inplace_name, [op](const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta,
                                  Scalar alpha) {
      return assign_inplace(self, {a, b}, op.inplace_name,
                            [&](const Tensor& s) { return op.fn(s, a, b, beta, alpha); });
    }, py::arg(op.arg1), py::arg(op.arg2), py::kw_only(), py::arg("beta") = Scalar(1),
            py::arg("alpha") = Scalar(1));
  }
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
}

}  // namespace kiln::python
