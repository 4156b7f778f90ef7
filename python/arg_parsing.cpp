#include "python/arg_parsing.h"

#include "core/error.h"
#include "ops/creation.h"
#include "python/convert.h"

namespace kiln::python {

namespace {
std::string type_name(py::handle h) { return py::str(py::type::of(h).attr("__name__")); }
}  // namespace

bool scalar_from_object(py::handle h, Scalar* out) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) {
    *out = Scalar(o == Py_True);
    return true;
  }
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    KILN_CHECK(overflow == 0, Runtime, "Overflow when unpacking long: ", std::string(py::str(h)),
               " does not fit in int64");
    *out = Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (PyFloat_Check(o)) {
    *out = Scalar(PyFloat_AS_DOUBLE(o));
    return true;
  }
  if (py::isinstance<TensorImpl>(h)) {
    Tensor t = h.cast<Tensor>();
    if (t.numel() != 1) return false;
    return scalar_from_object(item(t), out);
  }
  // NumPy scalars and 0-d arrays.
  if (py::hasattr(h, "dtype") && py::hasattr(h, "item") && py::hasattr(h, "shape") &&
      py::len(h.attr("shape")) == 0) {
    return scalar_from_object(h.attr("item")(), out);
  }
  return false;
}

bool try_tensor_arg(py::handle h, Tensor* out) {
  py::detail::make_caster<Tensor> tensor;
  if (tensor.load(h, false)) {
    *out = py::detail::cast_op<Tensor&&>(std::move(tensor));
    return true;
  }
  Scalar s;
  if (scalar_from_object(h, &s)) {
    *out = wrapped_scalar(s);
    return true;
  }
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h) ||
      py::hasattr(h, "__array_interface__")) {
    *out = tensor_from_data(h, std::nullopt, "tensor");
    return true;
  }
  return false;
}

Tensor to_tensor_arg(py::handle h, const char* op, const char* arg) {
  Tensor t;
  KILN_CHECK(try_tensor_arg(h, &t), Type, "[", op, "] argument '", arg,
             "' must be Tensor or a number, not ", type_name(h));
  return t;
}

namespace {
// Python ints and int-likes (NumPy integers, integer 0-d tensors), but not bools.
bool is_int_like(py::handle h) {
  return !PyBool_Check(h.ptr()) && (PyLong_Check(h.ptr()) || PyIndex_Check(h.ptr()));
}
int64_t as_int(py::handle h) {
  return py::int_(py::reinterpret_borrow<py::object>(h)).cast<int64_t>();
}
}  // namespace

Shape parse_shape_object(py::handle h, const char* op) {
  if (is_int_like(h)) return {as_int(h)};
  KILN_CHECK(py::isinstance<py::sequence>(h) && !py::isinstance<py::str>(h), Type, "[", op,
             "] size must be a tuple of ints, but got ", type_name(h));
  Shape s;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(h)) {
    KILN_CHECK(is_int_like(item), Type, "[", op,
               "] size must be a tuple of ints, but found element of type ", type_name(item));
    s.push_back(as_int(item));
  }
  return s;
}

Shape parse_shape(const py::args& args, const char* op) {
  if (args.size() == 1 && !is_int_like(args[0])) return parse_shape_object(args[0], op);
  Shape s;
  for (py::handle item : args) {
    KILN_CHECK(is_int_like(item), Type, "[", op,
               "] size must be a tuple of ints, but found element of type ", type_name(item));
    s.push_back(as_int(item));
  }
  return s;
}

std::optional<std::vector<int64_t>> parse_dims(py::handle h, const char* op) {
  if (h.is_none()) return std::nullopt;
  return parse_shape_object(h, op);
}

std::optional<DType> parse_dtype(py::handle h, const char* op) {
  if (h.is_none()) return std::nullopt;
  DType d;
  KILN_CHECK(dtype_from_object(h, &d), Type, "[", op, "] dtype must be a kiln.dtype, not ",
             type_name(h));
  return d;
}

Device parse_device(py::handle h, const char* op) {
  if (h.is_none()) return Device();
  Device d;
  KILN_CHECK(device_from_object(h, &d), Type, "[", op,
             "] device must be a kiln.device, string or int, not ", type_name(h));
  return d;
}

FactoryOptions parse_factory_options(const py::kwargs& kwargs, const char* op, bool allow_generator,
                                     bool allow_size) {
  FactoryOptions o;
  o.op = op;
  for (auto kv : kwargs) {
    std::string key = py::str(kv.first);
    if (key == "dtype")
      o.dtype = parse_dtype(kv.second, op);
    else if (key == "device")
      o.device = parse_device(kv.second, op);
    else if (key == "requires_grad")
      o.requires_grad = kv.second.cast<bool>();
    else if (key == "generator" && allow_generator)
      o.generator = py::reinterpret_borrow<py::object>(kv.second);
    else if (key == "size" && allow_size)
      o.size = parse_shape_object(kv.second, op);
    else if (key == "memory_format")
      o.memory_format = kv.second.cast<MemoryFormat>();
    else if (key == "pin_memory" || key == "layout")
      continue;
    else
      fail(ErrorKind::Type, "[", op, "] got an unexpected keyword argument '", key, "'");
  }
  return o;
}

Shape factory_shape(const py::args& args, const FactoryOptions& o, const char* op) {
  KILN_CHECK(!(o.size && args.size() > 0), Type, "[", op,
             "] size given both positionally and as a keyword");
  if (o.size) return *o.size;
  KILN_CHECK(args.size() > 0, Type, "[", op, "] missing required argument 'size'");
  return parse_shape(args, op);
}

Tensor finish_factory(Tensor t, const FactoryOptions& o) {
  if (o.memory_format && *o.memory_format != MemoryFormat::Preserve)
    t = contiguous(t, *o.memory_format, o.op);
  if (o.requires_grad) t.set_requires_grad(true);
  return t;
}

py::object make_size(const Shape& s) {
  // Leaked on purpose: must outlive interpreter teardown.
  static py::handle size_type = [] {
    return py::object(py::module_::import("kiln._size").attr("Size")).release();
  }();
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return size_type(t);
}

}  // namespace kiln::python
