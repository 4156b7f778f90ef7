// Indexing: x[...] / x[...] = v, the index ops (gather, scatter, index_select,
// index_add, index_fill, index_copy, masked_fill, masked_select, nonzero, take, put,
// index_put) and the search/bin-count ops (searchsorted, bucketize, bincount, histc).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "core/shape.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/index_reduce.h"
#include "ops/search.h"
#include "ops/view.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"
#include "python/convert.h"

namespace py = pybind11;

namespace kiln::python {

void init_index_reduce(py::module_& m, TensorClass& cls);

namespace {

// Note [Python indexing]: ints, slices, None and Ellipsis are applied as views
// (select/slice/unsqueeze), so basic indexing aliases the tensor. Tensor-like
// indices are collected, one entry per remaining view dim (undefined = ':'),
// and applied at the end with kiln::index, which places the broadcast index
// dims by NumPy's rule. As in PyTorch, ints are selects, not advanced indices.
struct Indexed {
  Tensor view;
  std::vector<Tensor> entries;
  bool advanced = false;
};

std::string type_name(py::handle h) { return py::str(py::type::of(h).attr("__name__")); }

Tensor index_tensor(py::handle h) {
  if (py::isinstance<TensorImpl>(h)) return h.cast<Tensor>();
  Tensor t = tensor_from_data(h, std::nullopt, "index");
  // An empty list means "no positions", not an empty float tensor.
  if (t.numel() == 0 && is_floating(t.dtype())) t = to_dtype(t, DType::Int64);
  return t;
}

Indexed apply_index(const Tensor& self, py::handle index) {
  std::vector<py::object> items;
  if (PyTuple_Check(index.ptr())) {
    for (py::handle h : py::reinterpret_borrow<py::tuple>(index))
      items.push_back(py::reinterpret_borrow<py::object>(h));
  } else {
    items.push_back(py::reinterpret_borrow<py::object>(index));
  }
  // Classify first: the Ellipsis width depends on how many dims the rest consumes.
  enum Kind { Int, Slice, None, Dots, BoolScalar, Adv };
  std::vector<Kind> kinds;
  std::vector<Tensor> tensors(items.size());
  std::vector<int64_t> ints(items.size());
  int64_t consumed = 0;
  bool seen_dots = false;
  for (size_t i = 0; i < items.size(); ++i) {
    PyObject* p = items[i].ptr();
    if (PyBool_Check(p)) {
      kinds.push_back(BoolScalar);
    } else if (py::isinstance<TensorImpl>(p)) {
      tensors[i] = items[i].cast<Tensor>();
      const DType dt = tensors[i].dtype();
      // As in PyTorch, a 0-d integer tensor indexes like a Python int (a view).
      const bool as_int =
          tensors[i].dim() == 0 && !is_floating(dt) && dt != DType::Bool && dt != DType::UInt8;
      if (as_int) ints[i] = item(tensors[i]).cast<int64_t>();
      kinds.push_back(as_int ? Int : Adv);
    } else if (PyLong_Check(p)) {
      ints[i] = py::int_(items[i]).cast<int64_t>();
      kinds.push_back(Int);
    } else if (PySlice_Check(p)) {
      kinds.push_back(Slice);
    } else if (p == Py_None) {
      kinds.push_back(None);
    } else if (p == Py_Ellipsis) {
      KILN_CHECK(!seen_dots, Index, "[index] an index can only have a single ellipsis ('...')");
      seen_dots = true;
      kinds.push_back(Dots);
    } else if (PyList_Check(p) || PyTuple_Check(p) || PyRange_Check(p) ||
               py::isinstance<py::array>(items[i])) {  // x[range(3), idx]: as in PyTorch
      tensors[i] = index_tensor(items[i]);
      kinds.push_back(Adv);
    } else if (PyIndex_Check(p)) {
      ints[i] = py::int_(items[i]).cast<int64_t>();
      kinds.push_back(Int);
    } else {
      fail(ErrorKind::Index,
           "[index] only integers, slices (`:`), ellipsis (`...`), None and long or byte tensors "
           "are valid indices (got ",
           type_name(p), ")");
    }
    Kind k = kinds.back();
    if (k == Int || k == Slice) consumed += 1;
    if (k == Adv) {
      const Tensor& t = tensors[i];
      consumed += (t.dtype() == DType::Bool || t.dtype() == DType::UInt8) ? t.dim() : 1;
    }
  }
  KILN_CHECK(consumed <= self.dim(), Index, "[index] too many indices for tensor of dimension ",
             self.dim());
  Indexed r{self, {}, false};
  int64_t d = 0, orig = 0;  // dim in the view, dim in self (for messages)
  for (size_t i = 0; i < items.size(); ++i) {
    switch (kinds[i]) {
      case Int: {
        const int64_t v = ints[i], size = r.view.size(d);
        KILN_CHECK(v >= -size && v < size, Index, "[index] index ", v,
                   " is out of bounds for dimension ", orig, " with size ", size);
        r.view = select(r.view, d, v);
        ++orig;
        break;
      }
      case Slice: {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(items[i].ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
        KILN_CHECK(step > 0, Value, "[index] step must be greater than zero, got ", step);
        r.view = slice(r.view, d, start, stop, step);
        r.entries.emplace_back();
        ++d, ++orig;
        break;
      }
      case None:
        r.view = unsqueeze(r.view, d);
        r.entries.emplace_back();
        ++d;
        break;
      case Dots:
        for (int64_t k = 0; k < self.dim() - consumed; ++k, ++d, ++orig) r.entries.emplace_back();
        break;
      case BoolScalar:
        r.entries.push_back(scalar_tensor(Scalar(items[i].cast<bool>()), DType::Bool));
        r.advanced = true;
        break;
      case Adv: {
        const Tensor& t = tensors[i];
        r.entries.push_back(t);
        r.advanced = true;
        int64_t n = (t.dtype() == DType::Bool || t.dtype() == DType::UInt8) ? t.dim() : 1;
        d += n, orig += n;
        break;
      }
    }
  }
  return r;
}

Tensor getitem(const Tensor& self, py::handle index) {
  // Fast path for the most common case.
  if (PyLong_Check(index.ptr()) && !PyBool_Check(index.ptr())) {
    KILN_CHECK(self.dim() > 0, Index,
               "[index] invalid index of a 0-dim tensor. Use `tensor.item()` in Python to convert "
               "a 0-dim tensor to a number");
    const int64_t v = index.cast<int64_t>(), size = self.size(0);
    KILN_CHECK(v >= -size && v < size, Index, "[index] index ", v,
               " is out of bounds for dimension 0 with size ", size);
    return select(self, 0, v);
  }
  Indexed r = apply_index(self, index);
  if (r.advanced) return kiln::index(r.view, r.entries);
  // x[...] and x[()] alias self as a new tensor, like PyTorch.
  return r.view.is_same(self) ? view(self, self.sizes()) : r.view;
}

Tensor value_tensor(py::handle value, const Tensor& self) {
  Tensor v;
  Scalar s;
  if (py::isinstance<TensorImpl>(value)) {
    v = to_dtype(value.cast<Tensor>(), self.dtype());
  } else if (scalar_from_object(value, &s)) {
    v = scalar_tensor(s, self.dtype(), Device(), "index_put_");
  } else {
    v = to_dtype(tensor_from_data(value, std::nullopt, "index_put_"), self.dtype());
  }
  return v.device() == self.device() ? v : to_device(v, self.device());
}

void setitem(const Tensor& self, py::handle index, py::handle value) {
  Indexed r = apply_index(self, index);
  Tensor v = value_tensor(value, self);
  // PyTorch drops leading size-1 dims of the value beyond the target's rank.
  while (v.dim() > r.view.dim() && v.size(0) == 1) v = squeeze(v, std::vector<int64_t>{0});
  apply_inplace(
      self, {v}, "index_put_",
      [&](const Tensor& s) {
        // Row-major positions of the written elements, from the same index on an arange.
        Tensor numbering = reshape(arange(Scalar(int64_t(0)), Scalar(self.numel()),
                                          Scalar(int64_t(1)), DType::Int64, self.device()),
                                   self.sizes());
        Tensor pos = getitem(numbering, index);
        KILN_CHECK(broadcast_shapes(pos.sizes(), v.sizes(), "index_put_") == pos.sizes(), Runtime,
                   "[index_put_] shape mismatch: value tensor of shape ", v.sizes(),
                   " cannot be broadcast to indexing result of shape ", pos.sizes());
        return put(s, pos, contiguous(expand(v, pos.sizes())));
      },
      [&] {
        if (r.advanced) {
          index_put_(r.view, r.entries, v);
        } else {
          copy_(r.view, v);
        }
      });
}

// scatter's src-or-value argument, with PyTorch's reduce= keyword.
std::optional<std::string> parse_reduce(py::object reduce) {
  if (reduce.is_none()) return std::nullopt;
  return py::str(reduce).cast<std::string>();
}

std::vector<Tensor> parse_indices(py::handle indices) {
  std::vector<Tensor> out;
  for (py::handle h : py::reinterpret_borrow<py::sequence>(indices))
    out.push_back(h.is_none() ? Tensor() : index_tensor(h));
  return out;
}

}  // namespace

void init_index(py::module_& m, TensorClass& cls) {
  cls.def("__getitem__", [](const Tensor& self, py::handle index) { return getitem(self, index); });
  cls.def("__setitem__", [](const Tensor& self, py::handle index, py::handle value) {
    setitem(self, index, value);
  });

  m.def(
      "gather",
      [](const Tensor& x, int64_t dim, const Tensor& index, bool) { return gather(x, dim, index); },
      py::arg("input"), py::arg("dim"), py::arg("index"), py::kw_only(),
      py::arg("sparse_grad") = false);
  cls.def(
      "gather",
      [](const Tensor& x, int64_t dim, const Tensor& index) { return gather(x, dim, index); },
      py::arg("dim"), py::arg("index"));

  // scatter(dim, index, src) and scatter(dim, index, value): the tensor overload is
  // registered first so a tensor src is never read as a 1-element scalar.
  auto scatter_src = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                        py::object reduce) {
    return scatter(x, dim, index, src, parse_reduce(reduce));
  };
  auto scatter_val = [](const Tensor& x, int64_t dim, const Tensor& index, Scalar value,
                        py::object reduce) {
    return scatter(x, dim, index, value, parse_reduce(reduce));
  };
  auto scatter_src_ = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                         py::object reduce) {
    return scatter_(x, dim, index, src, parse_reduce(reduce));
  };
  auto scatter_val_ = [](const Tensor& x, int64_t dim, const Tensor& index, Scalar value,
                         py::object reduce) {
    return scatter_(x, dim, index, value, parse_reduce(reduce));
  };
  m.def("scatter", scatter_src, py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"),
        py::kw_only(), py::arg("reduce") = py::none());
  m.def("scatter", scatter_val, py::arg("input"), py::arg("dim"), py::arg("index"),
        py::arg("value"), py::kw_only(), py::arg("reduce") = py::none());
  cls.def("scatter", scatter_src, py::arg("dim"), py::arg("index"), py::arg("src"), py::kw_only(),
          py::arg("reduce") = py::none());
  cls.def("scatter", scatter_val, py::arg("dim"), py::arg("index"), py::arg("value"), py::kw_only(),
          py::arg("reduce") = py::none());
  cls.def("scatter_", scatter_src_, py::arg("dim"), py::arg("index"), py::arg("src"), py::kw_only(),
          py::arg("reduce") = py::none());
  cls.def("scatter_", scatter_val_, py::arg("dim"), py::arg("index"), py::arg("value"),
          py::kw_only(), py::arg("reduce") = py::none());

