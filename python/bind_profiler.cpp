// kiln._C._profiler: the recorder behind kiln.profiler (Note [Profiler events] in
// core/profiler.cpp). Python turns the raw events into tables and traces.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/profiler.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// Note [Profiler stacks]
// with_stack records, for each range, the Python stack of the thread that opened it. Ranges
// open by the thousand per step and their stacks repeat, so a stack is interned: the key is
// the (code object, line) of each frame, innermost first, and a range keeps the stack's id.
// Code objects are held by the table (a freed one's address could come back as another's);
// the text ("file(line): function", PyTorch's spelling) is made only when the trace is read.
// Everything here runs with the GIL held (capture does nothing without it), so the table
// needs no lock of its own. The table lives from one session's start to the next.
struct Frame {
  PyObject* code;  // a strong reference
  int line;
};

struct StackTable {
  std::unordered_map<std::string, int64_t> ids;
  std::vector<std::vector<Frame>> stacks;

  void clear() {
    for (auto& stack : stacks)
      for (Frame& f : stack) Py_DECREF(f.code);
    stacks.clear();
    ids.clear();
  }
};

StackTable& stack_table() {
  static StackTable* table = new StackTable();  // leaked: references die with the process
  return *table;
}

int64_t capture_stack() {
  if (!Py_IsInitialized() || !PyGILState_Check()) return -1;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame == nullptr) return -1;
  Py_INCREF(frame);
  std::vector<Frame> frames;
  std::string key;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    Frame f{reinterpret_cast<PyObject*>(code), PyFrame_GetLineNumber(frame)};
    key.append(reinterpret_cast<const char*>(&f.code), sizeof(f.code));
    key.append(reinterpret_cast<const char*>(&f.line), sizeof(f.line));
    frames.push_back(f);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  StackTable& table = stack_table();
  auto it = table.ids.find(key);
  if (it != table.ids.end()) {
    for (Frame& f : frames) Py_DECREF(f.code);
    return it->second;
  }
  const int64_t id = static_cast<int64_t>(table.stacks.size());
  table.stacks.push_back(std::move(frames));  // keeps the code references
  table.ids.emplace(std::move(key), id);
  return id;
}

// The interned stacks as lists of "file(line): function", innermost frame first.
py::list stack_texts() {
  py::list out;
  for (const std::vector<Frame>& stack : stack_table().stacks) {
    py::list frames;
    for (const Frame& f : stack) {
      py::handle code(f.code);
      frames.append(py::str("{}({}): {}").format(code.attr("co_filename"), f.line,
                                                  code.attr("co_name")));
    }
    out.append(frames);
  }
  return out;
}

}  // namespace

void init_profiler(py::module_& m) {
  py::module_ p = m.def_submodule("_profiler", "kiln.profiler's event recorder");
  p.attr("FLAG_SHAPES") = static_cast<uint32_t>(profiler::kShapes);
  p.attr("FLAG_CUDA") = static_cast<uint32_t>(profiler::kCuda);
  p.attr("FLAG_MEMORY") = static_cast<uint32_t>(profiler::kMemory);
  p.attr("FLAG_STACK") = profiler::kStack;
  p.attr("FLAG_FLOPS") = profiler::kFlops;
  profiler::set_stack_capture(&capture_stack);
  p.def("_start", [](uint32_t flags) {
    if (!profiler::session_running()) stack_table().clear();  // else start() raises
    profiler::start(flags);
  }, py::arg("flags"));
  // Each event as a tuple: (name, kind, id, parent, start_ns, end_ns, thread, device, stream,
  // correlation, bytes, shapes, output_shape, stack); kind is EventKind's value, stack an
  // index into _stacks() (-1: none).
  p.def("_stop", [] {
    py::list out;
    for (profiler::Event& e : profiler::stop())
      out.append(py::make_tuple(e.name, static_cast<int>(e.kind), e.id, e.parent, e.start_ns,
                                e.end_ns, e.thread, e.device, e.stream, e.correlation, e.bytes,
                                e.shapes, e.output_shape, e.stack));
    return out;
  });
  p.def("_stacks", &stack_texts);
  p.def("_running", &profiler::session_running);
  p.def("_enabled", &profiler::enabled);
  p.def("_device_unavailable", &profiler::device_activity_unavailable);
  p.def("_begin_range", &profiler::begin_range, py::arg("name"));
  p.def("_end_range", &profiler::end_range, py::arg("handle"));
}

}  // namespace kiln::python
