// kiln.dtype objects (kiln.float32, ...) and kiln.device.
#include <pybind11/operators.h>
#include <pybind11/pybind11.h>

#include <array>

#include "core/error.h"
#include "core/promotion.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"
#include "python/casters.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// What the Python dtype object wraps.
struct PyDType {
  DType value;
};

struct PyDevice {
  Device value;
};

std::array<py::object, kNumDTypes>& dtype_objects() {
  // Leaked on purpose: these must outlive interpreter teardown.
  static auto* objects = new std::array<py::object, kNumDTypes>();
  return *objects;
}

}  // namespace

py::object dtype_object(DType t) { return dtype_objects()[static_cast<int>(t)]; }

bool dtype_from_object(py::handle h, DType* out) {
  if (!py::isinstance<PyDType>(h)) return false;
  *out = h.cast<const PyDType&>().value;
  return true;
}

py::object device_object(Device d) { return py::cast(PyDevice{d}); }

bool device_from_object(py::handle h, Device* out) {
  if (py::isinstance<PyDevice>(h)) {
    *out = h.cast<const PyDevice&>().value;
    return true;
  }
  if (py::isinstance<py::str>(h)) {
    *out = Device(h.cast<std::string>());
    return true;
  }
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
    long long i = h.cast<long long>();
    KILN_CHECK(i >= 0, Runtime, "[device] Device index must not be negative, got ", i);
    *out = Device(DeviceType::CUDA, static_cast<int>(i));
    return true;
  }
  return false;
}

void init_dtype_device(py::module_& m) {
  py::class_<PyDType>(m, "dtype")
      .def_property_readonly("is_floating_point",
                             [](const PyDType& d) { return is_floating(d.value); })
      .def_property_readonly("is_signed", [](const PyDType& d) { return is_signed(d.value); })
      .def_property_readonly("is_complex", [](const PyDType&) { return false; })  // none in kiln
      .def_property_readonly("itemsize", [](const PyDType& d) { return itemsize(d.value); })
      .def("__repr__",
           [](const PyDType& d) { return std::string("kiln.") + dtype_name(d.value); })
      .def("__reduce__", [](const PyDType& d) { return std::string(dtype_name(d.value)); });

#define KILN_BIND_DTYPE(ctype, name, pyname)                        \
  dtype_objects()[static_cast<int>(DType::name)] = py::cast(PyDType{DType::name}); \
  m.attr(#pyname) = dtype_objects()[static_cast<int>(DType::name)];
  KILN_FORALL_DTYPES(KILN_BIND_DTYPE)
#undef KILN_BIND_DTYPE
  // PyTorch's aliases.
  m.attr("float") = m.attr("float32");
  m.attr("double") = m.attr("float64");
  m.attr("half") = m.attr("float16");
  m.attr("long") = m.attr("int64");
  m.attr("int") = m.attr("int32");
  m.attr("short") = m.attr("int16");

  // Promotion queries: the rules every op already applies (core/promotion.h).
  m.def(
      "result_type",
      [](py::handle a, py::handle b) {
        return result_type(to_tensor_arg(a, "result_type", "tensor1"),
                           to_tensor_arg(b, "result_type", "tensor2"));
      },
      py::arg("tensor1"), py::arg("tensor2"));
  m.def("promote_types", [](DType a, DType b) { return promote_types(a, b); }, py::arg("type1"),
        py::arg("type2"));
  m.def("can_cast", [](DType from, DType to) { return can_cast(from, to); }, py::arg("from_"),
        py::arg("to"));

  py::class_<PyDevice>(m, "device")
      .def(py::init([](py::object spec, py::object index) {
             Device d;
             KILN_CHECK(device_from_object(spec, &d), Type,
                        "[device] expected a string, device or int, got ",
                        std::string(py::str(py::type::of(spec).attr("__name__"))));
             if (!index.is_none()) {
               KILN_CHECK(d.index < 0, Runtime, "[device] type (string) must not include an "
                          "index because index was passed explicitly: ", d.str());
               int i = index.cast<int>();
               KILN_CHECK(i >= 0, Runtime, "[device] Device index must not be negative, got ", i);
               KILN_CHECK(!d.is_cpu() || i == 0, Runtime, "[device] cpu has only index 0");
               if (d.is_cuda()) d.index = static_cast<int8_t>(i);
             }
             return PyDevice{d};
           }),
           py::arg("type"), py::arg("index") = py::none())
      .def_property_readonly("type",
                             [](const PyDevice& d) { return d.value.is_cpu() ? "cpu" : "cuda"; })
      .def_property_readonly("index",
                             [](const PyDevice& d) -> py::object {
                               if (d.value.index < 0) return py::none();
                               return py::int_(d.value.index);
                             })
      .def("__str__", [](const PyDevice& d) { return d.value.str(); })
      .def("__repr__",
           [](const PyDevice& d) {
             std::string r = std::string("device(type='") + (d.value.is_cpu() ? "cpu" : "cuda") + "'";
             if (d.value.index >= 0) r += ", index=" + std::to_string(d.value.index);
             return r + ")";
           })
      .def("__eq__",
           [](const PyDevice& d, py::object other) {
             Device o;
             return device_from_object(other, &o) && o == d.value;
           })
      .def("__hash__", [](const PyDevice& d) {
        return static_cast<int>(d.value.type) * 1000 + d.value.index;
      })
      // Pickled as kiln.device(type, index), so devices cross process boundaries
      // (kiln.multiprocessing, DataLoader workers) and sit in pickled objects.
      .def("__reduce__", [](py::object self) {
        const Device& d = self.cast<const PyDevice&>().value;
        py::object index = d.index < 0 ? py::object(py::none()) : py::object(py::int_(d.index));
        return py::make_tuple(py::type::of(self),
                              py::make_tuple(d.is_cpu() ? "cpu" : "cuda", index));
      });
}

}  // namespace kiln::python
