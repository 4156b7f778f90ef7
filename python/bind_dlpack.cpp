// The Python DLPack protocol: Tensor.__dlpack__ / __dlpack_device__, kiln.from_dlpack and
// kiln.to_dlpack (re-exported by kiln.utils.dlpack). The conversions themselves are in
// core/dlpack.cpp; this file wraps them in PyCapsules and handles CUDA streams.
//
// Note [DLPack capsules and streams]
// A capsule named "dltensor" ("dltensor_versioned") carries a DLManagedTensor(Versioned).
// The consumer renames it to "used_dltensor" ("used_dltensor_versioned") once it owns the
// struct; the capsule's destructor calls the deleter only while the capsule is unconsumed,
// so a capsule nobody took (an error in the consumer, a dropped result) frees itself and
// a consumed one is never freed twice. For CUDA tensors the consumer names, in `stream`, the
// stream it will use the data on; the producer makes that stream wait (an event, no host
// sync) for the work queued so far on its own current stream. kiln passes its current
// stream when it consumes, so foreign data is ready for the next kiln kernel.
#include <Python.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/dlpack.h"
#include "core/error.h"
#include "ops/copy.h"
#include "python/bindings.h"
#ifdef KILN_WITH_CUDA
#include "cuda/runtime.h"
#endif

namespace py = pybind11;

namespace kiln::python {

namespace {

using namespace kiln::dlpack;

std::string type_name(py::handle h) {
  return py::str(py::type::of(h).attr("__name__")).cast<std::string>();
}

// Unconsumed capsules free their struct. The deleter may run Python code (a from_numpy
// storage drops its array), so an exception in flight is set aside meanwhile.
template <class M>
void destroy_capsule(PyObject* capsule, const char* name) {
  if (!PyCapsule_IsValid(capsule, name)) return;
  py::error_scope keep_error;
  auto* m = static_cast<M*>(PyCapsule_GetPointer(capsule, name));
  if (m && m->deleter) m->deleter(m);
}

void destroy_unversioned(PyObject* c) { destroy_capsule<DLManagedTensor>(c, kCapsuleName); }
void destroy_versioned(PyObject* c) {
  destroy_capsule<DLManagedTensorVersioned>(c, kVersionedCapsuleName);
}

py::object make_capsule(void* managed, const char* name, PyCapsule_Destructor destroy) {
  PyObject* c = PyCapsule_New(managed, name, destroy);
  if (!c) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(c);
}

py::object export_capsule(const Tensor& t, bool versioned, uint64_t flags) {
  if (versioned) {
    DLManagedTensorVersioned* m = to_dlpack_versioned(t, flags);
    try {
      return make_capsule(m, kVersionedCapsuleName, &destroy_versioned);
    } catch (...) {
      m->deleter(m);
      throw;
    }
  }
  DLManagedTensor* m = to_dlpack(t);
  try {
    return make_capsule(m, kCapsuleName, &destroy_unversioned);
  } catch (...) {
    m->deleter(m);
    throw;
  }
}

// Takes ownership of the capsule's struct (renaming it "used_*") only once the tensor exists.
template <class M>
Tensor consume(PyObject* capsule, const char* name, const char* used_name) {
  auto* m = static_cast<M*>(PyCapsule_GetPointer(capsule, name));
  if (!m) throw py::error_already_set();
  Tensor t = kiln::dlpack::from_dlpack(m, "from_dlpack");
  if (PyCapsule_SetName(capsule, used_name) != 0) throw py::error_already_set();
  return t;
}

Tensor import_capsule(py::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, kVersionedCapsuleName)) {
    auto* m =
        static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersionedCapsuleName));
    const bool read_only = m && (m->flags & kFlagReadOnly);
    Tensor t =
        consume<DLManagedTensorVersioned>(c, kVersionedCapsuleName, kUsedVersionedCapsuleName);
    // As torch.from_numpy does for non-writable arrays: kiln has no read-only tensors.
    if (read_only &&
        PyErr_WarnEx(PyExc_UserWarning,
                     "[from_dlpack] the DLPack tensor is marked read-only; kiln does not "
                     "support read-only tensors, so writing to this tensor is undefined behavior",
                     1) < 0) {
      throw py::error_already_set();
    }
    return t;
  }
  if (PyCapsule_IsValid(c, kCapsuleName)) {
    return consume<DLManagedTensor>(c, kCapsuleName, kUsedCapsuleName);
  }
  const char* name = PyCapsule_GetName(c);
  if (!name) PyErr_Clear();
  const std::string got = name ? name : "";
  KILN_CHECK(got != kUsedCapsuleName && got != kUsedVersionedCapsuleName, Runtime,
             "[from_dlpack] this DLPack capsule ('", got,
             "') was already consumed: a capsule "
             "makes one tensor; call __dlpack__() again for another");
  fail(ErrorKind::Runtime,
       "[from_dlpack] expected a DLPack capsule named 'dltensor' or "
       "'dltensor_versioned', got a capsule named '",
       got, "'");
}

