// Elementwise ops: functions (kiln.exp), methods (x.exp(), x.exp_()) and the
// Python operators, generated from the op table in ops/op_table.h.
#include <pybind11/stl.h>

#include <string>

#include "core/error.h"
#include "core/promotion.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/scan_table.h"
#include "ops/unary.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// Note [Fast operators]
// `a + b` is the most frequent call into kiln, so the Python operators skip
// pybind11's generic dispatcher (argument vectors, overload loop, a bound
// method object per call): each is a METH_FASTCALL method descriptor calling
// Op::call directly. Either side may be a number; NotImplemented lets Python
// try the reflected operator or raise its own TypeError. kiln errors reach
// Python through pybind11's exception translators, as from any binding.
template <typename Op>
PyObject* fast_operator(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1) {
    PyErr_Format(PyExc_TypeError, "expected 1 argument, got %zd", nargs);
    return nullptr;
  }
  try {
    Tensor a, b;
    if (!try_tensor_arg(self, &a) || !try_tensor_arg(args[0], &b)) Py_RETURN_NOTIMPLEMENTED;
    return py::cast(Op::call(a, b)).release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

template <typename Op>
void def_operator(TensorClass& cls, const char* name) {
  // One definition per operator, alive as long as the type (for the process).
  // The docstring is pybind11's signature line, which scripts/gen_stubs.py reads.
  static const std::string doc =
      std::string(name) + "(self: kiln._C.Tensor, arg0: object) -> object";
  static PyMethodDef def{name, reinterpret_cast<PyCFunction>(
                                   reinterpret_cast<void (*)()>(&fast_operator<Op>)),
                         METH_FASTCALL, doc.c_str()};
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  py::object descr = py::reinterpret_steal<py::object>(PyDescr_NewMethod(type, &def));
  if (!descr) throw py::error_already_set();
  // Setting it through the type also fills the number slot (nb_add, ...).
  cls.attr(name) = descr;
}

// `a <op> b` for operators that keep pybind11's path: __eq__/__ne__, whose
// definition also decides the type's __hash__.
template <typename F>
void def_slow_operator(TensorClass& cls, const char* name, F f) {
  cls.def(name, [f](const Tensor& self, py::object other) -> py::object {
    Tensor o;
    if (!try_tensor_arg(other, &o)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    return py::cast(f(self, o));
  }, py::is_operator());
}

Tensor reflected_div(const Tensor& a, const Tensor& b) {
  // number / tensor is in autocast's float32 list (as rdiv); tensor / tensor is not.
  if (auto ac = autocast_args("rdiv", {a})) return div(b, (*ac)[0]);
  return div(b, a);
}

}  // namespace

void init_elementwise(py::module_& m, TensorClass& cls) {
  // The op tables as data, so tests can check that every op is covered.
  m.def("_op_table", [] {
    py::dict unary, binary;
#define KILN_TABLE_UNARY(name, kind, autocast) unary[#name] = #kind;
    KILN_UNARY_OPS(KILN_TABLE_UNARY)
#undef KILN_TABLE_UNARY
#define KILN_TABLE_BINARY(name, kind, autocast) binary[#name] = #kind;
    KILN_BINARY_OPS(KILN_TABLE_BINARY)
#undef KILN_TABLE_BINARY
    py::dict binary_grad, scan;
#define KILN_TABLE_BINARY_GRAD(name, kind, autocast) binary_grad[#name] = #kind;
    KILN_BINARY_GRAD_OPS(KILN_TABLE_BINARY_GRAD)
#undef KILN_TABLE_BINARY_GRAD
#define KILN_TABLE_SCAN(name, op, functor, signature, autocast, saves) scan[#name] = #signature;
    KILN_SCAN_OPS(KILN_TABLE_SCAN)
#undef KILN_TABLE_SCAN
    py::dict table;
    table["unary"] = unary;
    table["binary"] = binary;
    table["binary_grad"] = binary_grad;  // internal: fused activation gradients, not bound
    table["scan"] = scan;
    return table;
  });

  // Simple unary ops: kiln.exp(x), x.exp(), x.exp_().
#define KILN_BIND_UNARY(name, kind, autocast)                                            \
  m.def(#name, [](const Tensor& x) { return kiln::name(x); }, py::arg("input"));         \
  cls.def(#name, [](const Tensor& x) { return kiln::name(x); });                         \
  cls.def(#name "_", [](const Tensor& x) { return kiln::name##_(x); });
  KILN_UNARY_SIMPLE_OPS(KILN_BIND_UNARY)
#undef KILN_BIND_UNARY
  // Composite unary ops (ops/unary.h), bound the same way.
  using UnaryFn = Tensor (*)(const Tensor&);
  using UnaryInplaceFn = const Tensor& (*)(const Tensor&);
  struct CompositeUnary {
    const char* name;
    const char* inplace_name;
    UnaryFn fn;
    UnaryInplaceFn inplace;
  };
  for (const CompositeUnary& op : {CompositeUnary{"frac", "frac_", &frac, &frac_},
                                   CompositeUnary{"deg2rad", "deg2rad_", &deg2rad, &deg2rad_},
                                   CompositeUnary{"rad2deg", "rad2deg_", &rad2deg, &rad2deg_}}) {
    m.def(op.name, op.fn, py::arg("input"));
    cls.def(op.name, op.fn);
    cls.def(op.inplace_name, op.inplace);
  }

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
  // rounding_mode's type is checked here (PyTorch's argument parsing raises TypeError); its
  // value and the math are the C++ front end's (ops/binary.h).
  auto rounding = [](py::handle mode) -> std::optional<std::string> {
    if (mode.is_none()) return std::nullopt;
    KILN_CHECK(py::isinstance<py::str>(mode), Type, "[div] rounding_mode must be None or a str, "
               "not ", py::str(py::type::handle_of(mode).attr("__name__")).cast<std::string>());
    return py::str(mode).cast<std::string>();
  };
  auto div_rounding = [rounding](const Tensor& x, const Tensor& y, py::object mode) {
    return div(x, y, rounding(mode));
  };
  m.def("div", [div_rounding](py::object a, py::object b, py::object mode) {
    return div_rounding(to_tensor_arg(a, "div", "input"), to_tensor_arg(b, "div", "other"), mode);
  }, py::arg("input"), py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none());
  cls.def("div", [div_rounding](const Tensor& a, py::object b, py::object mode) {
    return div_rounding(a, to_tensor_arg(b, "div", "other"), mode);
  }, py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none());
  cls.def("div_", [rounding](const Tensor& a, py::object b, py::object mode) {
    return div_(a, to_tensor_arg(b, "div_", "other"), rounding(mode));
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

  // Python operators (Note [Fast operators]).
#define KILN_OPERATOR(name, expr)                                  \
  struct Op##name {                                                \
    static Tensor call(const Tensor& a, const Tensor& b) { return expr; } \
  };                                                               \
  def_operator<Op##name>(cls, #name)
  KILN_OPERATOR(__add__, add(a, b));
  KILN_OPERATOR(__radd__, add(b, a));
  KILN_OPERATOR(__iadd__, add_(a, b));
  KILN_OPERATOR(__sub__, sub(a, b));
  KILN_OPERATOR(__rsub__, sub(b, a));
  KILN_OPERATOR(__isub__, sub_(a, b));
  KILN_OPERATOR(__mul__, mul(a, b));
  KILN_OPERATOR(__rmul__, mul(b, a));
  KILN_OPERATOR(__imul__, mul_(a, b));
  KILN_OPERATOR(__truediv__, div(a, b));
  KILN_OPERATOR(__rtruediv__, reflected_div(a, b));
  KILN_OPERATOR(__itruediv__, div_(a, b));
  KILN_OPERATOR(__floordiv__, floor_divide(a, b));
  KILN_OPERATOR(__rfloordiv__, floor_divide(b, a));
  KILN_OPERATOR(__ifloordiv__, floor_divide_(a, b));
  KILN_OPERATOR(__mod__, remainder(a, b));
  KILN_OPERATOR(__rmod__, remainder(b, a));
  KILN_OPERATOR(__imod__, remainder_(a, b));
  KILN_OPERATOR(__pow__, pow(a, b));
  KILN_OPERATOR(__rpow__, pow(b, a));
  KILN_OPERATOR(__ipow__, pow_(a, b));
  KILN_OPERATOR(__matmul__, matmul(a, b));
  KILN_OPERATOR(__rmatmul__, matmul(b, a));
  KILN_OPERATOR(__and__, bitwise_and(a, b));
  KILN_OPERATOR(__rand__, bitwise_and(b, a));
  KILN_OPERATOR(__iand__, bitwise_and_(a, b));
  KILN_OPERATOR(__or__, bitwise_or(a, b));
  KILN_OPERATOR(__ror__, bitwise_or(b, a));
  KILN_OPERATOR(__ior__, bitwise_or_(a, b));
  KILN_OPERATOR(__xor__, bitwise_xor(a, b));
  KILN_OPERATOR(__rxor__, bitwise_xor(b, a));
  KILN_OPERATOR(__ixor__, bitwise_xor_(a, b));
  def_slow_operator(cls, "__eq__", [](const Tensor& a, const Tensor& b) { return eq(a, b); });
  def_slow_operator(cls, "__ne__", [](const Tensor& a, const Tensor& b) { return ne(a, b); });
  KILN_OPERATOR(__lt__, lt(a, b));
  KILN_OPERATOR(__le__, le(a, b));
  KILN_OPERATOR(__gt__, gt(a, b));
  KILN_OPERATOR(__ge__, ge(a, b));
#undef KILN_OPERATOR
  cls.def("__neg__", [](const Tensor& a) { return neg(a); });
  cls.def("__pos__", [](const Tensor& a) { return a; });
  cls.def("__abs__", [](const Tensor& a) { return abs(a); });
  cls.def("__invert__", [](const Tensor& a) {
    return a.dtype() == DType::Bool ? logical_not(a) : bitwise_not(a);
  });
}

}  // namespace kiln::python