  m.def(
      "scatter_add",
      [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
        return scatter_add(x, dim, index, src);
      },
      py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"));
  cls.def(
      "scatter_add",
      [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
        return scatter_add(x, dim, index, src);
      },
      py::arg("dim"), py::arg("index"), py::arg("src"));
  cls.def(
      "scatter_add_",
      [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
        return scatter_add_(x, dim, index, src);
      },
      py::arg("dim"), py::arg("index"), py::arg("src"));

  m.def(
      "index_select",
      [](const Tensor& x, int64_t dim, const Tensor& index) { return index_select(x, dim, index); },
      py::arg("input"), py::arg("dim"), py::arg("index"));
  cls.def(
      "index_select",
      [](const Tensor& x, int64_t dim, const Tensor& index) { return index_select(x, dim, index); },
      py::arg("dim"), py::arg("index"));

  auto index_add_fn = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                         Scalar alpha) { return index_add(x, dim, index, source, alpha); };
  m.def("index_add", index_add_fn, py::arg("input"), py::arg("dim"), py::arg("index"),
        py::arg("source"), py::kw_only(), py::arg("alpha") = Scalar(1));
  cls.def("index_add", index_add_fn, py::arg("dim"), py::arg("index"), py::arg("source"),
          py::kw_only(), py::arg("alpha") = Scalar(1));
  cls.def(
      "index_add_",
      [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha) {
        return index_add_(x, dim, index, source, alpha);
      },
      py::arg("dim"), py::arg("index"), py::arg("source"), py::kw_only(),
      py::arg("alpha") = Scalar(1));

