// Reductions and scans with PyTorch's signatures: kiln.sum(x, dim=None, keepdim=False,
// dtype=None), x.max(dim) -> (values, indices), kiln.var(x, dim, correction=1), ...
#include <pybind11/stl.h>

#include <cmath>
#include <limits>
#include <string>

#include "ops/binary.h"
#include "ops/calculus.h"
#include "ops/copy.h"
#include "ops/linalg_matrix.h"
#include "ops/reduce.h"
#include "ops/scan_table.h"
#include "ops/statistics.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_reduce_extra(py::module_& m, TensorClass& cls);

namespace {

bool is_tensor(py::handle h) { return py::isinstance<TensorImpl>(h); }

// An int-like dim (Python or NumPy integer, not bool, not a tensor); nullopt for None.
std::optional<int64_t> parse_one_dim(py::handle h, const char* op) {
  if (h.is_none()) return std::nullopt;
  KILN_CHECK(PyIndex_Check(h.ptr()) && !py::isinstance<py::bool_>(h) && !is_tensor(h), Type, "[",
             op, "] dim must be an int, not ",
             std::string(py::str(py::type::handle_of(h).attr("__name__"))));
  return py::int_(py::reinterpret_borrow<py::object>(h)).cast<int64_t>();
}

// torch.return_types.max-like result: a namedtuple with .values and .indices.
py::object values_indices_type(const char* name) {
  py::object t = py::module_::import("collections")
                     .attr("namedtuple")(name, py::make_tuple("values", "indices"));
  t.attr("__module__") = "kiln.return_types";
  return t;
}

// max/min: over everything, along a dim (values, indices), or elementwise with a tensor.
py::object extreme(bool is_max, const Tensor& x, py::object dim, bool keepdim, py::object other,
                   const py::object& result_type) {
  const char* name = is_max ? "max" : "min";
  if (!other.is_none() || is_tensor(dim)) {
    Tensor o = to_tensor_arg(other.is_none() ? dim : other, name, "other");
    return py::cast(is_max ? maximum(x, o) : minimum(x, o));
  }
  std::optional<int64_t> d = parse_one_dim(dim, name);
  KILN_CHECK(d || !keepdim, Type, "[", name, "] keepdim=True needs a dim");
  if (!d) return py::cast(is_max ? kiln::max(x) : kiln::min(x));
  auto [values, indices] = is_max ? kiln::max(x, *d, keepdim) : kiln::min(x, *d, keepdim);
  return result_type(values, indices);
}

// var/std: the keyword `correction` or PyTorch's older `unbiased` (also positional: x.var(False),
// x.var(0, True)).
double parse_correction(py::object* dim, py::object unbiased, py::object correction,
                        const char* op) {
  if (py::isinstance<py::bool_>(*dim)) {
    KILN_CHECK(unbiased.is_none(), Type, "[", op, "] dim must be an int or tuple, not bool");
    unbiased = *dim;
    *dim = py::none();
  }
  KILN_CHECK(unbiased.is_none() || correction.is_none(), Runtime, "[", op,
             "] Cannot pass both correction and unbiased arguments");
  if (!unbiased.is_none()) return unbiased.cast<bool>() ? 1.0 : 0.0;
  return correction.is_none() ? 1.0 : correction.cast<double>();
}

// norm's p: a number, 'fro' (the 2-norm over the given dims) or None.
double parse_norm_order(py::handle p, const char* op) {
  if (p.is_none()) return 2.0;
  if (py::isinstance<py::str>(p)) {
    std::string s = p.cast<std::string>();
    if (s == "fro") return 2.0;
    fail(ErrorKind::Runtime, "[", op, "] unknown norm type '", s, "'");
  }
  KILN_CHECK(py::isinstance<py::int_>(p) || py::isinstance<py::float_>(p), Type, "[", op,
             "] p must be a number or 'fro'");
  return p.cast<double>();
}

// kiln.<op>(input, dim, ...) and Tensor.<op>(dim, ...) for a scan op of KILN_SCAN_OPS
// (ops/scan_table.h), in the signature its table column names.
void bind_scan(py::module_& m, TensorClass& cls, ScanOp op) {
  const char* name = op_name(op);
  switch (op_signature(op)) {
    case ScanSignature::Accumulate: {
      auto fn = [op, name](const Tensor& x, int64_t dim, py::object dtype) {
        return scan(op, x, dim, parse_dtype(dtype, name)).first;
      };
      m.def(name, fn, py::arg("input"), py::arg("dim"), py::kw_only(),
            py::arg("dtype") = py::none());
      cls.def(name, fn, py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
      return;
    }
    case ScanSignature::Indexed: {
      auto fn = [op, result_type = values_indices_type(name)](const Tensor& x, int64_t dim) {
        auto [values, indices] = scan(op, x, dim);
        return result_type(values, indices);
      };
      m.def(name, fn, py::arg("input"), py::arg("dim"));
      cls.def(name, fn, py::arg("dim"));
      return;
    }
    case ScanSignature::Floating: {
      auto fn = [op](const Tensor& x, int64_t dim) { return scan(op, x, dim).first; };
      m.def(name, fn, py::arg("input"), py::arg("dim"));
      cls.def(name, fn, py::arg("dim"));
      return;
    }
  }
}

}  // namespace

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
  auto prod_fn = [](const Tensor& x, py::object dim, bool keepdim, py::object dtype) {
    std::optional<int64_t> d = parse_one_dim(dim, "prod");
    DimList dims = d ? DimList(std::vector<int64_t>{*d}) : std::nullopt;
    return prod(x, dims, d ? keepdim : false, parse_dtype(dtype, "prod"));
  };
  m.def("prod", prod_fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false,
        py::kw_only(), py::arg("dtype") = py::none());
  cls.def("prod", prod_fn, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(),
          py::arg("dtype") = py::none());

