// Elementwise ops: functions (kiln.exp), methods (x.exp(), x.exp_()) and the
// Python operators, generated from the op table in ops/op_table.h.
#include <pybind11/stl.h>

#include "core/error.h"
#include "core/promotion.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/unary.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// `a <op> b` where either side may be a number; NotImplemented lets Python
// raise its own TypeError for unsupported operand types.
template <typename F>
py::object binary_operator(const Tensor& self, py::handle other, F f) {
  Tensor o;
  if (!try_tensor_arg(other, &o)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return py::cast(f(self, o));
}

template <typename F>
void def_operator(TensorClass& cls, const char* name, F f) {
  cls.def(name, [f](const Tensor& self, py::object other) { return binary_operator(self, other, f); },
          py::is_operator());
}

}  // namespace

void init_elementwise(py::module_& m, TensorClass& cls) {
  // The op table as data, so tests can check that every op is covered.
  m.def("_op_table", [] {
    py::dict unary, binary;
#define KILN_TABLE_UNARY(name, kind, autocast) unary[#name] = #kind;
    KILN_UNARY_OPS(KILN_TABLE_UNARY)
#undef KILN_TABLE_UNARY
#define KILN_TABLE_BINARY(name, kind, autocast) binary[#name] = #kind;
    KILN_BINARY_OPS(KILN_TABLE_BINARY)
#undef KILN_TABLE_BINARY
    py::dict table;
    table["unary"] = unary;
    table["binary"] = binary;
    return table;
  });

  // Simple unary ops: kiln.exp(x), x.exp(), x.exp_().
#define KILN_BIND_UNARY(name, kind, autocast)                                            \
  m.def(#name, [](const Tensor& x) { return kiln::name(x); }, py::arg("input"));         \
  cls.def(#name, [](const Tensor& x) { return kiln::name(x); });                         \
  cls.def(#name "_", [](const Tensor& x) { return kiln::name##_(x); });
  KILN_UNARY_SIMPLE_OPS(KILN_BIND_UNARY)
#undef KILN_BIND_UNARY

  // Registered before the generic binary bindings so these signatures win
  // overload resolution: add/sub take alpha=, div takes rounding_mode=.
  for (const char* name : {"add", "sub"}) {
    bool is_add = std::string(name) == "add";
    m.def(name, [is_add](py::object a, py::object b, Scalar alpha) {
      Tensor x = to_tensor_arg(a, is_add ? "add" : "sub", "input");
      Tensor y = to_tensor_arg(b, is_add ? "add" : "sub", "other");
      return is_add ? add(x, y, alpha) : sub(x, y, alpha);
    }, py::arg("input"), py::arg("other"), py::kw_only(), py::arg("alpha") = Scalar(1));
    cls.def(name, [is_add](const Tensor& x, py::object b, Scalar alpha) {
      Tensor y = to_tensor_arg(b, is_add ? "add" : "sub", "other");
      return is_add ? add(x, y, alpha) : sub(x, y, alpha);
    }, py::arg("other"), py::kw_only(), py::arg("alpha") = Scalar(1));
    cls.def((std::string(name) + "_").c_str(), [is_add](const Tensor& x, py::object b, Scalar alpha) {
      Tensor y = to_tensor_arg(b, is_add ? "add_" : "sub_", "other");
      return is_add ? add_(x, y, alpha) : sub_(x, y, alpha);
    }, py::arg("other"), py::kw_only(), py::arg("alpha") = Scalar(1));
  }
  auto div_rounding = [](const Tensor& x, const Tensor& y, py::object mode) -> Tensor {
    if (mode.is_none()) return div(x, y);
    std::string name = py::str(mode);
    if (name == "floor") return floor_divide(x, y);
    KILN_CHECK(name == "trunc", Value, "[div] expected rounding_mode to be one of None, 'trunc', "
               "or 'floor' but found '", name, "'");
    DType rt = result_type(x, y);
    Tensor q = trunc(div(x, y));
    return is_floating(rt) ? q : to_dtype(q, rt);
  };
  m.def("div", [div_rounding](py::object a, py::object b, py::object mode) {
    return div_rounding(to_tensor_arg(a, "div", "input"), to_tensor_arg(b, "div", "other"), mode);
  }, py::arg("input"), py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none());
  cls.def("div", [div_rounding](const Tensor& a, py::object b, py::object mode) {
    return div_rounding(a, to_tensor_arg(b, "div", "other"), mode);
  }, py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none());
  cls.def("div_", [div_rounding](const Tensor& a, py::object b, py::object mode) {
    if (mode.is_none()) return div_(a, to_tensor_arg(b, "div_", "other"));
    Tensor other = to_tensor_arg(b, "div_", "other");
    return assign_inplace(a, {other}, "div_",
                          [&](const Tensor& s) { return div_rounding(s, other, mode); });
  }, py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none());


  // Binary ops: either operand may be a number.
#define KILN_BIND_BINARY(name, kind, autocast)                                            \
  m.def(#name, [](py::object a, py::object b) {                                           \
    return kiln::name(to_tensor_arg(a, #name, "input"), to_tensor_arg(b, #name, "other")); \
  }, py::arg("input"), py::arg("other"));                                                 \
  cls.def(#name, [](const Tensor& a, py::object b) {                                      \
    return kiln::name(a, to_tensor_arg(b, #name, "other"));                               \
  }, py::arg("other"));                                                                   \
  cls.def(#name "_", [](const Tensor& a, py::object b) {                                  \
    return kiln::name##_(a, to_tensor_arg(b, #name "_", "other"));                        \
  }, py::arg("other"));
  KILN_BINARY_OPS(KILN_BIND_BINARY)
#undef KILN_BIND_BINARY

  // Aliases PyTorch also exposes.
  for (auto [alias, target] : std::initializer_list<std::pair<const char*, const char*>>{
           {"subtract", "sub"}, {"multiply", "mul"}, {"divide", "div"}, {"true_divide", "div"},
           {"greater", "gt"}, {"greater_equal", "ge"}, {"less", "lt"}, {"less_equal", "le"},
           {"not_equal", "ne"}, {"negative", "neg"}, {"absolute", "abs"}, {"fmax", "maximum"},
           {"fmin", "minimum"}, {"arctan2", "atan2"}}) {
    m.attr(alias) = m.attr(target);
    cls.attr(alias) = cls.attr(target);
  }

  // Parametric unary ops.
  m.def("gelu", [](const Tensor& x, const std::string& approximate) { return gelu(x, approximate); },
        py::arg("input"), py::arg("approximate") = "none");
  m.def("leaky_relu", [](const Tensor& x, double s) { return leaky_relu(x, s); },
        py::arg("input"), py::arg("negative_slope") = 0.01);
  m.def("elu", [](const Tensor& x, double a) { return elu(x, a); }, py::arg("input"),
        py::arg("alpha") = 1.0);
  m.def("softplus", [](const Tensor& x, double beta, double threshold) {
          return softplus(x, beta, threshold);
        }, py::arg("input"), py::arg("beta") = 1.0, py::arg("threshold") = 20.0);
  auto nan_to_num_fn = [](const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf) {
    return nan_to_num(x, nan, posinf, neginf);
  };
  m.def("nan_to_num", nan_to_num_fn, py::arg("input"), py::arg("nan") = 0.0,
        py::arg("posinf") = py::none(), py::arg("neginf") = py::none());
  cls.def("nan_to_num", nan_to_num_fn, py::arg("nan") = 0.0, py::arg("posinf") = py::none(),
          py::arg("neginf") = py::none());
  auto clamp_fn = [](const Tensor& x, py::object min, py::object max) {
    Scalar lo, hi;
    bool slo = min.is_none() || scalar_from_object(min, &lo);
    bool shi = max.is_none() || scalar_from_object(max, &hi);
    if (slo && shi && !(py::isinstance<TensorImpl>(min) || py::isinstance<TensorImpl>(max))) {
      return clamp(x, min.is_none() ? std::nullopt : std::optional<Scalar>(lo),
                   max.is_none() ? std::nullopt : std::optional<Scalar>(hi));
    }
    Tensor tlo = min.is_none() ? Tensor() : to_tensor_arg(min, "clamp", "min");
    Tensor thi = max.is_none() ? Tensor() : to_tensor_arg(max, "clamp", "max");
    return clamp(x, tlo, thi);
  };
  for (const char* name : {"clamp", "clip"}) {
    m.def(name, clamp_fn, py::arg("input"), py::arg("min") = py::none(), py::arg("max") = py::none());
    cls.def(name, clamp_fn, py::arg("min") = py::none(), py::arg("max") = py::none());
    cls.def((std::string(name) + "_").c_str(), [clamp_fn, name](const Tensor& x, py::object min,
                                                                 py::object max) {
      Tensor tmin = py::isinstance<TensorImpl>(min) ? min.cast<Tensor>() : Tensor();
      Tensor tmax = py::isinstance<TensorImpl>(max) ? max.cast<Tensor>() : Tensor();
      return assign_inplace(x, {tmin, tmax}, name == std::string("clamp") ? "clamp_" : "clip_",
                            [&](const Tensor& s) { return clamp_fn(s, min, max); });
    }, py::arg("min") = py::none(), py::arg("max") = py::none());
  }
  m.def("where", [](const Tensor& cond, py::object a, py::object b) {
          return where(cond, to_tensor_arg(a, "where", "input"), to_tensor_arg(b, "where", "other"));
        }, py::arg("condition"), py::arg("input"), py::arg("other"));
  cls.def("where", [](const Tensor& self, const Tensor& cond, py::object b) {
    return where(cond, self, to_tensor_arg(b, "where", "other"));
  }, py::arg("condition"), py::arg("other"));
  cls.def("lerp_", [](const Tensor& a, const Tensor& end, py::object w) {
    return lerp_(a, end, to_tensor_arg(w, "lerp_", "weight"));
  }, py::arg("end"), py::arg("weight"));
  using Addc = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, Scalar);
  using AddcInplace = const Tensor& (*)(const Tensor&, const Tensor&, const Tensor&, Scalar);
  for (auto [name, fn, fn_] : {std::tuple<const char*, Addc, AddcInplace>{"addcmul", &addcmul,
                                                                          &addcmul_},
                               {"addcdiv", &addcdiv, &addcdiv_}}) {
    m.def(name, fn, py::arg("input"), py::arg("tensor1"), py::arg("tensor2"), py::kw_only(),
          py::arg("value") = Scalar(1));
    cls.def(name, fn, py::arg("tensor1"), py::arg("tensor2"), py::kw_only(),
            py::arg("value") = Scalar(1));
    cls.def((std::string(name) + "_").c_str(), fn_, py::arg("tensor1"), py::arg("tensor2"),
            py::kw_only(), py::arg("value") = Scalar(1));
  }
  auto isclose_fn = [](const Tensor& a, const Tensor& b, double rtol, double atol, bool nan) {
    return isclose(a, b, rtol, atol, nan);
  };
  auto allclose_fn = [](const Tensor& a, const Tensor& b, double rtol, double atol, bool nan) {
    return allclose(a, b, rtol, atol, nan);
  };
  m.def("isclose", isclose_fn, py::arg("input"), py::arg("other"), py::arg("rtol") = 1e-5,
        py::arg("atol") = 1e-8, py::arg("equal_nan") = false);
  cls.def("isclose", isclose_fn, py::arg("other"), py::arg("rtol") = 1e-5,
          py::arg("atol") = 1e-8, py::arg("equal_nan") = false);
  m.def("allclose", allclose_fn, py::arg("input"), py::arg("other"), py::arg("rtol") = 1e-5,
        py::arg("atol") = 1e-8, py::arg("equal_nan") = false);
  cls.def("allclose", allclose_fn, py::arg("other"), py::arg("rtol") = 1e-5,
          py::arg("atol") = 1e-8, py::arg("equal_nan") = false);
  m.def("equal", [](const Tensor& a, const Tensor& b) { return equal(a, b); }, py::arg("input"),
        py::arg("other"));
  cls.def("equal", [](const Tensor& a, const Tensor& b) { return equal(a, b); },
          py::arg("other"));
  m.def("lerp", [](const Tensor& a, const Tensor& end, py::object w) {
          return lerp(a, end, to_tensor_arg(w, "lerp", "weight"));
        }, py::arg("input"), py::arg("end"), py::arg("weight"));
  cls.def("lerp", [](const Tensor& a, const Tensor& end, py::object w) {
    return lerp(a, end, to_tensor_arg(w, "lerp", "weight"));
  }, py::arg("end"), py::arg("weight"));

  // Python operators.
  def_operator(cls, "__add__", [](const Tensor& a, const Tensor& b) { return add(a, b); });
  def_operator(cls, "__radd__", [](const Tensor& a, const Tensor& b) { return add(b, a); });
  def_operator(cls, "__iadd__", [](const Tensor& a, const Tensor& b) { return add_(a, b); });
  def_operator(cls, "__sub__", [](const Tensor& a, const Tensor& b) { return sub(a, b); });
  def_operator(cls, "__rsub__", [](const Tensor& a, const Tensor& b) { return sub(b, a); });
  def_operator(cls, "__isub__", [](const Tensor& a, const Tensor& b) { return sub_(a, b); });
  def_operator(cls, "__mul__", [](const Tensor& a, const Tensor& b) { return mul(a, b); });
  def_operator(cls, "__rmul__", [](const Tensor& a, const Tensor& b) { return mul(b, a); });
  def_operator(cls, "__imul__", [](const Tensor& a, const Tensor& b) { return mul_(a, b); });
  def_operator(cls, "__truediv__", [](const Tensor& a, const Tensor& b) { return div(a, b); });
  def_operator(cls, "__rtruediv__", [](const Tensor& a, const Tensor& b) {
    // number / tensor is in autocast's float32 list (as rdiv); tensor / tensor is not.
    if (auto ac = autocast_args("rdiv", {a})) return div(b, (*ac)[0]);
    return div(b, a);
  });
  def_operator(cls, "__itruediv__", [](const Tensor& a, const Tensor& b) { return div_(a, b); });
  def_operator(cls, "__floordiv__", [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); });
  def_operator(cls, "__rfloordiv__", [](const Tensor& a, const Tensor& b) { return floor_divide(b, a); });
  def_operator(cls, "__ifloordiv__", [](const Tensor& a, const Tensor& b) { return floor_divide_(a, b); });
  def_operator(cls, "__mod__", [](const Tensor& a, const Tensor& b) { return remainder(a, b); });
  def_operator(cls, "__rmod__", [](const Tensor& a, const Tensor& b) { return remainder(b, a); });
  def_operator(cls, "__imod__", [](const Tensor& a, const Tensor& b) { return remainder_(a, b); });
  def_operator(cls, "__pow__", [](const Tensor& a, const Tensor& b) { return pow(a, b); });
  def_operator(cls, "__rpow__", [](const Tensor& a, const Tensor& b) { return pow(b, a); });
  def_operator(cls, "__ipow__", [](const Tensor& a, const Tensor& b) { return pow_(a, b); });
  def_operator(cls, "__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  def_operator(cls, "__rmatmul__", [](const Tensor& a, const Tensor& b) { return matmul(b, a); });
  def_operator(cls, "__and__", [](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); });
  def_operator(cls, "__rand__", [](const Tensor& a, const Tensor& b) { return bitwise_and(b, a); });
  def_operator(cls, "__iand__", [](const Tensor& a, const Tensor& b) { return bitwise_and_(a, b); });
  def_operator(cls, "__or__", [](const Tensor& a, const Tensor& b) { return bitwise_or(a, b); });
  def_operator(cls, "__ror__", [](const Tensor& a, const Tensor& b) { return bitwise_or(b, a); });
  def_operator(cls, "__ior__", [](const Tensor& a, const Tensor& b) { return bitwise_or_(a, b); });
  def_operator(cls, "__xor__", [](const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); });
  def_operator(cls, "__rxor__", [](const Tensor& a, const Tensor& b) { return bitwise_xor(b, a); });
  def_operator(cls, "__ixor__", [](const Tensor& a, const Tensor& b) { return bitwise_xor_(a, b); });
  def_operator(cls, "__eq__", [](const Tensor& a, const Tensor& b) { return eq(a, b); });
  def_operator(cls, "__ne__", [](const Tensor& a, const Tensor& b) { return ne(a, b); });
  def_operator(cls, "__lt__", [](const Tensor& a, const Tensor& b) { return lt(a, b); });
  def_operator(cls, "__le__", [](const Tensor& a, const Tensor& b) { return le(a, b); });
  def_operator(cls, "__gt__", [](const Tensor& a, const Tensor& b) { return gt(a, b); });
  def_operator(cls, "__ge__", [](const Tensor& a, const Tensor& b) { return ge(a, b); });
  cls.def("__neg__", [](const Tensor& a) { return neg(a); });
  cls.def("__pos__", [](const Tensor& a) { return a; });
  cls.def("__abs__", [](const Tensor& a) { return abs(a); });
  cls.def("__invert__", [](const Tensor& a) {
    return a.dtype() == DType::Bool ? logical_not(a) : bitwise_not(a);
  });
}

}  // namespace kiln::python