  // index_fill(dim, index, value): the tensor overload first, so a tensor value keeps its
  // autograd history and a 1-element non-0-d tensor is refused rather than read as a number.
  auto fill_t = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
    return index_fill(x, dim, index, value);
  };
  auto fill_s = [](const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
    return index_fill(x, dim, index, value);
  };
  auto fill_t_ = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
    return index_fill_(x, dim, index, value);
  };
  auto fill_s_ = [](const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
    return index_fill_(x, dim, index, value);
  };
  m.def("index_fill", fill_t, py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("value"));
  m.def("index_fill", fill_s, py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("value"));
  cls.def("index_fill", fill_t, py::arg("dim"), py::arg("index"), py::arg("value"));
  cls.def("index_fill", fill_s, py::arg("dim"), py::arg("index"), py::arg("value"));
  cls.def("index_fill_", fill_t_, py::arg("dim"), py::arg("index"), py::arg("value"));
  cls.def("index_fill_", fill_s_, py::arg("dim"), py::arg("index"), py::arg("value"));

  auto copy_fn = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
    return index_copy(x, dim, index, source);
  };
  m.def("index_copy", copy_fn, py::arg("input"), py::arg("dim"), py::arg("index"),
        py::arg("source"));
  cls.def("index_copy", copy_fn, py::arg("dim"), py::arg("index"), py::arg("source"));
  cls.def(
      "index_copy_",
      [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
        return index_copy_(x, dim, index, source);
      },
      py::arg("dim"), py::arg("index"), py::arg("source"));

  // searchsorted/bucketize take a tensor or a Python number as input (a number gives a 0-d
  // result); sorter=None is an undefined tensor.
  m.def(
      "searchsorted",
      [](const Tensor& seq, py::handle input, bool out_int32, bool right,
         std::optional<std::string> side, std::optional<Tensor> sorter) {
        return searchsorted(seq, to_tensor_arg(input, "searchsorted", "input"), out_int32, right,
                            side, sorter.value_or(Tensor()));
      },
      py::arg("sorted_sequence"), py::arg("input"), py::kw_only(), py::arg("out_int32") = false,
      py::arg("right") = false, py::arg("side") = py::none(), py::arg("sorter") = py::none());
  m.def(
      "bucketize",
      [](py::handle input, const Tensor& boundaries, bool out_int32, bool right) {
        return bucketize(to_tensor_arg(input, "bucketize", "input"), boundaries, out_int32, right);
      },
      py::arg("input"), py::arg("boundaries"), py::kw_only(), py::arg("out_int32") = false,
      py::arg("right") = false);

  auto bincount_fn = [](const Tensor& x, std::optional<Tensor> weights, int64_t minlength) {
    return bincount(x, weights.value_or(Tensor()), minlength);
  };
  m.def("bincount", bincount_fn, py::arg("input"), py::arg("weights") = py::none(),
        py::arg("minlength") = 0);
  cls.def("bincount", bincount_fn, py::arg("weights") = py::none(), py::arg("minlength") = 0);
  auto histc_fn = [](const Tensor& x, int64_t bins, Scalar min, Scalar max) {
    return histc(x, bins, min, max);
  };
  m.def("histc", histc_fn, py::arg("input"), py::arg("bins") = 100, py::arg("min") = Scalar(0),
        py::arg("max") = Scalar(0));
  cls.def("histc", histc_fn, py::arg("bins") = 100, py::arg("min") = Scalar(0),
          py::arg("max") = Scalar(0));

  // masked_fill's value: a number, or a 0-d tensor (which may require grad).
  auto fill_value = [](const Tensor& x, py::handle value) {
    if (py::isinstance<TensorImpl>(value)) return value.cast<Tensor>();
    Scalar s;
    KILN_CHECK(scalar_from_object(value, &s), Type,
               "[masked_fill] value must be a number or a 0-d tensor, not ", type_name(value));
    return scalar_tensor(s, x.dtype(), Device(), "masked_fill");
  };
  auto masked_fill_fn = [fill_value](const Tensor& x, const Tensor& mask, py::object value) {
    return masked_fill(x, mask, fill_value(x, value));
  };
  m.def("masked_fill", masked_fill_fn, py::arg("input"), py::arg("mask"), py::arg("value"));
  cls.def("masked_fill", masked_fill_fn, py::arg("mask"), py::arg("value"));
  cls.def(
      "masked_fill_",
      [fill_value](const Tensor& x, const Tensor& mask, py::object value) {
        return masked_fill_(x, mask, fill_value(x, value));
      },
      py::arg("mask"), py::arg("value"));

  m.def(
      "masked_select", [](const Tensor& x, const Tensor& mask) { return masked_select(x, mask); },
      py::arg("input"), py::arg("mask"));
  cls.def(
      "masked_select", [](const Tensor& x, const Tensor& mask) { return masked_select(x, mask); },
      py::arg("mask"));

  auto nonzero_fn = [](const Tensor& x, bool as_tuple) -> py::object {
    if (as_tuple) return py::tuple(py::cast(nonzero_tuple(x)));
    return py::cast(nonzero(x));
  };
  m.def("nonzero", nonzero_fn, py::arg("input"), py::kw_only(), py::arg("as_tuple") = false);
  cls.def("nonzero", nonzero_fn, py::kw_only(), py::arg("as_tuple") = false);

  m.def(
      "take", [](const Tensor& x, const Tensor& index) { return take(x, index); }, py::arg("input"),
      py::arg("index"));
  cls.def(
      "take", [](const Tensor& x, const Tensor& index) { return take(x, index); },
      py::arg("index"));
  m.def(
      "put",
      [](const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
        return put(x, index, source, accumulate);
      },
      py::arg("input"), py::arg("index"), py::arg("source"), py::arg("accumulate") = false);
  cls.def(
      "put",
      [](const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
        return put(x, index, source, accumulate);
      },
      py::arg("index"), py::arg("source"), py::arg("accumulate") = false);
  cls.def(
      "put_",
      [](const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
        return put_(x, index, source, accumulate);
      },
      py::arg("index"), py::arg("source"), py::arg("accumulate") = false);

  m.def(
      "index_put",
      [](const Tensor& x, py::object indices, const Tensor& values, bool acc) {
        return index_put(x, parse_indices(indices), values, acc);
      },
      py::arg("input"), py::arg("indices"), py::arg("values"), py::arg("accumulate") = false);
  cls.def(
      "index_put",
      [](const Tensor& x, py::object indices, const Tensor& values, bool acc) {
        return index_put(x, parse_indices(indices), values, acc);
      },
      py::arg("indices"), py::arg("values"), py::arg("accumulate") = false);
  cls.def(
      "index_put_",
      [](const Tensor& x, py::object indices, const Tensor& values, bool acc) {
        return index_put_(x, parse_indices(indices), values, acc);
      },
      py::arg("indices"), py::arg("values"), py::arg("accumulate") = false);
  init_index_reduce(m, cls);
}

