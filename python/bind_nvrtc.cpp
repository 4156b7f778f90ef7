// kiln._C._nvrtc_* and the _NvrtcModule / _NvrtcFunction classes behind kiln.cuda.RawKernel
// (Note [Custom kernels from Python] in cuda/nvrtc_module.h). Without the CUDA backend
// nothing is bound and kiln.cuda's custom kernels raise when compiled.
#include <pybind11/stl.h>

#include <complex>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "python/bindings.h"
#ifdef KILN_WITH_CUDA
#include "cuda/nvrtc.h"
#include "cuda/nvrtc_module.h"
#endif

namespace py = pybind11;

namespace kiln::python {

#ifdef KILN_WITH_CUDA
namespace {

using cuda::KernelArg;

template <typename T>
void store(KernelArg* a, T v, const char* what) {
  static_assert(sizeof(T) <= sizeof(a->bytes), "kernel argument too large");
  std::memcpy(a->bytes, &v, sizeof(T));
  a->size = sizeof(T);
  a->what = what;
}

// One Python launch argument as the bytes the kernel receives. Python numbers follow CuPy:
// int -> long long, float -> double, bool -> bool, complex -> complex<double>; NumPy scalars
// keep their own type. A tensor passes its data pointer.
KernelArg to_kernel_arg(py::handle h, size_t index, const std::string& kernel) {
  KernelArg a;
  PyObject* o = h.ptr();
  py::detail::make_caster<Tensor> tensor_caster;
  if (tensor_caster.load(h, false)) {
    const Tensor& t = py::detail::cast_op<const Tensor&>(tensor_caster);
    a.tensor_device = t.device().type == DeviceType::CUDA ? t.device().index : -1;
    store<void*>(&a, t.data_ptr(), "tensor");
  } else if (PyBool_Check(o)) {
    store<bool>(&a, o == Py_True, "Python bool (bool)");
  } else if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow)
      fail(ErrorKind::Type, "[RawKernel ", kernel, "] argument ", index,
           " is a Python int that does not fit in long long");
    store<long long>(&a, v, "Python int (long long)");
  } else if (PyFloat_Check(o)) {
    store<double>(&a, PyFloat_AS_DOUBLE(o), "Python float (double)");
  } else if (PyComplex_Check(o)) {
    store(&a, std::complex<double>(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)),
          "Python complex (complex<double>)");
  } else if (PyObject_CheckBuffer(o)) {
    // NumPy scalars (and 0-d arrays) expose their value as a 0-d buffer of their own type.
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_ND) != 0) {
      PyErr_Clear();
      fail(ErrorKind::Type, "[RawKernel ", kernel, "] argument ", index, " of type ",
           Py_TYPE(o)->tp_name, " cannot be passed to a kernel");
    }
    const bool scalar = view.ndim == 0 && view.len > 0 &&
                        view.len <= static_cast<Py_ssize_t>(sizeof(a.bytes));
    if (scalar) {
      std::memcpy(a.bytes, view.buf, static_cast<size_t>(view.len));
      a.size = static_cast<size_t>(view.len);
      a.what = "NumPy scalar";
    }
    PyBuffer_Release(&view);
    KILN_CHECK(scalar, Type, "[RawKernel ", kernel, "] argument ", index, " of type ",
               Py_TYPE(o)->tp_name,
               " is not a scalar: kernels take kiln CUDA tensors, Python numbers and NumPy "
               "scalars");
  } else {
    fail(ErrorKind::Type, "[RawKernel ", kernel, "] argument ", index, " of type ",
         Py_TYPE(o)->tp_name,
         " cannot be passed to a kernel: kernels take kiln CUDA tensors, Python numbers and "
         "NumPy scalars");
  }
  return a;
}

// grid / block: an int or a tuple of 1 to 3 ints; missing dims are 1.
void to_dims(py::handle h, int64_t* out, const char* what, const std::string& kernel) {
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
    out[0] = PyLong_AsLongLong(h.ptr());
    if (PyErr_Occurred()) throw py::error_already_set();
    return;
  }
  KILN_CHECK(PyTuple_Check(h.ptr()) || PyList_Check(h.ptr()), Type, "[RawKernel ", kernel, "] ",
             what, " must be an int or a tuple of 1 to 3 ints, got ", Py_TYPE(h.ptr())->tp_name);
  py::sequence seq = py::reinterpret_borrow<py::sequence>(h);
  KILN_CHECK(seq.size() >= 1 && seq.size() <= 3, Value, "[RawKernel ", kernel, "] ", what,
             " must have 1 to 3 dimensions, got ", seq.size());
  for (size_t i = 0; i < seq.size(); ++i) {
    py::handle v = seq[i];
    KILN_CHECK(PyLong_Check(v.ptr()) && !PyBool_Check(v.ptr()), Type, "[RawKernel ", kernel,
               "] ", what, " must hold ints, got ", Py_TYPE(v.ptr())->tp_name);
    out[i] = v.cast<int64_t>();
  }
}

