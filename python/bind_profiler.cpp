// kiln._C._profiler: the recorder behind kiln.profiler (Note [Profiler events] in
// core/profiler.cpp). Python turns the raw events into tables and traces.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/profiler.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_profiler(py::module_& m) {
  py::module_ p = m.def_submodule("_profiler", "kiln.profiler's event recorder");
  p.attr("FLAG_SHAPES") = static_cast<uint32_t>(profiler::kShapes);
  p.attr("FLAG_CUDA") = static_cast<uint32_t>(profiler::kCuda);
  p.attr("FLAG_MEMORY") = static_cast<uint32_t>(profiler::kMemory);
  p.def("_start", &profiler::start, py::arg("flags"));
  // Each event as a tuple: (name, kind, id, parent, start_ns, end_ns, thread, device, stream,
  // correlation, bytes, shapes); kind is EventKind's value.
  p.def("_stop", [] {
    py::list out;
    for (profiler::Event& e : profiler::stop())
      out.append(py::make_tuple(e.name, static_cast<int>(e.kind), e.id, e.parent, e.start_ns,
                                e.end_ns, e.thread, e.device, e.stream, e.correlation, e.bytes,
                                e.shapes));
    return out;
  });
  p.def("_running", &profiler::session_running);
  p.def("_enabled", &profiler::enabled);
  p.def("_device_unavailable", &profiler::device_activity_unavailable);
  p.def("_begin_range", &profiler::begin_range, py::arg("name"));
  p.def("_end_range", &profiler::end_range, py::arg("handle"));
}

}  // namespace kiln::python