void init_index_reduce(py::module_& m, TensorClass& cls) {
  m.def("scatter_reduce", &scatter_reduce, py::arg("input"), py::arg("dim"), py::arg("index"),
        py::arg("src"), py::arg("reduce"), py::kw_only(), py::arg("include_self") = true);
  cls.def("scatter_reduce", &scatter_reduce, py::arg("dim"), py::arg("index"), py::arg("src"),
          py::arg("reduce"), py::kw_only(), py::arg("include_self") = true);
  cls.def("scatter_reduce_", &scatter_reduce_, py::arg("dim"), py::arg("index"), py::arg("src"),
          py::arg("reduce"), py::kw_only(), py::arg("include_self") = true);
  m.def("index_reduce", &index_reduce, py::arg("input"), py::arg("dim"), py::arg("index"),
        py::arg("source"), py::arg("reduce"), py::kw_only(), py::arg("include_self") = true);
  cls.def("index_reduce", &index_reduce, py::arg("dim"), py::arg("index"), py::arg("source"),
          py::arg("reduce"), py::kw_only(), py::arg("include_self") = true);
  cls.def("index_reduce_", &index_reduce_, py::arg("dim"), py::arg("index"), py::arg("source"),
          py::arg("reduce"), py::kw_only(), py::arg("include_self") = true);
  m.def("masked_scatter", &masked_scatter, py::arg("input"), py::arg("mask"), py::arg("source"));
  cls.def("masked_scatter", &masked_scatter, py::arg("mask"), py::arg("source"));
  cls.def("masked_scatter_", &masked_scatter_, py::arg("mask"), py::arg("source"));
}

}  // namespace kiln::python
