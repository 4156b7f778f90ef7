// Matrix products, cross and Kronecker products, and distances (dist, cdist).
#include <pybind11/stl.h>

#include <string>

#include "core/error.h"
#include "ops/distance.h"
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
  m.def("kron", &kron, py::arg("input"), py::arg("other"));
  cls.def("kron", &kron, py::arg("other"));
  // Without dim, torch.cross picks the first dim of size 3 and warns that the default
  // will become linalg.cross's dim=-1 (PyTorch warns once per process; Python's warning
  // filters already show it once per call site).
  auto cross_fn = [](const Tensor& a, const Tensor& b, std::optional<int64_t> dim) {
    if (!dim) {
      if (PyErr_WarnEx(PyExc_UserWarning,
                       "[cross] Using torch.cross without specifying the dim arg is deprecated. "
                       "Please either pass the dim explicitly or simply use linalg.cross. The "
                       "default value of dim will change to agree with that of linalg.cross in "
                       "a future release.",
                       1) != 0)
        throw py::error_already_set();
    }
    return cross(a, b, dim);
  };
  m.def("cross", cross_fn, py::arg("input"), py::arg("other"), py::arg("dim") = py::none());
  cls.def("cross", cross_fn, py::arg("other"), py::arg("dim") = py::none());
  // def_submodule reuses kiln._C.linalg when another binding file has made it.
  py::module_ linalg = m.def_submodule("linalg", "kiln.linalg: norms and matrix functions");
  linalg.def(
      "cross",
      [](const Tensor& a, const Tensor& b, int64_t dim) { return linalg_cross(a, b, dim); },
      py::arg("input"), py::arg("other"), py::kw_only(), py::arg("dim") = -1);

  // Distances.
  m.def("dist", [](const Tensor& a, const Tensor& b, double p) { return dist(a, b, p); },
        py::arg("input"), py::arg("other"), py::arg("p") = 2.0);
  cls.def("dist", [](const Tensor& a, const Tensor& b, double p) { return dist(a, b, p); },
          py::arg("other"), py::arg("p") = 2.0);
  m.def(
      "cdist",
      [](const Tensor& x1, const Tensor& x2, double p, py::object compute_mode) {
        // Only the three names, as torch.cdist (None included is a ValueError there).
        const std::string name = py::str(compute_mode);
        const bool is_str = py::isinstance<py::str>(compute_mode);
        CdistMode mode = CdistMode::MmIfNecessary;
        if (is_str && name == "use_mm_for_euclid_dist")
          mode = CdistMode::AlwaysMm;
        else if (is_str && name == "donot_use_mm_for_euclid_dist")
          mode = CdistMode::NeverMm;
        else
          KILN_CHECK(is_str && name == "use_mm_for_euclid_dist_if_necessary", Value, "[cdist] ",
                     name, " is not a valid value for compute_mode");
        return cdist(x1, x2, p, mode);
      },
      py::arg("x1"), py::arg("x2"), py::arg("p") = 2.0,
      py::arg("compute_mode") = "use_mm_for_euclid_dist_if_necessary");

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
