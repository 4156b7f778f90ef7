// kiln._C switches: numerics flags behind kiln.backends and the CPU thread count.
#include <pybind11/pybind11.h>

#include "core/determinism.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/parallel.h"
#include "ops/conv_backend.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

bool* field(BackendFlags& f, const std::string& name) {
  if (name == "matmul_allow_tf32") return &f.matmul_allow_tf32;
  if (name == "cudnn_allow_tf32") return &f.cudnn_allow_tf32;
  if (name == "cudnn_benchmark") return &f.cudnn_benchmark;
  if (name == "cudnn_deterministic") return &f.cudnn_deterministic;
  if (name == "cudnn_enabled") return &f.cudnn_enabled;
  if (name == "sdp_flash") return &f.sdp_flash;
  if (name == "sdp_mem_efficient") return &f.sdp_mem_efficient;
  if (name == "sdp_cudnn") return &f.sdp_cudnn;
  if (name == "sdp_math") return &f.sdp_math;
  fail(ErrorKind::Value, "[kiln.backends] unknown flag '", name, "'");
}

// C++ warnings become Python UserWarnings (so warnings filters apply); ops run
// with the GIL held. A filter that turns the warning into an error raises it.
void python_warning(const std::string& message) {
  py::gil_scoped_acquire gil;
  if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0) throw py::error_already_set();
}

}  // namespace

void init_flags(py::module_& m) {
  set_warning_handler(&python_warning);
  m.def(
      "use_deterministic_algorithms",
      [](py::handle mode, bool warn_only) {
        KILN_CHECK(PyBool_Check(mode.ptr()), Type,
                   "[use_deterministic_algorithms] mode must be a bool, not ",
                   std::string(py::str(py::type::of(mode).attr("__name__"))));
        set_deterministic_algorithms(mode.ptr() == Py_True, warn_only);
      },
      py::arg("mode"), py::kw_only(), py::arg("warn_only") = false,
      "Makes ops without a deterministic implementation on their device raise a RuntimeError "
      "(or warn, with warn_only=True) and limits cuDNN to deterministic algorithms.");
  m.def("are_deterministic_algorithms_enabled", &deterministic_algorithms);
  m.def("is_deterministic_algorithms_warn_only_enabled", &deterministic_warn_only);
  m.def("_get_backend_flag", [](const std::string& name) {
    if (name == "mkldnn_enabled") return cpu_conv_enabled();
    BackendFlags f = backend_flags();
    return *field(f, name);
  });
  m.def("_set_backend_flag", [](const std::string& name, bool value) {
    if (name == "mkldnn_enabled") return set_cpu_conv_enabled(value);
    BackendFlags f = backend_flags();
    *field(f, name) = value;
    set_backend_flags(f);
  });
  // cuDNN's version when this build has it (None otherwise), as in torch.backends.cudnn.
  m.def("_cudnn_version", []() -> py::object {
    const ConvBackend* b = conv_backend(DeviceType::CUDA);
    const int64_t version = b ? b->version() : 0;
    if (version == 0) return py::none();
    return py::int_(version);
  });
  // oneDNN's version when this build has it (None otherwise), for torch.backends.mkldnn.
  m.def("_mkldnn_version", []() -> py::object {
    const ConvBackend* b = conv_backend(DeviceType::CPU);
    if (!b) return py::none();
    return py::int_(b->version());
  });
  m.def("set_num_threads", &set_num_threads, py::arg("int"));
  m.def("get_num_threads", &get_num_threads);
  m.def("set_default_dtype", [](DType d) { set_default_dtype(d); }, py::arg("d"));
  m.def("get_default_dtype", &default_dtype);
}

}  // namespace kiln::python
