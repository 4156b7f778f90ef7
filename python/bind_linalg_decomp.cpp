// kiln.linalg's decompositions, solvers and matrix functions, their top-level aliases
// (kiln.det, kiln.inverse, kiln.svd, ...) and Tensor methods, and kiln.linalg.LinAlgError.
#include <pybind11/stl.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "ops/creation.h"
#include "ops/linalg.h"
#include "ops/linalg_decomp.h"
#include "ops/linalg_matrix.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// A torch.return_types-like namedtuple class.
py::object result_type(const char* name, py::tuple fields) {
  py::object t = py::module_::import("collections").attr("namedtuple")(name, fields);
  t.attr("__module__") = "kiln.return_types";
  return t;
}

// A numeric matrix/vector norm order: a number or +-inf.
double number_order(py::handle ord, const char* op) {
  KILN_CHECK(py::isinstance<py::int_>(ord) || py::isinstance<py::float_>(ord), Type, "[", op,
             "] ord must be a number or a string, got ",
             std::string(py::str(py::type::handle_of(ord).attr("__name__"))));
  return ord.cast<double>();
}

Tensor matrix_norm_any(const Tensor& a, py::handle ord, std::vector<int64_t> dims, bool keepdim,
                       std::optional<DType> dtype, const char* op) {
  if (py::isinstance<py::str>(ord))
    return linalg_matrix_norm(a, ord.cast<std::string>(), dims, keepdim, dtype, op);
  return linalg_matrix_norm(a, number_order(ord, op), dims, keepdim, dtype, op);
}

// torch.linalg.norm: a vector norm over one dim (or everything when ord is None), a matrix
// norm over two dims (or a 2-D input when only ord is given).
Tensor linalg_norm(const Tensor& a, py::object ord, py::object dim, bool keepdim,
                   py::object dtype_obj) {
  const char* op = "linalg.norm";
  const std::optional<DType> dtype = parse_dtype(dtype_obj, op);
  std::optional<std::vector<int64_t>> dims = parse_dims(dim, op);
  if (!dims) {
    if (ord.is_none()) return vector_norm(a, 2, std::nullopt, keepdim, dtype, op);
    KILN_CHECK(a.dim() == 1 || a.dim() == 2, Runtime, "[", op,
               "] If dim is not specified but ord is, the input must be 1D or 2D. Got ", a.dim(),
               "D (shape ", a.sizes(), ")");
    dims = a.dim() == 1 ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 1};
  }
  KILN_CHECK(dims->size() == 1 || dims->size() == 2, Runtime, "[", op,
             "] If dim is specified, it must be of length 1 or 2. Got ", *dims);
  if (dims->size() == 2)
    return ord.is_none() ? linalg_matrix_norm(a, std::string("fro"), *dims, keepdim, dtype, op)
                         : matrix_norm_any(a, ord, *dims, keepdim, dtype, op);
  KILN_CHECK(!py::isinstance<py::str>(ord), Runtime, "[", op, "] order '",
             std::string(py::str(ord)), "' is a matrix norm; dim ", *dims,
             " asks for a vector norm");
  return vector_norm(a, ord.is_none() ? 2.0 : number_order(ord, op), dims, keepdim, dtype, op);
}

std::optional<double> opt_double(py::handle h) {
  if (h.is_none()) return std::nullopt;
  return h.cast<double>();
}

}  // namespace

