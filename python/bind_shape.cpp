// Shape and sorting ops: kiln.cat/stack/split/..., kiln.sort/topk/unique/...
// Ops returning (values, indices) give named tuples, as torch.return_types does.
#include <pybind11/stl.h>

#include "core/error.h"
#include "core/shape.h"
#include "core/flags.h"
#include "ops/shape.h"
#include "ops/shape_extra.h"
#include "ops/sort.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

std::vector<Tensor> parse_tensor_list(py::handle h, const char* op) {
  KILN_CHECK(py::isinstance<py::sequence>(h) && !py::isinstance<TensorImpl>(h), Type, "[", op,
             "] argument 'tensors' must be a tuple or list of Tensors, not ",
             std::string(py::str(py::type::of(h).attr("__name__"))));
  std::vector<Tensor> out;
  size_t i = 0;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(h)) {
    KILN_CHECK(py::isinstance<TensorImpl>(item), Type, "[", op, "] expected Tensor as element ", i,
               " in argument 'tensors', but got ",
               std::string(py::str(py::type::of(item).attr("__name__"))));
    out.push_back(item.cast<Tensor>());
    ++i;
  }
  return out;
}

py::tuple to_tuple(const std::vector<Tensor>& ts) {
  py::tuple t(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) t[i] = py::cast(ts[i]);
  return t;
}

// An int or a sequence of ints (roll's shifts/dims, flip's dims).
std::vector<int64_t> int_list(py::handle h, const char* op) { return parse_shape_object(h, op); }

// kiln.return_types.<name>(values, indices), shared with other binding files.
py::object return_type(py::module_& m, const char* name) {
  py::module_ types = py::hasattr(m, "return_types")
                          ? py::reinterpret_borrow<py::module_>(m.attr("return_types"))
                          : m.def_submodule("return_types", "Named tuples returned by ops");
  if (!py::hasattr(types, name)) {
    types.attr(name) = py::module_::import("collections")
                           .attr("namedtuple")(name, py::make_tuple("values", "indices"),
                                               py::arg("module") = "kiln.return_types");
  }
  return types.attr(name);
}

}  // namespace

void init_shape_extra(py::module_& m, TensorClass& cls);

