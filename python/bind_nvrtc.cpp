// kiln._C._nvrtc_*, the _NvrtcModule / _NvrtcFunction classes behind kiln.cuda.RawKernel
// (Note [Custom kernels from Python] in cuda/nvrtc_module.h) and _KernelLauncher, RawKernel's
// base class. Without the CUDA backend only _KernelLauncher is bound (its dry run packs
// arguments) and kiln.cuda's custom kernels raise when compiled.
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "python/bindings.h"
#include "python/kernel_args.h"
#ifdef KILN_WITH_CUDA
#include "cuda/nvrtc.h"
#include "cuda/nvrtc_module.h"
#endif

namespace py = pybind11;

namespace kiln::python {

namespace {

// The C++ half of a RawKernel: its loaded function and parameter layout (Note [Fast kernel
// launch] in python/kernel_args.cpp). RawKernel (python/kiln/cuda/_raw_kernel.py) subclasses
// it, so a launch reaches launcher_call without a Python frame.
struct KernelLauncher {
  explicit KernelLauncher(std::string n) : name(std::move(n)) {}
  std::string name;
#ifdef KILN_WITH_CUDA
  std::shared_ptr<cuda::NvrtcFunction> function;
#endif
  ParamLayout layout;
  bool loaded = false;  // a function (or a dry run's layout) is set
  bool dry = false;     // _dry_run: parse, pack and check, keep the bytes, launch nothing
  bool check_devices = true;
  std::vector<unsigned char> last;  // a dry run's packed arguments, back to back
};

KernelLauncher& launcher_of(PyObject* self) {
  static const py::detail::type_info* ti = py::detail::get_type_info(typeid(KernelLauncher));
  py::detail::value_and_holder vh =
      reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder(ti, false);
  KILN_CHECK(vh.inst && vh.holder_constructed(), Type, "[RawKernel] ", Py_TYPE(self)->tp_name,
             ".__init__ did not call the base class's __init__");
  return *vh.value_ptr<KernelLauncher>();
}

// kernel(grid, block, args, shared_mem=0, stream=None) as a METH_FASTCALL | METH_KEYWORDS
// descriptor of _KernelLauncher.
PyObject* launcher_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames) {
  try {
    KernelLauncher* l = &launcher_of(self);
    if (!l->loaded) {
      // The first launch compiles (or finds in the cache) and loads: RawKernel._load.
      py::handle(self).attr("_load")();
      l = &launcher_of(self);
      KILN_CHECK(l->loaded, Runtime, "[RawKernel ", l->name, "] _load() set no function");
    }
    LaunchDims dims;
    PyObject* seq = parse_launch_call(args, nargs, kwnames, &dims, l->name);
    check_launch_dims(dims, l->name);
    const size_t n = static_cast<size_t>(PyTuple_Check(seq) ? PyTuple_GET_SIZE(seq)
                                                             : PyList_GET_SIZE(seq));
    PackedArgs packed(n);
    const int device = pack_args(seq, l->layout, l->name, l->check_devices, &packed);
    void* inline_argv[PackedArgs::kInlineArgs];
    std::vector<void*> more_argv;
    void** argv = inline_argv;
    if (n > PackedArgs::kInlineArgs) {
      more_argv.resize(n);
      argv = more_argv.data();
    }
    for (size_t i = 0; i < n; ++i) argv[i] = packed[i].bytes;
    if (l->dry) {
      l->last.clear();
      for (size_t i = 0; i < n; ++i)
        l->last.insert(l->last.end(), packed[i].bytes, packed[i].bytes + packed[i].size);
      Py_RETURN_NONE;
    }
#ifdef KILN_WITH_CUDA
    cuda::LaunchConfig config;
    for (int d = 0; d < 3; ++d) {
      config.grid[d] = dims.grid[d];
      config.block[d] = dims.block[d];
    }
    config.shared_mem = dims.shared_mem;
    config.has_stream = dims.has_stream;
    config.stream = dims.stream;
    l->function->launch(argv, device, config);
#else
    (void)device;
#endif
    Py_RETURN_NONE;
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

void def_launcher(py::module_& m) {
  py::class_<KernelLauncher> cls(m, "_KernelLauncher");
  cls.def(py::init<std::string>(), py::arg("name"))
      .def_property_readonly("_loaded", [](const KernelLauncher& l) { return l.loaded; })
      // For tests and the packing benchmark without a GPU: calls pack and check against
      // `param_sizes` and launch nothing; _last_args() returns the packed bytes.
      .def("_dry_run", [](KernelLauncher& l, const std::vector<size_t>& param_sizes,
                          bool check_devices) {
        l.layout.sizes = param_sizes;
        l.layout.known = true;
        l.loaded = l.dry = true;
        l.check_devices = check_devices;
      }, py::arg("param_sizes"), py::arg("check_devices") = true)
      .def("_last_args", [](const KernelLauncher& l) {
        return py::bytes(reinterpret_cast<const char*>(l.last.data()), l.last.size());
      });
#ifdef KILN_WITH_CUDA
  cls.def("_set_function", [](KernelLauncher& l, std::shared_ptr<cuda::NvrtcFunction> f) {
    l.layout.sizes = f->param_sizes();
    l.layout.known = f->params_known();
    l.function = std::move(f);
    l.loaded = true;
    l.dry = false;
  }, py::arg("function"));
#endif
  // __call__ as a fast descriptor (Note [Fast operators] in python/bind_elementwise.cpp).
  static PyMethodDef def{
      "__call__",
      reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&launcher_call)),
      METH_FASTCALL | METH_KEYWORDS,
      "__call__(self, grid, block, args, shared_mem=0, stream=None) -> None"};
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  py::object descr = py::reinterpret_steal<py::object>(PyDescr_NewMethod(type, &def));
  if (!descr) throw py::error_already_set();
  cls.attr("__call__") = descr;
}

}  // namespace

void init_nvrtc(py::module_& m) {
  def_launcher(m);
#ifdef KILN_WITH_CUDA
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
      .def("_param_sizes", &cuda::NvrtcFunction::param_sizes)
      .def("_attributes", &cuda::NvrtcFunction::attributes, py::arg("device"))
      .def("_set_max_dynamic_shared_size_bytes",
           &cuda::NvrtcFunction::set_max_dynamic_shared_size_bytes, py::arg("device"),
           py::arg("bytes"));
#endif
}

}  // namespace kiln::python
