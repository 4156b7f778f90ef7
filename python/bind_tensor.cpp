// kiln.Tensor: construction, metadata, conversion to Python/NumPy, .to().
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "core/flags.h"
#include "core/storage.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/memory_format.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"
#include "python/convert.h"
#ifdef KILN_WITH_CUDA
#include "cuda/runtime.h"
#endif

namespace py = pybind11;

namespace kiln::python {

namespace {

// Tensor.to(dtype) / to(device, dtype) / to(other) / to(dtype=, device=, ...).
Tensor tensor_to(const Tensor& self, const py::args& args, const py::kwargs& kwargs) {
  std::optional<DType> dtype;
  std::optional<Device> device;
  bool copy = false, non_blocking = false;
  MemoryFormat memory_format = MemoryFormat::Preserve;
  for (py::handle a : args) {
    DType dt;
    Device dev;
    if (dtype_from_object(a, &dt)) {
      dtype = dt;
    } else if (py::isinstance<TensorImpl>(a)) {
      Tensor other = a.cast<Tensor>();
      dtype = other.dtype();
      device = other.device();
    } else if (device_from_object(a, &dev)) {
      device = dev;
    } else if (PyBool_Check(a.ptr())) {
      non_blocking = a.cast<bool>();
    } else {
      fail(ErrorKind::Type, "[to] received an invalid combination of arguments: got ",
           std::string(py::str(py::type::of(a).attr("__name__"))));
    }
  }
  for (auto kv : kwargs) {
    std::string key = py::str(kv.first);
    if (key == "dtype") dtype = parse_dtype(kv.second, "to");
    else if (key == "device") device = parse_device(kv.second, "to");
    else if (key == "copy") copy = kv.second.cast<bool>();
    else if (key == "non_blocking") non_blocking = kv.second.cast<bool>();
    else if (key == "memory_format") memory_format = kv.second.cast<MemoryFormat>();
    else fail(ErrorKind::Type, "[to] got an unexpected keyword argument '", key, "'");
  }
  Tensor out = self;
  if (device && *device != out.device()) out = to_device(out, *device, non_blocking);
  else if (copy && !(dtype && *dtype != out.dtype())) out = clone(out);
  if (dtype) out = to_dtype(out, *dtype);
  if (memory_format != MemoryFormat::Preserve) {
    out = contiguous(out, memory_format, "to");
  } else if (!out.is_same(self)) {
    // A converted copy keeps the source's layout, as in PyTorch.
    const MemoryFormat f = suggest_memory_format(self);
    if (f != MemoryFormat::Contiguous) out = contiguous(out, f, "to");
  }
  return out;
}

}  // namespace

void init_tensor(py::module_& m, TensorClass& cls) {
  // kiln.memory_format and its four values, spelled as in PyTorch.
  py::enum_<MemoryFormat> formats(m, "memory_format");
  for (MemoryFormat f : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast,
                         MemoryFormat::ChannelsLast3d, MemoryFormat::Preserve}) {
    formats.value(memory_format_name(f), f);
    m.attr(memory_format_name(f)) = f;
  }
  formats.attr("__repr__") = py::cpp_function(
      [](MemoryFormat f) { return std::string("kiln.") + memory_format_name(f); },
      py::is_method(formats));
  // PyTorch's legacy constructor: kiln.Tensor(data) copies data into the default dtype,
  // kiln.Tensor(t) aliases t, and kiln.Tensor(3, 4) (sizes, optionally with device=) is an
  // uninitialised tensor, so kiln.Tensor(3) has three elements, not the value 3.
  cls.def(py::init([](py::args args, py::kwargs kwargs) {
            py::object device = py::none();
            for (auto item : kwargs) {
              const std::string key = py::str(item.first);
              KILN_CHECK(key == "device", Type, "[Tensor] unexpected keyword argument '", key,
                         "'; the legacy constructor takes data or sizes and device=");
              device = py::reinterpret_borrow<py::object>(item.second);
            }
            const auto is_size = [](py::handle h) {
              return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr());
            };
            bool sizes = true;
            for (py::handle a : args) sizes = sizes && is_size(a);
            if (args.size() > 0 && sizes) {
              Shape shape;
              for (py::handle a : args) shape.push_back(a.cast<int64_t>());
              const Device dev = device.is_none() ? Device{} : parse_device(device, "Tensor");
              return empty(shape, default_dtype(), dev, "Tensor").impl_ptr();
            }
            KILN_CHECK(args.size() <= 1, Type, "[Tensor] expected data or integer sizes, got ",
                       args.size(), " arguments that are not all integers");
            KILN_CHECK(device.is_none(), Type,
                       "[Tensor] device= goes with sizes only; use kiln.tensor(data, device=...)");
            if (args.size() == 0 || args[0].is_none())
              return tensor_from_data(py::list(), default_dtype(), "Tensor").impl_ptr();
            py::object data = args[0];
            if (py::isinstance<TensorImpl>(data)) return detach(data.cast<Tensor>()).impl_ptr();
            return tensor_from_data(data, default_dtype(), "Tensor").impl_ptr();
          }))
      .def_property_readonly("shape", [](const Tensor& t) { return make_size(t.sizes()); })
      .def("size",
           [](const Tensor& t, py::object dim) -> py::object {
             if (dim.is_none()) return make_size(t.sizes());
             return py::int_(t.size(dim.cast<int64_t>()));
           },
           py::arg("dim") = py::none())
      .def("stride",
           [](const Tensor& t, py::object dim) -> py::object {
             if (dim.is_none()) return py::tuple(py::cast(t.strides()));
             return py::int_(t.stride(dim.cast<int64_t>()));
           },
           py::arg("dim") = py::none())
      .def_property_readonly("dtype", [](const Tensor& t) { return t.dtype(); })
      .def_property_readonly("device", [](const Tensor& t) { return t.device(); })
      .def_property_readonly("ndim", [](const Tensor& t) { return t.dim(); })
      .def_property_readonly("is_cuda", [](const Tensor& t) { return t.device().is_cuda(); })
      .def_property_readonly("is_cpu", [](const Tensor& t) { return t.device().is_cpu(); })
      .def_property_readonly("_version", [](const Tensor& t) { return t.version(); })
      .def_property_readonly("itemsize", [](const Tensor& t) { return t.itemsize(); })
      .def_property_readonly("nbytes", [](const Tensor& t) { return t.itemsize() * t.numel(); })
      // The whole storage under a view (kiln/_storage.py's UntypedStorage).
      .def("_storage_nbytes", [](const Tensor& t) { return t.storage() ? t.storage()->nbytes : 0; })
      .def("_storage_ptr",
           [](const Tensor& t) {
             return reinterpret_cast<uintptr_t>(t.storage() ? t.storage()->data.get() : nullptr);
           })
      .def("dim", [](const Tensor& t) { return t.dim(); })
      .def("ndimension", [](const Tensor& t) { return t.dim(); })
      .def("numel", [](const Tensor& t) { return t.numel(); })
      .def("nelement", [](const Tensor& t) { return t.numel(); })
      .def("element_size", [](const Tensor& t) { return t.itemsize(); })
      .def("storage_offset", [](const Tensor& t) { return t.storage_offset(); })
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("is_contiguous", [](const Tensor& t, MemoryFormat f) { return is_contiguous(t, f); },
           py::arg("memory_format") = MemoryFormat::Contiguous)
      .def("is_floating_point", [](const Tensor& t) { return is_floating(t.dtype()); })
      .def("is_signed", [](const Tensor& t) { return is_signed(t.dtype()); })
      .def("get_device", [](const Tensor& t) { return t.device().is_cpu() ? -1 : int(t.device().index); })
      .def("contiguous", [](const Tensor& t, MemoryFormat f) { return contiguous(t, f); },
           py::arg("memory_format") = MemoryFormat::Contiguous)
      .def("clone", [](const Tensor& t, MemoryFormat f) { return clone(t, f); },
           py::arg("memory_format") = MemoryFormat::Preserve)
      .def("detach", [](const Tensor& t) { return detach(t); })
      .def("copy_", [](const Tensor& self, py::object src, bool) {
             return copy_(self, to_tensor_arg(src, "copy_", "src"));
           }, py::arg("src"), py::arg("non_blocking") = false)
      .def("item", [](const Tensor& t) { return item(t); })
      .def("tolist", [](const Tensor& t) { return to_list(t); })
      .def("numpy", [](const Tensor& t, bool force) {
             return to_numpy(force ? detach(t) : t);
           }, py::arg("force") = false)
      .def("__array__", [](const Tensor& t, py::object dtype, py::object) {
             py::object a = to_numpy(detach(t));
             return dtype.is_none() ? a : a.attr("astype")(dtype);
           }, py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("to", &tensor_to)
      .def("cpu", [](const Tensor& t) { return to_device(t, Device()); })
      .def("cuda", [](const Tensor& t, py::object device, bool non_blocking) {
             Device d(DeviceType::CUDA, 0);
             if (!device.is_none()) d = parse_device(device, "cuda");
             if (d.is_cpu()) d = Device(DeviceType::CUDA, 0);
             return to_device(t, d, non_blocking);
           }, py::arg("device") = py::none(), py::arg("non_blocking") = false)
      .def("type_as", [](const Tensor& t, const Tensor& o) { return to_dtype(t, o.dtype()); })
      .def("__len__", [](const Tensor& t) {
             KILN_CHECK(t.dim() > 0, Type, "len() of a 0-d tensor");
             return t.size(0);
           })
      .def("__bool__", [](const Tensor& t) {
             KILN_CHECK(t.numel() == 1, Runtime, "Boolean value of Tensor with ", t.numel(),
                        " values is ambiguous");
             return item(t).cast<bool>();
           })
      .def("__float__", [](const Tensor& t) { return item(t).cast<double>(); })
      .def("__int__", [](const Tensor& t) { return py::int_(item(t)); })
      .def("__index__", [](const Tensor& t) {
             KILN_CHECK(!is_floating(t.dtype()) && t.dtype() != DType::Bool && t.numel() == 1,
                        Type, "only integer tensors of a single element can be converted to an "
                        "index");
             return item(t);
           })
      .def("__hash__", [](py::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); })
      .def_property_readonly_static("__array_priority__", [](py::object) { return 1000; });

  m.def("from_numpy", [](py::object a) { return from_numpy(a); }, py::arg("ndarray"));
  m.def("tensor", [](py::object data, py::object dtype, py::object device, bool requires_grad,
                     bool pin_memory) {
          Tensor t = tensor_from_data(data, parse_dtype(dtype, "tensor"), "tensor");
          Device d = parse_device(device, "tensor");
          if (d != t.device()) t = to_device(t, d);
          if (requires_grad) t.set_requires_grad(true);
          return t;
        },
        py::arg("data"), py::kw_only(), py::arg("dtype") = py::none(),
        py::arg("device") = py::none(), py::arg("requires_grad") = false,
        py::arg("pin_memory") = false);
  m.def("as_tensor", [](py::object data, py::object dtype, py::object device) {
          std::optional<DType> dt = parse_dtype(dtype, "as_tensor");
          Device d = parse_device(device, "as_tensor");
          Tensor t;
          if (py::isinstance<TensorImpl>(data)) t = data.cast<Tensor>();
          else if (py::isinstance<py::array>(data)) t = from_numpy(data);
          else t = tensor_from_data(data, dt, "as_tensor");
          if (dt && *dt != t.dtype()) t = to_dtype(t, *dt);
          if (!device.is_none() && d != t.device()) t = to_device(t, d);
          return t;
        },
        py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def("is_tensor", [](py::handle h) { return py::isinstance<TensorImpl>(h); });
  // PyTorch's predicates for what kiln has no tensors of: other devices (meta, XPU, MPS,
  // ...), quantized, MKL-DNN and nested layouts, complex dtypes, and lazily conjugated or
  // negated views. All are False here; a program that asks gets PyTorch's answer for a
  // CPU or CUDA tensor.
  for (const char* name : {"is_meta", "is_xpu", "is_mps", "is_ipu", "is_xla", "is_hpu",
                           "is_maia", "is_mtia", "is_vulkan", "is_quantized", "is_mkldnn",
                           "is_nested"})
    cls.def_property_readonly(name, [](const Tensor&) { return false; });
  for (const char* name : {"is_complex", "is_conj", "is_neg", "is_inference"}) {
    cls.def(name, [](const Tensor&) { return false; });
    m.def(name, [](const Tensor&) { return false; }, py::arg("input"));
  }
  m.def("is_signed", [](const Tensor& t) { return is_signed(t.dtype()); }, py::arg("input"));
  m.def("clone", [](const Tensor& t, MemoryFormat f) { return clone(t, f); }, py::arg("input"),
        py::kw_only(), py::arg("memory_format") = MemoryFormat::Preserve);
  m.def("detach", [](const Tensor& t) { return detach(t); }, py::arg("input"));

  // Tensor.float(), .long(), ...: the input itself when it already has the dtype.
  static const std::pair<const char*, DType> conversions[] = {
      {"float", DType::Float32}, {"double", DType::Float64}, {"half", DType::Float16},
      {"bfloat16", DType::BFloat16}, {"long", DType::Int64}, {"int", DType::Int32},
      {"short", DType::Int16}, {"char", DType::Int8}, {"byte", DType::UInt8},
      {"bool", DType::Bool}};
  for (const auto& [name, dtype] : conversions) {
    cls.def(name, [dt = dtype](const Tensor& t, py::kwargs) { return to_dtype(t, dt); });
  }

  // Page-locked host memory and cross-stream use (cuda/runtime.h).
  cls.def("is_pinned", [](const Tensor& t, py::object) {
    return t.device().is_cpu() && t.storage() && t.storage()->pinned;
  }, py::arg("device") = py::none());
#ifdef KILN_WITH_CUDA
  cls.def("pin_memory", [](const Tensor& t, py::object) { return cuda::pin_memory(t); },
          py::arg("device") = py::none());
  cls.def("record_stream", [](const Tensor& t, py::object stream) {
    cuda::record_stream(t, reinterpret_cast<cuda::StreamHandle>(
                               stream.attr("cuda_stream").cast<uintptr_t>()));
  }, py::arg("stream"));
#else
  cls.def("pin_memory", [](const Tensor&, py::object) -> Tensor {
    fail(ErrorKind::Runtime, "[pin_memory] kiln was built without CUDA: pinned memory needs it");
  }, py::arg("device") = py::none());
#endif
}

}  // namespace kiln::python
