// Autocast state and policy, and the GradScaler's device steps: the private
// kiln._C hooks that kiln.amp (python/kiln/amp/) builds on.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "core/error.h"
#include "ops/amp.h"
#include "ops/autocast_policy.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

DeviceType device_type_of(const std::string& name) {
  if (name == "cuda") return DeviceType::CUDA;
  KILN_CHECK(name == "cpu", Runtime,
             "[autocast] User specified an unsupported autocast device_type '", name,
             "' (expected 'cuda' or 'cpu')");
  return DeviceType::CPU;
}

}  // namespace

void init_amp(py::module_& m) {
  m.def(
      "_autocast_state",
      [](const std::string& device_type) {
        const AutocastState& s = autocast_state(device_type_of(device_type));
        return py::make_tuple(s.enabled, s.dtype, s.depth, s.cache_enabled);
      },
      py::arg("device_type"), "(enabled, dtype, nesting depth, cache_enabled) on this thread.");
  m.def(
      "_autocast_set",
      [](const std::string& device_type, bool enabled, DType dtype, bool cache_enabled) {
        DeviceType t = device_type_of(device_type);
        set_autocast_dtype(t, dtype);
        set_autocast_cache_enabled(t, cache_enabled);
        set_autocast_enabled(t, enabled);
      },
      py::arg("device_type"), py::arg("enabled"), py::arg("dtype"), py::arg("cache_enabled"));
  m.def(
      "_autocast_increment_nesting",
      [](const std::string& device_type) {
        return increment_autocast_nesting(device_type_of(device_type));
      },
      py::arg("device_type"));
  m.def(
      "_autocast_decrement_nesting",
      [](const std::string& device_type) {
        return decrement_autocast_nesting(device_type_of(device_type));
      },
      py::arg("device_type"));
  m.def("_clear_autocast_cache", &clear_autocast_cache);
  m.def("_autocast_cache_size", &autocast_cache_size);
  m.def(
      "_autocast_policy",
      [] {
        py::dict d;
        for (const auto& [name, p] : autocast_policy_table())
          d[py::str(name)] = autocast_policy_name(p);
        return d;
      },
      "The autocast policy table: op name -> 'lower_precision_fp' | 'fp32' | 'promote'.");
  m.def("_amp_foreach_non_finite_check_and_unscale_", &amp_foreach_non_finite_check_and_unscale_,
        py::arg("grads"), py::arg("found_inf"), py::arg("inv_scale"));
  m.def("_amp_update_scale_", &amp_update_scale_, py::arg("scale"), py::arg("growth_tracker"),
        py::arg("found_inf"), py::arg("growth_factor"), py::arg("backoff_factor"),
        py::arg("growth_interval"));
}

}  // namespace kiln::python