void init_linalg_decomp(py::module_& m, TensorClass& cls) {
  py::module_ linalg = m.def_submodule("linalg", "kiln.linalg: norms and matrix functions");
  // torch.linalg.LinAlgError (torch._C._LinAlgError): a RuntimeError subclass. Registered
  // after the generic kiln::Error translator, so it is tried first.
  static py::exception<LinAlgError> linalg_error(linalg, "LinAlgError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const LinAlgError& e) {
      PyErr_SetString(linalg_error.ptr(), e.what());
    }
  });
  m.attr("_LinAlgError") = linalg_error;

  static py::object slogdet_type = result_type("slogdet", py::make_tuple("sign", "logabsdet"));
  static py::object qr_type = result_type("qr", py::make_tuple("Q", "R"));
  static py::object svd_type = result_type("svd", py::make_tuple("U", "S", "Vh"));
  static py::object torch_svd_type = result_type("svd", py::make_tuple("U", "S", "V"));
  static py::object eigh_type = result_type("eigh", py::make_tuple("eigenvalues", "eigenvectors"));
  static py::object lstsq_type =
      result_type("lstsq", py::make_tuple("solution", "residuals", "rank", "singular_values"));

  linalg.def("norm", &linalg_norm, py::arg("A"), py::arg("ord") = py::none(),
             py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(),
             py::arg("dtype") = py::none());
  linalg.def(
      "matrix_norm",
      [](const Tensor& a, py::object ord, std::vector<int64_t> dim, bool keepdim,
         py::object dtype) {
        return matrix_norm_any(a, ord, dim, keepdim, parse_dtype(dtype, "linalg.matrix_norm"),
                               "linalg.matrix_norm");
      },
      py::arg("A"), py::arg("ord") = "fro", py::arg("dim") = std::vector<int64_t>{-2, -1},
      py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
  linalg.def("inv", &linalg_inv, py::arg("A"));
  linalg.def("solve", &linalg_solve, py::arg("A"), py::arg("B"), py::kw_only(),
             py::arg("left") = true);
  linalg.def("det", &linalg_det, py::arg("A"));
  auto slogdet_fn = [](const Tensor& a) {
    auto [s, l] = linalg_slogdet(a);
    return slogdet_type(s, l);
  };
  linalg.def("slogdet", slogdet_fn, py::arg("A"));
  linalg.def(
      "cholesky", [](const Tensor& a, bool upper) { return linalg_cholesky(a, upper); },
      py::arg("A"), py::kw_only(), py::arg("upper") = false);
  linalg.def(
      "qr",
      [](const Tensor& a, const std::string& mode) {
        auto [q, r] = linalg_qr(a, mode);
        return qr_type(q, r);
      },
      py::arg("A"), py::arg("mode") = "reduced");
  // driver only selects a cuSOLVER routine in PyTorch; every driver gives the same result.
  linalg.def(
      "svd",
      [](const Tensor& a, bool full_matrices, py::object /*driver*/) {
        auto [u, s, vh] = linalg_svd(a, full_matrices);
        return svd_type(u, s, vh);
      },
      py::arg("A"), py::arg("full_matrices") = true, py::kw_only(), py::arg("driver") = py::none());
  linalg.def(
      "svdvals", [](const Tensor& a, py::object /*driver*/) { return linalg_svdvals(a); },
      py::arg("A"), py::kw_only(), py::arg("driver") = py::none());
  linalg.def(
      "eigh",
      [](const Tensor& a, const std::string& uplo) {
        auto [w, v] = linalg_eigh(a, uplo);
        return eigh_type(w, v);
      },
      py::arg("A"), py::arg("UPLO") = "L");
  linalg.def("eigvalsh", &linalg_eigvalsh, py::arg("A"), py::arg("UPLO") = "L");
  linalg.def(
      "lstsq",
      [](const Tensor& a, const Tensor& b, py::object rcond, std::optional<std::string> driver) {
        auto [x, res, rank, sv] = linalg_lstsq(a, b, opt_double(rcond), driver);
        return lstsq_type(x, res, rank, sv);
      },
      py::arg("A"), py::arg("B"), py::arg("rcond") = py::none(), py::kw_only(),
      py::arg("driver") = py::none());
  linalg.def(
      "pinv",
      [](const Tensor& a, py::object atol, py::object rtol, bool hermitian) {
        return linalg_pinv(a, opt_double(atol), opt_double(rtol), hermitian);
      },
      py::arg("A"), py::kw_only(), py::arg("atol") = py::none(), py::arg("rtol") = py::none(),
      py::arg("hermitian") = false);
  linalg.def(
      "matrix_rank",
      [](const Tensor& a, py::object atol, py::object rtol, bool hermitian) {
        return linalg_matrix_rank(a, opt_double(atol), opt_double(rtol), hermitian);
      },
      py::arg("A"), py::kw_only(), py::arg("atol") = py::none(), py::arg("rtol") = py::none(),
      py::arg("hermitian") = false);
  linalg.def("matrix_power", &linalg_matrix_power, py::arg("A"), py::arg("n"));
  linalg.def("multi_dot", &linalg_multi_dot, py::arg("tensors"));
  linalg.def(
      "diagonal",
      [](const Tensor& a, int64_t offset, int64_t dim1, int64_t dim2) {
        return diagonal(a, offset, dim1, dim2);
      },
      py::arg("A"), py::kw_only(), py::arg("offset") = 0, py::arg("dim1") = -2,
      py::arg("dim2") = -1);
  linalg.def("vecdot", &linalg_vecdot, py::arg("x"), py::arg("y"), py::kw_only(),
             py::arg("dim") = -1);
  linalg.def("solve_triangular", &linalg_solve_triangular, py::arg("A"), py::arg("B"),
             py::kw_only(), py::arg("upper"), py::arg("left") = true,
             py::arg("unitriangular") = false);
  linalg.def("matmul", &matmul, py::arg("input"), py::arg("other"));
  static py::object inv_ex_type = result_type("inv_ex", py::make_tuple("inverse", "info"));
  static py::object cholesky_ex_type = result_type("cholesky_ex", py::make_tuple("L", "info"));
  linalg.def(
      "inv_ex",
      [](const Tensor& a, bool check_errors) {
        auto [y, info] = linalg_inv_ex(a, check_errors);
        return inv_ex_type(y, info);
      },
      py::arg("A"), py::kw_only(), py::arg("check_errors") = false);
  linalg.def(
      "cholesky_ex",
      [](const Tensor& a, bool upper, bool check_errors) {
        auto [l, info] = linalg_cholesky_ex(a, upper, check_errors);
        return cholesky_ex_type(l, info);
      },
      py::arg("A"), py::kw_only(), py::arg("upper") = false, py::arg("check_errors") = false);
  linalg.def(
      "cond",
      [](const Tensor& a, py::object p) {
        if (py::isinstance<py::str>(p)) return linalg_cond(a, p.cast<std::string>());
        return linalg_cond(
            a, p.is_none() ? std::nullopt : std::optional<double>(number_order(p, "linalg.cond")));
      },
      py::arg("A"), py::arg("p") = py::none());

  // Top-level functions and Tensor methods PyTorch still has.
  for (auto [name, fn] : std::initializer_list<std::pair<const char*, Tensor (*)(const Tensor&)>>{
           {"det", &linalg_det}, {"logdet", &logdet}, {"inverse", &linalg_inv}}) {
    m.def(name, fn, py::arg("input"));
    cls.def(name, fn);
  }
  m.def("slogdet", slogdet_fn, py::arg("input"));
  cls.def("slogdet", slogdet_fn);
  // torch.cholesky is deprecated in PyTorch but still present; same factorization.
  auto cholesky_fn = [](const Tensor& a, bool upper) { return linalg_cholesky(a, upper); };
  m.def("cholesky", cholesky_fn, py::arg("input"), py::arg("upper") = false);
  cls.def("cholesky", cholesky_fn, py::arg("upper") = false);
  auto qr_fn = [](const Tensor& a, bool some) {
    auto [q, r] = linalg_qr(a, some ? "reduced" : "complete");
    return qr_type(q, r);
  };
  m.def("qr", qr_fn, py::arg("input"), py::arg("some") = true);
  cls.def("qr", qr_fn, py::arg("some") = true);
  // torch.svd returns V (not Vh); without compute_uv, U and V are zero-filled square matrices.
  auto svd_fn = [](const Tensor& a, bool some, bool compute_uv) {
    if (!compute_uv) {
      Tensor s = linalg_svdvals(a);
      Shape su = a.sizes(), sv = a.sizes();
      su.back() = a.size(-2);
      sv[sv.size() - 2] = a.size(-1);
      return torch_svd_type(zeros(su, a.dtype(), a.device()), s, zeros(sv, a.dtype(), a.device()));
    }
    auto [u, s, vh] = linalg_svd(a, !some);
    return torch_svd_type(u, s, mT(vh));
  };
  m.def("svd", svd_fn, py::arg("input"), py::arg("some") = true, py::arg("compute_uv") = true);
  cls.def("svd", svd_fn, py::arg("some") = true, py::arg("compute_uv") = true);
  // torch.pinverse's rcond is relative to the largest singular value.
  auto pinverse_fn = [](const Tensor& a, double rcond) {
    return linalg_pinv(a, 0.0, rcond, false);
  };
  m.def("pinverse", pinverse_fn, py::arg("input"), py::arg("rcond") = 1e-15);
  cls.def("pinverse", pinverse_fn, py::arg("rcond") = 1e-15);
  m.def("cholesky_solve", &cholesky_solve, py::arg("B"), py::arg("L"), py::arg("upper") = false);
  cls.def("cholesky_solve", &cholesky_solve, py::arg("input2"), py::arg("upper") = false);
  m.def("cholesky_inverse", &cholesky_inverse, py::arg("L"), py::arg("upper") = false);
  cls.def("cholesky_inverse", &cholesky_inverse, py::arg("upper") = false);
  static py::object triangular_solve_type =
      result_type("triangular_solve", py::make_tuple("solution", "cloned_coefficient"));
  auto triangular_solve_fn = [](const Tensor& b, const Tensor& a, bool upper, bool transpose,
                                bool unitriangular) {
    auto [x, c] = triangular_solve(b, a, upper, transpose, unitriangular);
    return triangular_solve_type(x, c);
  };
  m.def("triangular_solve", triangular_solve_fn, py::arg("b"), py::arg("A"),
        py::arg("upper") = true, py::arg("transpose") = false, py::arg("unitriangular") = false);
  cls.def("triangular_solve", triangular_solve_fn, py::arg("A"), py::arg("upper") = true,
          py::arg("transpose") = false, py::arg("unitriangular") = false);
  m.def("matrix_power", &linalg_matrix_power, py::arg("input"), py::arg("n"));
  cls.def("matrix_power", &linalg_matrix_power, py::arg("n"));
}

}  // namespace kiln::python
