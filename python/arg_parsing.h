// Turning Python arguments into kiln values the way PyTorch accepts them:
// sizes as varargs or one sequence, dims as int or sequence, tensor-likes.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "ops/memory_format.h"
#include "python/casters.h"

namespace kiln::python {

namespace py = pybind11;

// A tensor operand: Tensors pass through; Python numbers become wrapped
// scalars (they do not promote); lists and NumPy arrays become tensors.
// TypeError naming `op` and `arg` otherwise.
Tensor to_tensor_arg(py::handle h, const char* op, const char* arg);
// Like to_tensor_arg, but returns false instead of raising (for operators,
// which must return NotImplemented).
bool try_tensor_arg(py::handle h, Tensor* out);
// f(2, 3), f((2, 3)), f([2, 3]), f(kiln.Size([2, 3])).
Shape parse_shape(const py::args& args, const char* op);
Shape parse_shape_object(py::handle h, const char* op);
// dim=None, dim=1, dim=(0, 1).
std::optional<std::vector<int64_t>> parse_dims(py::handle h, const char* op);
std::optional<DType> parse_dtype(py::handle h, const char* op);
Device parse_device(py::handle h, const char* op);
// The keyword arguments tensor factories accept: dtype, device,
// requires_grad, and (where allowed) generator and size; layout options
// PyTorch accepts (pin_memory, layout, memory_format) are ignored.
struct FactoryOptions {
  std::optional<DType> dtype;
  std::optional<Device> device;
  bool requires_grad = false;
  py::object generator = py::none();
  std::optional<Shape> size;
  std::optional<MemoryFormat> memory_format;
  const char* op = "";
};
FactoryOptions parse_factory_options(const py::kwargs& kwargs, const char* op,
                                     bool allow_generator = false, bool allow_size = false);
// The size from f(2, 3) / f((2, 3)) or from size=, but not both.
Shape factory_shape(const py::args& args, const FactoryOptions& o, const char* op);
// Applies requires_grad=.
Tensor finish_factory(Tensor t, const FactoryOptions& o);

// A kiln.Size (tuple subclass) for .shape / .size().
py::object make_size(const Shape& s);

}  // namespace kiln::python
