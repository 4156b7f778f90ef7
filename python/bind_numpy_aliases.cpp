// NumPy's keyword spellings of PyTorch's arguments: axis= for dim=, keepdims= for keepdim=.
#include <pybind11/pybind11.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// Note [NumPy keyword aliases]
// PyTorch's argument parser accepts axis= wherever an op takes dim= and keepdims=
// wherever it takes keepdim= (sum, mean, max, std, all, cat, softmax, ...). pybind11 has
// no aliases, and an extra (*args, **kwargs) overload would not do: pybind11 tries every
// overload once without implicit conversions before trying them with, so a catch-all
// overload would capture calls that need a conversion. Instead, once every binding
// exists, each function and Tensor method whose signature names dim or keepdim is
// wrapped in a METH_FASTCALL C function that renames those keywords and calls the
// original through vectorcall: no Python frame, no second argument parse, and a call
// without aliases pays one C call. The wrapper keeps the original's name and docstring
// (scripts/gen_stubs.py reads signatures from the docstring).

struct Alias {
  const char* numpy;
  const char* torch;
};
constexpr Alias kAliases[] = {{"axis", "dim"}, {"keepdims", "keepdim"}};

// A wrapper's PyMethodDef must outlive the function object: they live here, for the process.
struct Wrapper {
  std::string name, doc;
  PyMethodDef def{};
};
std::deque<Wrapper>& wrappers() {
  static std::deque<Wrapper> all;
  return all;
}

const char* torch_spelling(PyObject* keyword) {
  for (const Alias& a : kAliases)
    if (PyUnicode_CompareWithASCIIString(keyword, a.numpy) == 0) return a.torch;
  return nullptr;
}

// `self` is the wrapped pybind11 function; for a Tensor method args[0] is the tensor.
PyObject* renamed_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                       PyObject* kwnames) {
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  bool renames = false;
  for (Py_ssize_t i = 0; i < nkw && !renames; ++i)
    renames = torch_spelling(PyTuple_GET_ITEM(kwnames, i)) != nullptr;
  if (!renames) return PyObject_Vectorcall(self, args, static_cast<size_t>(nargs), kwnames);

  py::tuple renamed(nkw);
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    const char* torch_name = torch_spelling(name);
    py::object spelled = torch_name ? py::str(torch_name)
                                    : py::reinterpret_borrow<py::object>(name);
    for (Py_ssize_t j = 0; j < i; ++j) {
      if (PyUnicode_Compare(renamed[static_cast<size_t>(j)].ptr(), spelled.ptr()) == 0) {
        py::object name_of = py::handle(self).attr("__name__");
        PyErr_Format(PyExc_TypeError, "%U() got multiple values for argument '%U'",
                     name_of.ptr(), spelled.ptr());
        return nullptr;
      }
    }
    renamed[static_cast<size_t>(i)] = spelled;
  }
  return PyObject_Vectorcall(self, args, static_cast<size_t>(nargs), renamed.ptr());
}

PyObject* call_with_torch_keywords(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames) {
  try {
    return renamed_call(self, args, nargs, kwnames);
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// Whether a pybind11 docstring's signatures name a `dim` or `keepdim` parameter.
bool takes_dim(const std::string& doc) {
  for (const char* param : {"(dim: ", ", dim: ", "(keepdim: ", ", keepdim: "})
    if (doc.find(param) != std::string::npos) return true;
  return false;
}

py::object wrap(py::handle function, const std::string& name) {
  Wrapper& w = wrappers().emplace_back();
  w.name = name;
  w.doc = py::str(function.attr("__doc__"));
  w.def.ml_name = w.name.c_str();
  w.def.ml_meth = reinterpret_cast<PyCFunction>(
      reinterpret_cast<void (*)()>(&call_with_torch_keywords));
  w.def.ml_flags = METH_FASTCALL | METH_KEYWORDS;
  w.def.ml_doc = w.doc.c_str();
  py::str module("kiln._C");
  PyObject* f = PyCFunction_NewEx(&w.def, function.ptr(), module.ptr());
  if (!f) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(f);
}

}  // namespace

void init_numpy_aliases(py::module_& m, TensorClass& cls) {
  // Collected first: a dict must not change while it is iterated.
  std::vector<std::pair<py::object, py::object>> replaced;
  for (auto [key, value] : py::dict(m.attr("__dict__"))) {
    if (!PyCFunction_Check(value.ptr()) || value.attr("__doc__").is_none()) continue;
    if (!takes_dim(py::str(value.attr("__doc__")))) continue;
    replaced.emplace_back(py::reinterpret_borrow<py::object>(key), wrap(value, py::str(key)));
  }
  for (auto& [key, function] : replaced) m.attr(key) = function;
  replaced.clear();
  // pybind11 stores methods as instancemethod objects around the function.
  for (auto [key, value] : py::dict(cls.attr("__dict__"))) {
    if (!PyInstanceMethod_Check(value.ptr())) continue;
    py::handle function = PyInstanceMethod_GET_FUNCTION(value.ptr());
    if (function.attr("__doc__").is_none() || !takes_dim(py::str(function.attr("__doc__"))))
      continue;
    py::object method = py::reinterpret_steal<py::object>(
        PyInstanceMethod_New(wrap(function, py::str(key)).ptr()));
    if (!method) throw py::error_already_set();
    replaced.emplace_back(py::reinterpret_borrow<py::object>(key), method);
  }
  for (auto& [key, method] : replaced) cls.attr(key) = method;
}

}  // namespace kiln::python