void init_shape(py::module_& m, TensorClass& cls) {
  // Joining.
  for (const char* name : {"cat", "concat"}) {
    m.def(
        name,
        [](py::object tensors, int64_t dim) { return cat(parse_tensor_list(tensors, "cat"), dim); },
        py::arg("tensors"), py::arg("dim") = 0);
  }
  m.def(
      "concatenate",
      [](py::object tensors, int64_t axis) { return cat(parse_tensor_list(tensors, "cat"), axis); },
      py::arg("tensors"), py::arg("axis") = 0);
  m.def(
      "stack",
      [](py::object tensors, int64_t dim) {
        return stack(parse_tensor_list(tensors, "stack"), dim);
      },
      py::arg("tensors"), py::arg("dim") = 0);
  m.def(
      "hstack", [](py::object tensors) { return hstack(parse_tensor_list(tensors, "hstack")); },
      py::arg("tensors"));
  m.def(
      "vstack", [](py::object tensors) { return vstack(parse_tensor_list(tensors, "vstack")); },
      py::arg("tensors"));
  m.def(
      "dstack", [](py::object tensors) { return dstack(parse_tensor_list(tensors, "dstack")); },
      py::arg("tensors"));

  // Splitting into views.
  auto split_fn = [](const Tensor& x, py::object sizes, int64_t dim) {
    if (PyLong_Check(sizes.ptr())) return to_tuple(split(x, sizes.cast<int64_t>(), dim));
    return to_tuple(split_with_sizes(x, parse_shape_object(sizes, "split"), dim));
  };
  m.def("split", split_fn, py::arg("tensor"), py::arg("split_size_or_sections"),
        py::arg("dim") = 0);
  cls.def("split", split_fn, py::arg("split_size"), py::arg("dim") = 0);
  cls.def(
      "split_with_sizes",
      [](const Tensor& x, py::object sizes, int64_t dim) {
        return to_tuple(split_with_sizes(x, parse_shape_object(sizes, "split_with_sizes"), dim));
      },
      py::arg("split_sizes"), py::arg("dim") = 0);
  auto chunk_fn = [](const Tensor& x, int64_t chunks, int64_t dim) {
    return to_tuple(chunk(x, chunks, dim));
  };
  m.def("chunk", chunk_fn, py::arg("input"), py::arg("chunks"), py::arg("dim") = 0);
  cls.def("chunk", chunk_fn, py::arg("chunks"), py::arg("dim") = 0);
  // An int (sections), a sequence of indices, or a 0-d / 1-D int64 tensor of either. PyTorch's
  // overloads name it sections=, indices= or tensor_indices_or_sections=; its docs say
  // indices_or_sections: all four keywords are accepted, exactly one of them given.
  auto tensor_split_fn = [](const Tensor& x, py::object ios, int64_t dim, py::object sections,
                            py::object indices, py::object tensor_ios) {
    int given = ios.is_none() ? 0 : 1;
    for (const py::object& alias : {sections, indices, tensor_ios}) {
      if (alias.is_none()) continue;
      ++given;
      ios = alias;
    }
    KILN_CHECK(given == 1, Type, "[tensor_split] expected exactly one of indices_or_sections, "
               "sections, indices or tensor_indices_or_sections, got ", given);
    if (py::isinstance<TensorImpl>(ios)) return to_tuple(tensor_split(x, ios.cast<Tensor>(), dim));
    if (PyLong_Check(ios.ptr())) return to_tuple(tensor_split(x, ios.cast<int64_t>(), dim));
    return to_tuple(tensor_split(x, int_list(ios, "tensor_split"), dim));
  };
  m.def("tensor_split", tensor_split_fn, py::arg("input"),
        py::arg("indices_or_sections") = py::none(), py::arg("dim") = 0, py::kw_only(),
        py::arg("sections") = py::none(), py::arg("indices") = py::none(),
        py::arg("tensor_indices_or_sections") = py::none());
  cls.def("tensor_split", tensor_split_fn, py::arg("indices_or_sections") = py::none(),
          py::arg("dim") = 0, py::kw_only(), py::arg("sections") = py::none(),
          py::arg("indices") = py::none(), py::arg("tensor_indices_or_sections") = py::none());
  auto unbind_fn = [](const Tensor& x, int64_t dim) { return to_tuple(unbind(x, dim)); };
  m.def("unbind", unbind_fn, py::arg("input"), py::arg("dim") = 0);
  cls.def("unbind", unbind_fn, py::arg("dim") = 0);

  // Reordering and repetition.
  m.def(
      "flip", [](const Tensor& x, py::object dims) { return flip(x, int_list(dims, "flip")); },
      py::arg("input"), py::arg("dims"));
  cls.def("flip", [](const Tensor& x, py::args dims) {
    KILN_CHECK(!dims.empty(), Type, "[flip] flip() missing 1 required positional argument: 'dims'");
    return flip(x, parse_shape(dims, "flip"));
  });
  auto fliplr_fn = [](const Tensor& x) {
    KILN_CHECK(x.dim() >= 2, Runtime, "[fliplr] Input must be >= 2-d, got shape ", x.sizes());
    return flip(x, {1});
  };
  auto flipud_fn = [](const Tensor& x) {
    KILN_CHECK(x.dim() >= 1, Runtime, "[flipud] Input must be >= 1-d, got shape ", x.sizes());
    return flip(x, {0});
  };
  m.def("fliplr", fliplr_fn, py::arg("input"));
  cls.def("fliplr", fliplr_fn);
  m.def("flipud", flipud_fn, py::arg("input"));
  cls.def("flipud", flipud_fn);
  auto rot90_fn = [](const Tensor& x, int64_t k, py::object dims) {
    return rot90(x, k, int_list(dims, "rot90"));
  };
  m.def("rot90", rot90_fn, py::arg("input"), py::arg("k") = 1,
        py::arg("dims") = py::make_tuple(0, 1));
  cls.def("rot90", rot90_fn, py::arg("k") = 1, py::arg("dims") = py::make_tuple(0, 1));
  auto roll_fn = [](const Tensor& x, py::object shifts, py::object dims) {
    std::vector<int64_t> d;
    if (!dims.is_none()) d = int_list(dims, "roll");
    return roll(x, int_list(shifts, "roll"), d);
  };
  m.def("roll", roll_fn, py::arg("input"), py::arg("shifts"), py::arg("dims") = py::none());
  cls.def("roll", roll_fn, py::arg("shifts"), py::arg("dims") = py::none());
  cls.def("repeat",
          [](const Tensor& x, py::args sizes) { return repeat(x, parse_shape(sizes, "repeat")); });
  m.def(
      "tile", [](const Tensor& x, py::object dims) { return tile(x, int_list(dims, "tile")); },
      py::arg("input"), py::arg("dims"));
  cls.def("tile",
          [](const Tensor& x, py::args dims) { return tile(x, parse_shape(dims, "tile")); });

  // repeat_interleave(input, repeats, dim) or repeat_interleave(repeats); output_size is
  // PyTorch's way to skip reading the counts, checked here against the result.
  auto repeat_interleave_fn = [](const Tensor& x, py::object repeats, std::optional<int64_t> dim,
                                 std::optional<int64_t> output_size) {
    Tensor out;
    if (repeats.is_none()) {
      out = repeat_interleave(x);
    } else if (py::isinstance<TensorImpl>(repeats)) {
      out = repeat_interleave(x, repeats.cast<Tensor>(), dim);
    } else {
      out = repeat_interleave(x, repeats.cast<int64_t>(), dim);
    }
    const int64_t d = dim ? wrap_dim(*dim, out.dim(), "repeat_interleave") : 0;
    KILN_CHECK(!output_size || out.size(d) == *output_size, Runtime,
               "[repeat_interleave] output_size=", *output_size, " does not match the repeated "
               "size ", out.size(d));
    return out;
  };
  m.def("repeat_interleave", repeat_interleave_fn, py::arg("input"),
        py::arg("repeats") = py::none(), py::arg("dim") = py::none(), py::kw_only(),
        py::arg("output_size") = py::none());
  cls.def("repeat_interleave", repeat_interleave_fn, py::arg("repeats"),
          py::arg("dim") = py::none(), py::kw_only(), py::arg("output_size") = py::none());

  // Triangles.
  m.def(
      "tril", [](const Tensor& x, int64_t k) { return tril(x, k); }, py::arg("input"),
      py::arg("diagonal") = 0);
  m.def(
      "triu", [](const Tensor& x, int64_t k) { return triu(x, k); }, py::arg("input"),
      py::arg("diagonal") = 0);
  cls.def(
      "tril", [](const Tensor& x, int64_t k) { return tril(x, k); }, py::arg("diagonal") = 0);
  cls.def(
      "triu", [](const Tensor& x, int64_t k) { return triu(x, k); }, py::arg("diagonal") = 0);
  cls.def(
      "tril_", [](const Tensor& x, int64_t k) { return tril_(x, k); }, py::arg("diagonal") = 0);
  cls.def(
      "triu_", [](const Tensor& x, int64_t k) { return triu_(x, k); }, py::arg("diagonal") = 0);

  // Sorting and selection.
  py::object sort_t = return_type(m, "sort"), topk_t = return_type(m, "topk");
  py::object kth_t = return_type(m, "kthvalue"), median_t = return_type(m, "median");
  auto pair = [](const py::object& type, const std::tuple<Tensor, Tensor>& r) {
    return type(py::cast(std::get<0>(r)), py::cast(std::get<1>(r)));
  };
  // stable may be None, as in PyTorch's signature.
  auto sort_fn = [sort_t, pair](const Tensor& x, int64_t dim, bool descending,
                                std::optional<bool> stable) {
    return pair(sort_t, sort(x, dim, descending, stable.value_or(false)));
  };
  m.def("sort", sort_fn, py::arg("input"), py::arg("dim") = -1, py::arg("descending") = false,
        py::arg("stable") = false);
  cls.def("sort", sort_fn, py::arg("dim") = -1, py::arg("descending") = false,
          py::arg("stable") = false);
  auto argsort_fn = [](const Tensor& x, int64_t dim, bool descending, std::optional<bool> stable) {
    return argsort(x, dim, descending, stable.value_or(false));
  };
  m.def("argsort", argsort_fn, py::arg("input"), py::arg("dim") = -1, py::arg("descending") = false,
        py::kw_only(), py::arg("stable") = false);
  cls.def("argsort", argsort_fn, py::arg("dim") = -1, py::arg("descending") = false, py::kw_only(),
          py::arg("stable") = false);
  auto topk_fn = [topk_t, pair](const Tensor& x, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
    return pair(topk_t, topk(x, k, dim, largest, sorted));
  };
  m.def("topk", topk_fn, py::arg("input"), py::arg("k"), py::arg("dim") = -1,
        py::arg("largest") = true, py::arg("sorted") = true);
  cls.def("topk", topk_fn, py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true,
          py::arg("sorted") = true);
  auto kth_fn = [kth_t, pair](const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
    return pair(kth_t, kthvalue(x, k, dim, keepdim));
  };
  m.def("kthvalue", kth_fn, py::arg("input"), py::arg("k"), py::arg("dim") = -1,
        py::arg("keepdim") = false);
  cls.def("kthvalue", kth_fn, py::arg("k"), py::arg("dim") = -1, py::arg("keepdim") = false);
  // median(input) -> Tensor; median(input, dim, keepdim=False) -> (values, indices).
  auto median_fn = [median_t, pair](const Tensor& x, py::object dim, bool keepdim) -> py::object {
    if (dim.is_none()) return py::cast(median(x));
    return pair(median_t, median(x, dim.cast<int64_t>(), keepdim));
  };
  m.def("median", median_fn, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false);
  cls.def("median", median_fn, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  auto unique_fn = [](const Tensor& x, bool sorted, bool return_inverse, bool return_counts,
                      std::optional<int64_t> dim) -> py::object {
    auto [out, inverse, counts] = unique(x, sorted, dim);
    if (!return_inverse && !return_counts) return py::cast(out);
    py::list r;
    r.append(py::cast(out));
    if (return_inverse) r.append(py::cast(inverse));
    if (return_counts) r.append(py::cast(counts));
    return py::tuple(r);
  };
  m.def("unique", unique_fn, py::arg("input"), py::arg("sorted") = true,
        py::arg("return_inverse") = false, py::arg("return_counts") = false,
        py::arg("dim") = py::none());
  cls.def("unique", unique_fn, py::arg("sorted") = true, py::arg("return_inverse") = false,
          py::arg("return_counts") = false, py::arg("dim") = py::none());
  init_shape_extra(m, cls);
}

namespace {

// atleast_Nd(x) -> Tensor; atleast_Nd(x, y, ...) and atleast_Nd([x, y]) -> tuple.
py::object atleast(const py::args& args, Tensor (*fn)(const Tensor&), const char* op) {
  if (args.size() == 1 && py::isinstance<TensorImpl>(args[0]))
    return py::cast(fn(args[0].cast<Tensor>()));
  py::object seq = args.size() == 1 ? py::reinterpret_borrow<py::object>(args[0])
                                     : py::object(args);
  std::vector<Tensor> ts = parse_tensor_list(seq, op);
  for (Tensor& t : ts) t = fn(t);
  return to_tuple(ts);
}

// hsplit/vsplit/dsplit's indices_or_sections: an int (equal parts) or a sequence of indices.
template <typename IntFn, typename ListFn>
py::tuple split_by(const Tensor& x, py::object ios, IntFn by_int, ListFn by_list, const char* op) {
  if (PyLong_Check(ios.ptr())) return to_tuple(by_int(x, ios.cast<int64_t>()));
  return to_tuple(by_list(x, int_list(ios, op)));
}

}  // namespace

void init_shape_extra(py::module_& m, TensorClass& cls) {
  m.def("atleast_1d", [](py::args a) { return atleast(a, atleast_1d, "atleast_1d"); });
  m.def("atleast_2d", [](py::args a) { return atleast(a, atleast_2d, "atleast_2d"); });
  m.def("atleast_3d", [](py::args a) { return atleast(a, atleast_3d, "atleast_3d"); });
  m.def(
      "column_stack",
      [](py::object tensors) { return column_stack(parse_tensor_list(tensors, "column_stack")); },
      py::arg("tensors"));
  m.def(
      "row_stack", [](py::object tensors) { return vstack(parse_tensor_list(tensors, "row_stack")); },
      py::arg("tensors"));
  using IntSplit = std::vector<Tensor> (*)(const Tensor&, int64_t);
  using ListSplit = std::vector<Tensor> (*)(const Tensor&, const std::vector<int64_t>&);
  struct SplitFns {
    const char* name;
    IntSplit by_int;
    ListSplit by_list;
  };
  for (SplitFns f : {SplitFns{"hsplit", hsplit, hsplit}, SplitFns{"vsplit", vsplit, vsplit},
                     SplitFns{"dsplit", dsplit, dsplit}}) {
    auto fn = [f](const Tensor& x, py::object ios) {
      return split_by(x, ios, f.by_int, f.by_list, f.name);
    };
    m.def(f.name, fn, py::arg("input"), py::arg("indices_or_sections"));
    cls.def(f.name, fn, py::arg("indices_or_sections"));
  }
  m.def("ravel", &ravel, py::arg("input"));
  cls.def("ravel", &ravel);
  m.def("argwhere", &argwhere, py::arg("input"));
  cls.def("argwhere", &argwhere);
  m.def("block_diag", [](py::args tensors) {
    return block_diag(parse_tensor_list(tensors, "block_diag"));
  });
  m.def("diag_embed", &diag_embed, py::arg("input"), py::arg("offset") = 0, py::arg("dim1") = -2,
        py::arg("dim2") = -1);
  cls.def("diag_embed", &diag_embed, py::arg("offset") = 0, py::arg("dim1") = -2,
          py::arg("dim2") = -1);
  m.def("diagflat", &diagflat, py::arg("input"), py::arg("offset") = 0);
  cls.def("diagflat", &diagflat, py::arg("offset") = 0);
  for (bool upper : {false, true}) {
    const char* name = upper ? "triu_indices" : "tril_indices";
    m.def(
        name,
        [upper, name](int64_t row, int64_t col, int64_t offset, py::object dtype,
                      py::object device, py::object) {
          DType dt = parse_dtype(dtype, name).value_or(DType::Int64);
          Device dev = device.is_none() ? Device() : parse_device(device, name);
          return upper ? triu_indices(row, col, offset, dt, dev)
                       : tril_indices(row, col, offset, dt, dev);
        },
        py::arg("row"), py::arg("col"), py::arg("offset") = 0, py::kw_only(),
        py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        py::arg("layout") = py::none());
  }
  m.def("combinations", &combinations, py::arg("input"), py::arg("r") = 2,
        py::arg("with_replacement") = false);
  m.def("vander", &vander, py::arg("x"), py::arg("N") = py::none(),
        py::arg("increasing") = false);
  m.def("take_along_dim", &take_along_dim, py::arg("input"), py::arg("indices"),
        py::arg("dim") = py::none());
  cls.def("take_along_dim", &take_along_dim, py::arg("indices"), py::arg("dim") = py::none());
  m.def(
      "empty_strided",
      [](py::object size, py::object stride, py::kwargs kw) {
        auto o = parse_factory_options(kw, "empty_strided");
        return finish_factory(empty_strided(parse_shape_object(size, "empty_strided"),
                                            parse_shape_object(stride, "empty_strided"),
                                            o.dtype.value_or(default_dtype()),
                                            o.device.value_or(Device())),
                              o);
      },
      py::arg("size"), py::arg("stride"));
  // PyTorch's unsafe_ variants skip its view-aliasing checks; kiln's views need none.
  m.attr("unsafe_chunk") = m.attr("chunk");
  m.attr("unsafe_split") = m.attr("split");
  cls.attr("unsafe_chunk") = cls.attr("chunk");
  cls.attr("unsafe_split") = cls.attr("split");
}

}  // namespace kiln::python