// An int argument of `op`, or TypeError naming `what` (pybind11's cast message names no argument).
int64_t int_arg(py::handle h, const char* op, const char* what) {
  long long v = 0;
  int overflow = 1;  // stays set for non-ints
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
    v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  }
  if (overflow != 0) {
    throw py::type_error(std::string("[") + op + "] " + what + " must be a 64-bit int, got " +
                         std::string(py::repr(h)));
  }
  return v;
}

std::optional<bool> parse_copy(py::handle copy) {
  if (copy.is_none()) return std::nullopt;
  if (!PyBool_Check(copy.ptr())) {
    throw py::type_error("[__dlpack__] copy must be a bool or None, got " + type_name(copy));
  }
  return copy.ptr() == Py_True;
}

DLDevice parse_dl_device(py::handle dl_device, const char* op) {
  auto fields = py::reinterpret_borrow<py::sequence>(dl_device);
  if (!py::isinstance<py::tuple>(dl_device) || py::len(fields) != 2) {
    throw py::type_error(std::string("[") + op +
                         "] a DLPack device is a (device_type, "
                         "device_id) tuple, got " +
                         std::string(py::repr(dl_device)));
  }
  return {static_cast<DLDeviceType>(int_arg(fields[0], op, "the device type")),
          static_cast<int32_t>(int_arg(fields[1], op, "the device id"))};
}

#ifdef KILN_WITH_CUDA
// The stream value the protocol uses for a kiln stream: 1 names the legacy default stream.
int64_t protocol_stream(cuda::StreamHandle s) {
  return s ? static_cast<int64_t>(reinterpret_cast<intptr_t>(s)) : 1;
}

// Note [DLPack capsules and streams]: the consumer's stream waits for kiln's current one.
void order_consumer_stream(const Tensor& t, py::handle stream) {
  const int64_t s = stream.is_none() ? 1 : int_arg(stream, "__dlpack__", "stream");
  if (s == -1) return;
  if (s == 0 || s < -1) {
    throw py::value_error("[__dlpack__] stream=" + std::to_string(s) +
                          " is not valid for CUDA: "
                          "pass 1 (legacy default stream), 2 (per-thread default stream), a "
                          "cudaStream_t, or -1 to skip synchronization");
  }
  const int device = cuda::resolve_device(t.device(), "__dlpack__");
  // cudaStreamLegacy (1) is the stream kiln calls nullptr; 2 is cudaStreamPerThread as is.
  const auto consumer = s == 1 ? nullptr : reinterpret_cast<cuda::StreamHandle>(s);
  const cuda::StreamHandle producer = cuda::current_stream(device);
  if (consumer == producer) return;
  cuda::Event ready;
  ready.record(producer, device);
  ready.wait(consumer, device);
}
#endif