  for (bool is_max : {true, false}) {
    const char* name = is_max ? "max" : "min";
    py::object result_type = values_indices_type(name);
    auto fn = [is_max, result_type](const Tensor& x, py::object dim, bool keepdim,
                                    py::object other) {
      return extreme(is_max, x, dim, keepdim, other, result_type);
    };
    m.def(name, fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false,
          py::kw_only(), py::arg("other") = py::none());
    cls.def(name, fn, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(),
            py::arg("other") = py::none());

    const char* aname = is_max ? "amax" : "amin";
    auto afn = [is_max, aname](const Tensor& x, py::object dim, bool keepdim) {
      DimList dims = parse_dims(dim, aname);
      return is_max ? amax(x, dims, keepdim) : amin(x, dims, keepdim);
    };
    m.def(aname, afn, py::arg("input"), py::arg("dim") = py::tuple(), py::arg("keepdim") = false);
    cls.def(aname, afn, py::arg("dim") = py::tuple(), py::arg("keepdim") = false);

    const char* argname = is_max ? "argmax" : "argmin";
    auto argfn = [is_max, argname](const Tensor& x, py::object dim, bool keepdim) {
      std::optional<int64_t> d = parse_one_dim(dim, argname);
      return is_max ? argmax(x, d, keepdim) : argmin(x, d, keepdim);
    };
    m.def(argname, argfn, py::arg("input"), py::arg("dim") = py::none(),
          py::arg("keepdim") = false);
    cls.def(argname, argfn, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }

  for (bool is_all : {true, false}) {
    const char* name = is_all ? "all" : "any";
    auto fn = [is_all, name](const Tensor& x, py::object dim, bool keepdim) {
      DimList dims = parse_dims(dim, name);
      return is_all ? all(x, dims, keepdim) : any(x, dims, keepdim);
    };
    m.def(name, fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
    cls.def(name, fn, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }

  for (const char* name : {"var", "std", "var_mean", "std_mean"}) {
    const std::string op = name;
    auto fn = [op](const Tensor& x, py::object dim, py::object unbiased, bool keepdim,
                   py::object correction) -> py::object {
      double c = parse_correction(&dim, unbiased, correction, op.c_str());
      DimList dims = parse_dims(dim, op.c_str());
      if (op == "var") return py::cast(var(x, dims, c, keepdim));
      if (op == "std") return py::cast(std_dev(x, dims, c, keepdim));
      auto [stat, mean] = op == "var_mean" ? var_mean(x, dims, c, keepdim)
                                           : std_mean(x, dims, c, keepdim);
      return py::make_tuple(stat, mean);
    };
    m.def(name, fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("unbiased") = py::none(),
          py::arg("keepdim") = false, py::kw_only(), py::arg("correction") = py::none());
    if (op == "var" || op == "std")
      cls.def(name, fn, py::arg("dim") = py::none(), py::arg("unbiased") = py::none(),
              py::arg("keepdim") = false, py::kw_only(), py::arg("correction") = py::none());
  }

  auto norm_fn = [](const Tensor& x, py::object p, py::object dim, bool keepdim,
                    py::object dtype) {
    // The nuclear norm is a matrix norm: over the two given dims, or of a 2-D input.
    if (py::isinstance<py::str>(p) && p.cast<std::string>() == "nuc") {
      std::optional<std::vector<int64_t>> dims = parse_dims(dim, "norm");
      KILN_CHECK(dims || x.dim() == 2, Runtime,
                 "[norm] p='nuc' without dim needs a 2-D input, got shape ", x.sizes());
      return linalg_matrix_norm(x, std::string("nuc"), dims.value_or(std::vector<int64_t>{0, 1}),
                                keepdim, parse_dtype(dtype, "norm"), "norm");
    }
    return vector_norm(x, parse_norm_order(p, "norm"), parse_dims(dim, "norm"), keepdim,
                       parse_dtype(dtype, "norm"), "norm");
  };
  m.def("norm", norm_fn, py::arg("input"), py::arg("p") = "fro", py::arg("dim") = py::none(),
        py::arg("keepdim") = false, py::arg("dtype") = py::none());
  cls.def("norm", norm_fn, py::arg("p") = "fro", py::arg("dim") = py::none(),
          py::arg("keepdim") = false, py::arg("dtype") = py::none());
  // def_submodule reuses kiln._C.linalg when another binding file has made it.
  py::module_ linalg = m.def_submodule("linalg", "kiln.linalg: norms and matrix functions");
  linalg.def(
      "vector_norm",
      [](const Tensor& x, double ord, py::object dim, bool keepdim, py::object dtype) {
        return vector_norm(x, ord, parse_dims(dim, "linalg.vector_norm"), keepdim,
                           parse_dtype(dtype, "linalg.vector_norm"));
      },
      py::arg("x"), py::arg("ord") = 2.0, py::arg("dim") = py::none(), py::arg("keepdim") = false,
      py::kw_only(), py::arg("dtype") = py::none());

  auto nansum_fn = [](const Tensor& x, py::object dim, bool keepdim, py::object dtype) {
    return nansum(x, parse_dims(dim, "nansum"), keepdim, parse_dtype(dtype, "nansum"));
  };
  m.def("nansum", nansum_fn, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
  cls.def("nansum", nansum_fn, py::arg("dim") = py::none(), py::arg("keepdim") = false,
          py::kw_only(), py::arg("dtype") = py::none());
  auto nanmean_fn = [](const Tensor& x, py::object dim, bool keepdim, py::object dtype) {
    return nanmean(x, parse_dims(dim, "nanmean"), keepdim, parse_dtype(dtype, "nanmean"));
  };
  m.def("nanmean", nanmean_fn, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
  cls.def("nanmean", nanmean_fn, py::arg("dim") = py::none(), py::arg("keepdim") = false,
          py::kw_only(), py::arg("dtype") = py::none());
  auto count_fn = [](const Tensor& x, py::object dim) {
    return count_nonzero(x, parse_dims(dim, "count_nonzero"));
  };
  m.def("count_nonzero", count_fn, py::arg("input"), py::arg("dim") = py::none());
  cls.def("count_nonzero", count_fn, py::arg("dim") = py::none());
  py::object aminmax_type = py::module_::import("collections")
                                .attr("namedtuple")("aminmax", py::make_tuple("min", "max"));
  aminmax_type.attr("__module__") = "kiln.return_types";
  auto aminmax_fn = [aminmax_type](const Tensor& x, py::object dim, bool keepdim) {
    std::optional<int64_t> d = parse_one_dim(dim, "aminmax");
    DimList dims = d ? DimList(std::vector<int64_t>{*d}) : std::nullopt;
    return aminmax_type(amin(x, dims, keepdim), amax(x, dims, keepdim));
  };
  m.def("aminmax", aminmax_fn, py::arg("input"), py::kw_only(), py::arg("dim") = py::none(),
        py::arg("keepdim") = false);
  cls.def("aminmax", aminmax_fn, py::kw_only(), py::arg("dim") = py::none(),
          py::arg("keepdim") = false);

  auto lse_fn = [](const Tensor& x, py::object dim, bool keepdim) {
    return logsumexp(x, parse_dims(dim, "logsumexp"), keepdim);
  };
  m.def("logsumexp", lse_fn, py::arg("input"), py::arg("dim"), py::arg("keepdim") = false);
  cls.def("logsumexp", lse_fn, py::arg("dim"), py::arg("keepdim") = false);

#define KILN_BIND_SCAN(name, op, functor, signature, autocast, saves) bind_scan(m, cls, ScanOp::op);
  KILN_SCAN_OPS(KILN_BIND_SCAN)
#undef KILN_BIND_SCAN
  init_reduce_extra(m, cls);
}

namespace {

// gradient's spacing: a number, a list of numbers, or a list of 1-D coordinate tensors.
std::vector<GradientSpacing> parse_spacing(py::handle h) {
  if (!py::isinstance<py::sequence>(h) || is_tensor(h)) {
    if (is_tensor(h)) return {h.cast<Tensor>()};
    return {h.cast<Scalar>()};
  }
  std::vector<GradientSpacing> out;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(h)) {
    if (is_tensor(item) && item.cast<Tensor>().dim() > 0)
      out.emplace_back(item.cast<Tensor>());
    else
      out.emplace_back(item.cast<Scalar>());
  }
  return out;
}

Tensor optional_tensor(py::handle h, const char* op, const char* arg) {
  return h.is_none() ? Tensor() : to_tensor_arg(h, op, arg);
}

// trapezoid(y, x=None, *, dx=None, dim=-1): x and dx exclude each other.
Tensor integrate(bool cumulative, const Tensor& y, py::object x, py::object dx, int64_t dim) {
  const char* op = cumulative ? "cumulative_trapezoid" : "trapezoid";
  KILN_CHECK(x.is_none() || dx.is_none(), Type, "[", op, "] received both x and dx; pass one");
  if (!x.is_none()) {
    Tensor xs = to_tensor_arg(x, op, "x");
    return cumulative ? cumulative_trapezoid(y, xs, dim) : trapezoid(y, xs, dim);
  }
  Scalar step = dx.is_none() ? Scalar(int64_t(1)) : dx.cast<Scalar>();
  return cumulative ? cumulative_trapezoid(y, step, dim) : trapezoid(y, step, dim);
}

}  // namespace

void init_reduce_extra(py::module_& m, TensorClass& cls) {
  auto diff_fn = [](const Tensor& x, int64_t n, int64_t dim, py::object prepend,
                    py::object append) {
    return diff(x, n, dim, optional_tensor(prepend, "diff", "prepend"),
                optional_tensor(append, "diff", "append"));
  };
  m.def("diff", diff_fn, py::arg("input"), py::arg("n") = 1, py::arg("dim") = -1,
        py::arg("prepend") = py::none(), py::arg("append") = py::none());
  cls.def("diff", diff_fn, py::arg("n") = 1, py::arg("dim") = -1, py::arg("prepend") = py::none(),
          py::arg("append") = py::none());
  m.def(
      "gradient",
      [](const Tensor& x, py::object spacing, py::object dim, int64_t edge_order) {
        std::optional<std::vector<int64_t>> dims = parse_dims(dim, "gradient");
        std::vector<Tensor> out =
            gradient(x, parse_spacing(spacing), dims.value_or(std::vector<int64_t>{}), edge_order);
        py::tuple t(out.size());
        for (size_t i = 0; i < out.size(); ++i) t[i] = py::cast(out[i]);
        return t;
      },
      py::arg("input"), py::kw_only(), py::arg("spacing") = 1, py::arg("dim") = py::none(),
      py::arg("edge_order") = 1);
  for (const char* name : {"trapezoid", "trapz"}) {
    m.def(
        name,
        [](const Tensor& y, py::object x, py::object dx, int64_t dim) {
          return integrate(false, y, x, dx, dim);
        },
        py::arg("y"), py::arg("x") = py::none(), py::kw_only(), py::arg("dx") = py::none(),
        py::arg("dim") = -1);
  }
  m.def(
      "cumulative_trapezoid",
      [](const Tensor& y, py::object x, py::object dx, int64_t dim) {
        return integrate(true, y, x, dx, dim);
      },
      py::arg("y"), py::arg("x") = py::none(), py::kw_only(), py::arg("dx") = py::none(),
      py::arg("dim") = -1);

  auto cov_fn = [](const Tensor& x, int64_t correction, py::object fw, py::object aw) {
    return cov(x, correction, optional_tensor(fw, "cov", "fweights"),
               optional_tensor(aw, "cov", "aweights"));
  };
  m.def("cov", cov_fn, py::arg("input"), py::kw_only(), py::arg("correction") = 1,
        py::arg("fweights") = py::none(), py::arg("aweights") = py::none());
  cls.def("cov", cov_fn, py::kw_only(), py::arg("correction") = 1,
          py::arg("fweights") = py::none(), py::arg("aweights") = py::none());
  m.def("corrcoef", &corrcoef, py::arg("input"));
  cls.def("corrcoef", &corrcoef);

  py::object nanmedian_t = values_indices_type("nanmedian");
  auto nanmedian_fn = [nanmedian_t](const Tensor& x, py::object dim, bool keepdim) -> py::object {
    std::optional<int64_t> d = parse_one_dim(dim, "nanmedian");
    if (!d) return py::cast(nanmedian(x));
    auto [values, indices] = nanmedian(x, *d, keepdim);
    return nanmedian_t(values, indices);
  };
  m.def("nanmedian", nanmedian_fn, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false);
  cls.def("nanmedian", nanmedian_fn, py::arg("dim") = py::none(), py::arg("keepdim") = false);

  for (bool skip_nan : {false, true}) {
    const char* name = skip_nan ? "nanquantile" : "quantile";
    auto fn = [skip_nan, name](const Tensor& x, py::object q, py::object dim, bool keepdim,
                               const std::string& interpolation) {
      Tensor qt = is_tensor(q) ? q.cast<Tensor>()
                               : to_dtype(to_device(to_tensor_arg(q, name, "q"), x.device()),
                                          x.dtype());
      std::optional<int64_t> d = parse_one_dim(dim, name);
      return skip_nan ? nanquantile(x, qt, d, keepdim, interpolation)
                      : quantile(x, qt, d, keepdim, interpolation);
    };
    m.def(name, fn, py::arg("input"), py::arg("q"), py::arg("dim") = py::none(),
          py::arg("keepdim") = false, py::kw_only(), py::arg("interpolation") = "linear");
    cls.def(name, fn, py::arg("q"), py::arg("dim") = py::none(), py::arg("keepdim") = false,
            py::kw_only(), py::arg("interpolation") = "linear");
  }

  py::object hist_t = py::module_::import("collections")
                          .attr("namedtuple")("histogram", py::make_tuple("hist", "bin_edges"));
  hist_t.attr("__module__") = "kiln.return_types";
  auto hist_fn = [hist_t](const Tensor& x, py::object bins, py::object range, py::object weight,
                          bool density) {
    Tensor w = optional_tensor(weight, "histogram", "weight");
    if (is_tensor(bins)) {
      KILN_CHECK(range.is_none(), Type, "[histogram] range is only accepted with an int bins");
      auto [h, e] = histogram(x, bins.cast<Tensor>(), w, density);
      return hist_t(h, e);
    }
    std::optional<std::pair<double, double>> r;
    if (!range.is_none()) r = range.cast<std::pair<double, double>>();
    auto [h, e] = histogram(x, bins.cast<int64_t>(), r, w, density);
    return hist_t(h, e);
  };
  m.def("histogram", hist_fn, py::arg("input"), py::arg("bins") = 100, py::kw_only(),
        py::arg("range") = py::none(), py::arg("weight") = py::none(),
        py::arg("density") = false);
  cls.def("histogram", hist_fn, py::arg("bins") = 100, py::kw_only(),
          py::arg("range") = py::none(), py::arg("weight") = py::none(),
          py::arg("density") = false);
}

}  // namespace kiln::python
