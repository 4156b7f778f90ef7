// kiln._C._export: the tracer kiln.export drives and the runtime that runs its graphs
// (ops/export_trace.h, runtime/program.h).
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <vector>

#include "ops/export_trace.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"
#include "runtime/op_runners.h"
#include "runtime/program.h"

namespace kiln::python {

namespace py = pybind11;

void init_export(py::module_& m) {
  py::module_ e = m.def_submodule("_export", "Graph recording and the exported-program runtime");

  py::class_<tracing::Recorder>(e, "Recorder",
                                "Records the exportable ops this thread runs until finish()")
      .def(py::init<>())
      .def("add_input", &tracing::Recorder::add_input, py::arg("name"), py::arg("tensor"))
      .def("add_constant", &tracing::Recorder::add_constant, py::arg("name"), py::arg("tensor"))
      .def("finish", &tracing::Recorder::finish, py::arg("outputs"),
           "Stops recording; returns the graph JSON")
      .def("close", &tracing::Recorder::close, "Stops recording without a graph");

  py::class_<runtime::Program>(e, "Program", "A loaded exported program (C++ runtime)")
      .def(py::init([](const std::string& graph, const std::map<std::string, Tensor>& constants,
                       py::handle device) {
             return runtime::Program(graph, constants, parse_device(device, "Program"));
           }),
           py::arg("graph"), py::arg("constants"), py::arg("device") = "cpu")
      .def(
          "run",
          [](const runtime::Program& p, const std::vector<Tensor>& inputs) {
            py::gil_scoped_release no_gil;  // the ops need no Python; other threads may run
            return p.run(inputs);
          },
          py::arg("inputs"))
      .def_property_readonly("device", &runtime::Program::device)
      .def_property_readonly("input_names", &runtime::Program::input_names)
      .def_property_readonly("graph_json", &runtime::Program::graph_json);

  e.def(
      "load_program",
      [](const std::string& path, py::handle device) {
        return runtime::Program::load(path, parse_device(device, "load_program"));
      },
      py::arg("path"), py::arg("device") = "cpu");
  e.def("read_program_file", &runtime::read_program_file, py::arg("path"),
        "(graph JSON, {name: tensor}) of a program file, checked as load_program checks them");
  e.def("save_program", &runtime::save_program, py::arg("path"), py::arg("graph"),
        py::arg("constants"));
  e.def("runner_names", &runtime::runner_names, "The ops an exported graph may hold");
}

}  // namespace kiln::python