py::object dunder_dlpack(const Tensor& self, py::handle stream, py::handle max_version,
                         py::handle dl_device, py::handle copy) {
  if (self.requires_grad()) {
    throw py::buffer_error(
        "[__dlpack__] Can't export tensors that require gradient, use tensor.detach()");
  }
  if (!stream.is_none() && !PyLong_CheckExact(stream.ptr())) {
    throw py::type_error("[__dlpack__] stream must be ``int`` or ``none``, got " +
                         type_name(stream));
  }
  const std::optional<bool> want_copy = parse_copy(copy);
  Tensor out = self;
  bool copied = false;
  if (!dl_device.is_none()) {
    const Device target = from_dl_device(parse_dl_device(dl_device, "__dlpack__"), "__dlpack__");
    const Device here = from_dl_device(to_dl_device(self.device()), "__dlpack__");
    if (target != here) {
      if (want_copy == false) {
        throw py::buffer_error("[__dlpack__] exporting a tensor on " + self.device().str() +
                               " to " + target.str() + " needs a copy, but copy=False");
      }
      out = to_device(self, target);
      copied = true;
    }
  }
  if (want_copy.value_or(false) && !copied) {
    out = clone(self);
    copied = true;
  }
  if (out.device().is_cuda()) {
#ifdef KILN_WITH_CUDA
    order_consumer_stream(out, stream);
#endif
  } else if (self.device().is_cpu() && !stream.is_none() &&
             int_arg(stream, "__dlpack__", "stream") != -1) {
    throw py::buffer_error("[__dlpack__] stream must be None for a CPU tensor, got " +
                           std::string(py::str(stream)));
  }
  bool versioned = false;
  if (!max_version.is_none()) {
    if (!py::isinstance<py::tuple>(max_version) || py::len(max_version) != 2) {
      throw py::type_error("[__dlpack__] max_version must be a (major, minor) tuple, got " +
                           std::string(py::repr(max_version)));
    }
    versioned = int_arg(py::reinterpret_borrow<py::tuple>(max_version)[0], "__dlpack__",
                        "max_version[0]") >= 1;
  }
  return export_capsule(out, versioned, copied ? kFlagIsCopied : 0);
}

// kiln.utils.dlpack.DLDeviceType, looked up once (it is a Python IntEnum) and kept for the
// life of the process, past interpreter teardown.
py::object device_type_enum(int32_t type) {
  // Not a function-local static initializer: the import may release the GIL.
  static py::object* cls = nullptr;
  if (!cls) cls = new py::object(py::module_::import("kiln.utils.dlpack").attr("DLDeviceType"));
  return (*cls)(type);
}

py::tuple dunder_dlpack_device(const Tensor& self) {
  const DLDevice d = to_dl_device(self.device());
  return py::make_tuple(device_type_enum(d.device_type), d.device_id);
}

Tensor from_dlpack_object(py::object obj) {
  if (PyCapsule_CheckExact(obj.ptr())) return import_capsule(obj);
  KILN_CHECK(py::hasattr(obj, "__dlpack__"), Runtime,
             "[from_dlpack] expected an object with "
             "__dlpack__ (a tensor or array) or a DLPack capsule, got ",
             type_name(obj));
  py::dict kwargs;
  kwargs["max_version"] = py::make_tuple(kMajorVersion, kMinorVersion);
  if (py::hasattr(obj, "__dlpack_device__")) {
    // Checked before asking for a capsule: an unsupported device fails without an export.
    const Device device = from_dl_device(
        parse_dl_device(obj.attr("__dlpack_device__")(), "from_dlpack"), "from_dlpack");
    if (device.is_cuda()) {
#ifdef KILN_WITH_CUDA
      kwargs["stream"] = protocol_stream(cuda::current_stream(device.index));
#endif
    }
  }
  py::object capsule;
  try {
    capsule = obj.attr("__dlpack__")(**kwargs);
  } catch (py::error_already_set& e) {
    // Producers older than DLPack 1.0 do not take max_version.
    if (!e.matches(PyExc_TypeError)) throw;
    kwargs.attr("pop")("max_version");
    capsule = obj.attr("__dlpack__")(**kwargs);
  }
  KILN_CHECK(PyCapsule_CheckExact(capsule.ptr()), Runtime, "[from_dlpack] ", type_name(obj),
             ".__dlpack__() returned ", type_name(capsule), ", not a DLPack capsule");
  return import_capsule(capsule);
}

}  // namespace

void init_dlpack(py::module_& m, TensorClass& cls) {
  cls.def("__dlpack__", &dunder_dlpack, py::kw_only(), py::arg("stream") = py::none(),
          py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
          py::arg("copy") = py::none(),
          "A DLPack capsule sharing this tensor's memory (a versioned one when max_version "
          ">= (1, 0)). On CUDA, `stream` is the consumer's stream: it waits for kiln's work.");
  cls.def("__dlpack_device__", &dunder_dlpack_device,
          "(DLDeviceType, device index) of this tensor's memory.");
  m.def("from_dlpack", &from_dlpack_object, py::arg("ext_tensor"),
        "A tensor sharing memory with `ext_tensor` (any object with __dlpack__, or a DLPack "
        "capsule).");
  m.def(
      "to_dlpack", [](const Tensor& tensor) { return export_capsule(tensor, false, 0); },
      py::arg("tensor"), "A legacy 'dltensor' capsule sharing the tensor's memory.");
}

}  // namespace kiln::python
