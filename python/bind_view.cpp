// View ops: reshape-like methods accept sizes as varargs or one sequence.
#include <pybind11/stl.h>

#include "core/error.h"
#include "ops/view.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void init_view(py::module_& m, TensorClass& cls) {
  cls.def("view", [](const Tensor& t, py::args args, py::kwargs kw) {
    DType dt;
    if (kw.size() == 1 && kw.contains("dtype") && args.size() == 0 &&
        dtype_from_object(kw["dtype"], &dt))
      return view_dtype(t, dt);
    KILN_CHECK(kw.size() == 0, Type, "[view] view() takes sizes or one dtype (dtype=), got "
               "keywords ", py::str(py::list(kw.attr("keys")())).cast<std::string>());
    if (args.size() == 1 && dtype_from_object(args[0], &dt)) return view_dtype(t, dt);
    return view(t, parse_shape(args, "view"));
  });
  cls.def("view_as", [](const Tensor& t, const Tensor& o) { return view(t, o.sizes()); });
  cls.def("reshape", [](const Tensor& t, py::args args) { return reshape(t, parse_shape(args, "reshape")); });
  cls.def("reshape_as", [](const Tensor& t, const Tensor& o) { return reshape(t, o.sizes()); });
  m.def("reshape", [](const Tensor& t, py::object shape) {
    return reshape(t, parse_shape_object(shape, "reshape"));
  }, py::arg("input"), py::arg("shape"));
  cls.def("expand", [](const Tensor& t, py::args args) { return expand(t, parse_shape(args, "expand")); });
  cls.def("expand_as", [](const Tensor& t, const Tensor& o) { return expand(t, o.sizes()); });
  m.def("broadcast_to", [](const Tensor& t, py::object shape) {
    return expand(t, parse_shape_object(shape, "broadcast_to"));
  }, py::arg("input"), py::arg("size"));
  cls.def("permute", [](const Tensor& t, py::args args) { return permute(t, parse_shape(args, "permute")); });
  m.def("permute", [](const Tensor& t, py::object dims) {
    return permute(t, parse_shape_object(dims, "permute"));
  }, py::arg("input"), py::arg("dims"));
  for (const char* name : {"transpose", "swapaxes", "swapdims"}) {
    m.def(name, [](const Tensor& t, int64_t a, int64_t b) { return transpose(t, a, b); },
          py::arg("input"), py::arg("dim0"), py::arg("dim1"));
    cls.def(name, [](const Tensor& t, int64_t a, int64_t b) { return transpose(t, a, b); },
            py::arg("dim0"), py::arg("dim1"));
  }
  m.def("t", [](const Tensor& x) { return t(x); }, py::arg("input"));
  cls.def("t", [](const Tensor& x) { return t(x); });
  cls.def_property_readonly("T", [](const Tensor& x) {
    std::vector<int64_t> dims;
    for (int64_t i = x.dim() - 1; i >= 0; --i) dims.push_back(i);
    return permute(x, dims);
  });
  cls.def_property_readonly("mT", [](const Tensor& x) { return mT(x); });
  auto squeeze_fn = [](const Tensor& x, py::object dim) {
    return squeeze(x, parse_dims(dim, "squeeze"));
  };
  m.def("squeeze", squeeze_fn, py::arg("input"), py::arg("dim") = py::none());
  cls.def("squeeze", squeeze_fn, py::arg("dim") = py::none());
  m.def("unsqueeze", [](const Tensor& x, int64_t d) { return unsqueeze(x, d); }, py::arg("input"),
        py::arg("dim"));
  cls.def("unsqueeze", [](const Tensor& x, int64_t d) { return unsqueeze(x, d); }, py::arg("dim"));
  m.def("select", [](const Tensor& x, int64_t d, int64_t i) { return select(x, d, i); },
        py::arg("input"), py::arg("dim"), py::arg("index"));
  cls.def("select", [](const Tensor& x, int64_t d, int64_t i) { return select(x, d, i); },
          py::arg("dim"), py::arg("index"));
  m.def("narrow", [](const Tensor& x, int64_t d, int64_t s, int64_t l) { return narrow(x, d, s, l); },
        py::arg("input"), py::arg("dim"), py::arg("start"), py::arg("length"));
  cls.def("narrow", [](const Tensor& x, int64_t d, int64_t s, int64_t l) { return narrow(x, d, s, l); },
          py::arg("dim"), py::arg("start"), py::arg("length"));
  m.def("flatten", [](const Tensor& x, int64_t s, int64_t e) { return flatten(x, s, e); },
        py::arg("input"), py::arg("start_dim") = 0, py::arg("end_dim") = -1);
  cls.def("flatten", [](const Tensor& x, int64_t s, int64_t e) { return flatten(x, s, e); },
          py::arg("start_dim") = 0, py::arg("end_dim") = -1);
  m.def("unflatten", [](const Tensor& x, int64_t d, py::object sizes) {
    return unflatten(x, d, parse_shape_object(sizes, "unflatten"));
  }, py::arg("input"), py::arg("dim"), py::arg("sizes"));
  cls.def("unflatten", [](const Tensor& x, int64_t d, py::object sizes) {
    return unflatten(x, d, parse_shape_object(sizes, "unflatten"));
  }, py::arg("dim"), py::arg("sizes"));
  // source/destination: an int or a sequence of ints.
  auto movedim_fn = [](const Tensor& x, py::object s, py::object d) {
    if (py::isinstance<py::int_>(s) && py::isinstance<py::int_>(d))
      return movedim(x, s.cast<int64_t>(), d.cast<int64_t>());
    return movedim(x, *parse_dims(s, "movedim"), *parse_dims(d, "movedim"));
  };
  for (const char* name : {"movedim", "moveaxis"}) {
    m.def(name, movedim_fn, py::arg("input"), py::arg("source"), py::arg("destination"));
    cls.def(name, movedim_fn, py::arg("source"), py::arg("destination"));
  }
  auto diagonal_fn = [](const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
    return diagonal(x, offset, dim1, dim2);
  };
  m.def("diagonal", diagonal_fn, py::arg("input"), py::arg("offset") = 0, py::arg("dim1") = 0,
        py::arg("dim2") = 1);
  cls.def("diagonal", diagonal_fn, py::arg("offset") = 0, py::arg("dim1") = 0,
          py::arg("dim2") = 1);
  cls.def("unfold", [](const Tensor& x, int64_t d, int64_t size, int64_t step) {
    return unfold(x, d, size, step);
  }, py::arg("dimension"), py::arg("size"), py::arg("step"));
  auto as_strided_fn = [](const Tensor& x, py::object size, py::object stride,
                          std::optional<int64_t> storage_offset) {
    return as_strided(x, parse_shape_object(size, "as_strided"),
                      parse_shape_object(stride, "as_strided"), storage_offset);
  };
  m.def("as_strided", as_strided_fn, py::arg("input"), py::arg("size"), py::arg("stride"),
        py::arg("storage_offset") = py::none());
  cls.def("as_strided", as_strided_fn, py::arg("size"), py::arg("stride"),
          py::arg("storage_offset") = py::none());
}

}  // namespace kiln::python