void launch(cuda::NvrtcFunction& f, py::handle grid, py::handle block, py::handle args,
            int64_t shared_mem, py::handle stream) {
  KILN_CHECK(PyTuple_Check(args.ptr()) || PyList_Check(args.ptr()), Type, "[RawKernel ",
             f.name(), "] args must be a tuple, got ", Py_TYPE(args.ptr())->tp_name);
  cuda::LaunchConfig config;
  to_dims(grid, config.grid, "grid", f.name());
  to_dims(block, config.block, "block", f.name());
  config.shared_mem = shared_mem;
  if (!stream.is_none()) {
    // A kiln.cuda.Stream, or a raw cudaStream_t as an int.
    py::object handle = py::hasattr(stream, "cuda_stream") ? stream.attr("cuda_stream")
                                                           : py::reinterpret_borrow<py::object>(stream);
    KILN_CHECK(PyLong_Check(handle.ptr()), Type, "[RawKernel ", f.name(),
               "] stream must be a kiln.cuda.Stream or None, got ",
               Py_TYPE(stream.ptr())->tp_name);
    config.has_stream = true;
    config.stream = reinterpret_cast<cuda::StreamHandle>(handle.cast<uintptr_t>());
  }
  py::sequence seq = py::reinterpret_borrow<py::sequence>(args);
  std::vector<KernelArg> kargs;
  kargs.reserve(seq.size());
  for (size_t i = 0; i < seq.size(); ++i) kargs.push_back(to_kernel_arg(seq[i], i, f.name()));
  f.launch(kargs, config);
}

}  // namespace

void init_nvrtc(py::module_& m) {
  m.def("_nvrtc_version", [] {
    auto v = cuda::nvrtc_version();
    return py::make_tuple(v.first, v.second);
  });
  m.def("_nvrtc_supported_archs", &cuda::nvrtc_supported_archs);
  // (ok, image bytes, is_ptx, log, lowered names); the caller raises with the log.
  m.def("_nvrtc_compile", [](const std::string& source, const std::string& name,
                             const std::vector<std::string>& options, int arch,
                             const std::vector<std::string>& name_expressions) {
    cuda::NvrtcResult r;
    {
      py::gil_scoped_release nogil;
      r = cuda::nvrtc_compile(source, name, options, arch, name_expressions);
    }
    return py::make_tuple(r.ok, py::bytes(r.image), r.is_ptx, r.log, r.lowered_names);
  }, py::arg("source"), py::arg("name"), py::arg("options"), py::arg("arch"),
     py::arg("name_expressions"));

  py::class_<cuda::NvrtcModule, std::shared_ptr<cuda::NvrtcModule>>(m, "_NvrtcModule")
      .def(py::init([](py::bytes image, const std::string& what) {
        return std::make_shared<cuda::NvrtcModule>(std::string(image), what);
      }), py::arg("image"), py::arg("what"));

  py::class_<cuda::KernelAttributes>(m, "_NvrtcKernelAttributes")
      .def_readonly("max_threads_per_block", &cuda::KernelAttributes::max_threads_per_block)
      .def_readonly("num_regs", &cuda::KernelAttributes::num_regs)
      .def_readonly("shared_size_bytes", &cuda::KernelAttributes::shared_size_bytes)
      .def_readonly("const_size_bytes", &cuda::KernelAttributes::const_size_bytes)
      .def_readonly("local_size_bytes", &cuda::KernelAttributes::local_size_bytes)
      .def_readonly("max_dynamic_shared_size_bytes",
                    &cuda::KernelAttributes::max_dynamic_shared_size_bytes)
      .def_readonly("ptx_version", &cuda::KernelAttributes::ptx_version)
      .def_readonly("binary_version", &cuda::KernelAttributes::binary_version);

  py::class_<cuda::NvrtcFunction, std::shared_ptr<cuda::NvrtcFunction>>(m, "_NvrtcFunction")
      .def(py::init<std::shared_ptr<cuda::NvrtcModule>, const std::string&, const std::string&>(),
           py::arg("module"), py::arg("symbol"), py::arg("name"))
      .def("_launch", &launch, py::arg("grid"), py::arg("block"), py::arg("args"),
           py::arg("shared_mem") = 0, py::arg("stream") = py::none())
      .def("_param_sizes", &cuda::NvrtcFunction::param_sizes)
      .def("_attributes", &cuda::NvrtcFunction::attributes, py::arg("device"))
      .def("_set_max_dynamic_shared_size_bytes",
           &cuda::NvrtcFunction::set_max_dynamic_shared_size_bytes, py::arg("device"),
           py::arg("bytes"));
}
#else
void init_nvrtc(py::module_&) {}
#endif

}  // namespace kiln::python
