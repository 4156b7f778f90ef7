// Bindings of ops/special.h and polygamma (ops/unary.h): kiln.xlogy, kiln.logaddexp, ...
// and the private _special_* functions that python/kiln/special.py names.
#include <pybind11/stl.h>

#include <optional>

#include "ops/elementwise.h"
#include "ops/special.h"
#include "ops/unary.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

using Unary = Tensor (*)(const Tensor&);
using UnaryInplace = const Tensor& (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);
using BinaryInplace = const Tensor& (*)(const Tensor&, const Tensor&);

// op(input, <other>) with either operand a Python number; <other> is PyTorch's name
// of the second argument.
void def_binary(py::module_& m, TensorClass& cls, const char* name, const char* other, Binary fn,
                BinaryInplace fn_) {
  m.def(
      name,
      [fn, name](py::object a, py::object b) {
        return fn(to_tensor_arg(a, name, "input"), to_tensor_arg(b, name, "other"));
      },
      py::arg("input"), py::arg(other));
  cls.def(
      name,
      [fn, name](const Tensor& a, py::object b) { return fn(a, to_tensor_arg(b, name, "other")); },
      py::arg(other));
  if (fn_) {
    const std::string inplace = std::string(name) + "_";
    cls.def(
        inplace.c_str(),
        [fn_, name](const Tensor& a, py::object b) {
          return fn_(a, to_tensor_arg(b, name, "other"));
        },
        py::arg(other));
  }
}

// clamp_min / clamp_max: a number bound keeps clamp's scalar path (integer tensors
// stay integer under an integer bound); a tensor bound broadcasts.
template <bool IsMin>
Tensor clamp_one(const Tensor& x, py::object bound) {
  const char* name = IsMin ? "clamp_min" : "clamp_max";
  Scalar s;
  if (!py::isinstance<TensorImpl>(bound) && scalar_from_object(bound, &s))
    return IsMin ? clamp_min(x, s) : clamp_max(x, s);
  Tensor t = to_tensor_arg(bound, name, IsMin ? "min" : "max");
  return IsMin ? clamp_min(x, t) : clamp_max(x, t);
}

template <bool IsMin>
void def_clamp_one(py::module_& m, TensorClass& cls) {
  const char* name = IsMin ? "clamp_min" : "clamp_max";
  const char* arg = IsMin ? "min" : "max";
  m.def(name, &clamp_one<IsMin>, py::arg("input"), py::arg(arg));
  cls.def(name, &clamp_one<IsMin>, py::arg(arg));
  cls.def((std::string(name) + "_").c_str(),
          [](const Tensor& x, py::object bound) {
            Tensor t = py::isinstance<TensorImpl>(bound) ? bound.cast<Tensor>() : Tensor();
            return assign_inplace(x, {t}, IsMin ? "clamp_min_" : "clamp_max_",
                                  [&](const Tensor& s) { return clamp_one<IsMin>(s, bound); });
          },
          py::arg(arg));
}

}  // namespace

void init_special(py::module_& m, TensorClass& cls) {
  struct Fn1 {
    const char* name;
    Unary fn;
    UnaryInplace fn_;  // nullptr: PyTorch has no in-place form
    bool method;
  };
  for (const Fn1& op :
       {Fn1{"sgn", &sgn, &sgn_, true}, Fn1{"positive", &positive, nullptr, true},
        Fn1{"fix", &fix, &fix_, true}, Fn1{"sinc", &sinc, &sinc_, true},
        Fn1{"isneginf", &isneginf, nullptr, true}, Fn1{"isposinf", &isposinf, nullptr, true},
        Fn1{"isreal", &isreal, nullptr, true}, Fn1{"_special_i1", &special_i1, nullptr, false},
        Fn1{"_special_ndtr", &special_ndtr, nullptr, false},
        Fn1{"_special_ndtri", &special_ndtri, nullptr, false},
        Fn1{"_special_log_ndtr", &special_log_ndtr, nullptr, false},
        Fn1{"_special_entr", &special_entr, nullptr, false}}) {
    m.def(op.name, op.fn, py::arg("input"));
    if (!op.method) continue;
    cls.def(op.name, op.fn);
    if (op.fn_) cls.def((std::string(op.name) + "_").c_str(), op.fn_);
  }

  m.def(
      "logit", [](const Tensor& x, std::optional<double> eps) { return logit(x, eps); },
      py::arg("input"), py::arg("eps") = py::none());
  cls.def(
      "logit", [](const Tensor& x, std::optional<double> eps) { return logit(x, eps); },
      py::arg("eps") = py::none());
  cls.def(
      "logit_", [](const Tensor& x, std::optional<double> eps) { return logit_(x, eps); },
      py::arg("eps") = py::none());

  m.def(
      "polygamma", [](int64_t n, const Tensor& x) { return polygamma(n, x); }, py::arg("n"),
      py::arg("input"));
  cls.def(
      "polygamma", [](const Tensor& x, int64_t n) { return polygamma(n, x); }, py::arg("n"));
  cls.def(
      "polygamma_", [](const Tensor& x, int64_t n) { return polygamma_(x, n); }, py::arg("n"));

  def_binary(m, cls, "xlogy", "other", &xlogy, &xlogy_);
  def_binary(m, cls, "logaddexp", "other", &logaddexp, nullptr);
  def_binary(m, cls, "logaddexp2", "other", &logaddexp2, nullptr);
  def_binary(m, cls, "hypot", "other", &hypot, &hypot_);
  def_binary(m, cls, "copysign", "other", &copysign, &copysign_);
  def_binary(m, cls, "ldexp", "other", &ldexp, &ldexp_);
  def_binary(m, cls, "float_power", "exponent", &float_power, &float_power_);
  m.def(
      "_special_xlog1py",
      [](py::object a, py::object b) {
        return special_xlog1py(to_tensor_arg(a, "xlog1py", "input"),
                               to_tensor_arg(b, "xlog1py", "other"));
      },
      py::arg("input"), py::arg("other"));

  // values must be a tensor, as in PyTorch.
  m.def(
      "heaviside", [](const Tensor& x, const Tensor& v) { return heaviside(x, v); },
      py::arg("input"), py::arg("values"));
  cls.def(
      "heaviside", [](const Tensor& x, const Tensor& v) { return heaviside(x, v); },
      py::arg("values"));
  cls.def(
      "heaviside_", [](const Tensor& x, const Tensor& v) { return heaviside_(x, v); },
      py::arg("values"));

  def_clamp_one<true>(m, cls);
  def_clamp_one<false>(m, cls);

  m.def(
      "isin",
      [](py::object elements, py::object test, bool assume_unique, bool invert) {
        return isin(to_tensor_arg(elements, "isin", "elements"),
                    to_tensor_arg(test, "isin", "test_elements"), assume_unique, invert);
      },
      py::arg("elements"), py::arg("test_elements"), py::kw_only(),
      py::arg("assume_unique") = false, py::arg("invert") = false);
}

}  // namespace kiln::python
