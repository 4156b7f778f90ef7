// Factories: kiln.zeros(2, 3), kiln.zeros((2, 3), dtype=..., device=...), ...
#include <pybind11/stl.h>

#include "core/error.h"
#include "core/flags.h"
#include "ops/creation.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// *_like's memory_format defaults to preserve_format: a channels-last input
// gets a channels-last result, as in PyTorch.
void like_layout(FactoryOptions& o, const Tensor& like) {
  if (!o.memory_format || *o.memory_format == MemoryFormat::Preserve)
    o.memory_format = suggest_memory_format(like);
}

// Default dtype of full(): follows the fill value, as in PyTorch.
DType fill_dtype(Scalar v) {
  return v.is_floating() ? default_dtype() : v.is_bool() ? DType::Bool : DType::Int64;
}

}  // namespace

void init_creation(py::module_& m, TensorClass& cls) {
  m.def("empty", [](py::args args, py::kwargs kw) {
    auto o = parse_factory_options(kw, "empty", false, true);
    return finish_factory(empty(factory_shape(args, o, "empty"), o.dtype.value_or(default_dtype()),
                                o.device.value_or(Device())),
                          o);
  });
  m.def("zeros", [](py::args args, py::kwargs kw) {
    auto o = parse_factory_options(kw, "zeros", false, true);
    return finish_factory(zeros(factory_shape(args, o, "zeros"), o.dtype.value_or(default_dtype()),
                                o.device.value_or(Device())),
                          o);
  });
  m.def("ones", [](py::args args, py::kwargs kw) {
    auto o = parse_factory_options(kw, "ones", false, true);
    return finish_factory(ones(factory_shape(args, o, "ones"), o.dtype.value_or(default_dtype()),
                               o.device.value_or(Device())),
                          o);
  });
  m.def(
      "full",
      [](py::object size, Scalar value, py::kwargs kw) {
        auto o = parse_factory_options(kw, "full");
        return finish_factory(
            full(parse_shape_object(size, "full"), value, o.dtype.value_or(fill_dtype(value)),
                 o.device.value_or(Device())),
            o);
      },
      py::arg("size"), py::arg("fill_value"));

  // *_like: dtype/device default to the input's.
  auto like = [&m](const char* name, auto make) {
    m.def(
        name,
        [name, make](const Tensor& t, py::kwargs kw) {
          auto o = parse_factory_options(kw, name);
          like_layout(o, t);
          Device d = o.device.value_or(t.device());
          return finish_factory(make(t.sizes(), o.dtype.value_or(t.dtype()), d, name), o);
        },
        py::arg("input"));
  };
  like("empty_like", &empty);
  like("zeros_like", &zeros);
  like("ones_like", &ones);
  m.def(
      "full_like",
      [](const Tensor& t, Scalar v, py::kwargs kw) {
        auto o = parse_factory_options(kw, "full_like");
        like_layout(o, t);
        Device d = o.device.value_or(t.device());
        return finish_factory(full(t.sizes(), v, o.dtype.value_or(t.dtype()), d, "full_like"), o);
      },
      py::arg("input"), py::arg("fill_value"));

  m.def(
      "arange",
      [](Scalar a, py::object b, Scalar step, py::kwargs kw) {
        auto o = parse_factory_options(kw, "arange");
        Scalar start = 0, end = a;
        if (!b.is_none()) {
          start = a;
          KILN_CHECK(scalar_from_object(b, &end), Type, "[arange] end must be a number");
        }
        return finish_factory(arange(start, end, step, o.dtype, o.device.value_or(Device())), o);
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = Scalar(1));
  m.def(
      "linspace",
      [](double start, double end, int64_t steps, py::kwargs kw) {
        auto o = parse_factory_options(kw, "linspace");
        return finish_factory(linspace(start, end, steps, o.dtype.value_or(default_dtype()),
                                       o.device.value_or(Device())),
                              o);
      },
      py::arg("start"), py::arg("end"), py::arg("steps"));
  m.def(
      "logspace",
      [](double start, double end, int64_t steps, double base, py::kwargs kw) {
        auto o = parse_factory_options(kw, "logspace");
        return finish_factory(logspace(start, end, steps, base, o.dtype.value_or(default_dtype()),
                                       o.device.value_or(Device())),
                              o);
      },
      py::arg("start"), py::arg("end"), py::arg("steps"), py::arg("base") = 10.0);
  m.def(
      "eye",
      [](int64_t n, std::optional<int64_t> mcols, py::kwargs kw) {
        auto o = parse_factory_options(kw, "eye");
        return finish_factory(
            eye(n, mcols, o.dtype.value_or(default_dtype()), o.device.value_or(Device())), o);
      },
      py::arg("n"), py::arg("m") = py::none());
  m.def(
      "scalar_tensor",
      [](Scalar v, py::kwargs kw) {
        auto o = parse_factory_options(kw, "scalar_tensor");
        return finish_factory(
            scalar_tensor(v, o.dtype.value_or(default_dtype()), o.device.value_or(Device())), o);
      },
      py::arg("s"));

  cls.def(
      "fill_", [](const Tensor& t, Scalar v) { return fill_(t, v); }, py::arg("value"));
  cls.def("zero_", [](const Tensor& t) { return zero_(t); });
  // Tensor.new_zeros(2, 3) / new_zeros((2, 3)): the source's dtype and device by default.
  using Make = Tensor (*)(const Shape&, DType, Device, const char*);
  for (auto [name, make] : std::initializer_list<std::pair<const char*, Make>>{
           {"new_zeros", &zeros}, {"new_ones", &ones}, {"new_empty", &empty}}) {
    cls.def(name, [name = name, make = make](const Tensor& t, py::args size, py::kwargs kw) {
      auto o = parse_factory_options(kw, name, false, true);
      return finish_factory(make(factory_shape(size, o, name), o.dtype.value_or(t.dtype()),
                                 o.device.value_or(t.device()), name),
                            o);
    });
  }
  cls.def(
      "new_full",
      [](const Tensor& t, py::object size, Scalar v, py::kwargs kw) {
        auto o = parse_factory_options(kw, "new_full");
        return finish_factory(
            full(parse_shape_object(size, "new_full"), v, o.dtype.value_or(t.dtype()),
                 o.device.value_or(t.device()), "new_full"),
            o);
      },
      py::arg("size"), py::arg("fill_value"));
}

}  // namespace kiln::python
