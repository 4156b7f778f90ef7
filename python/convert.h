// Data crossing the Python boundary: nested lists, NumPy arrays, scalars.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

#include "core/tensor.h"

namespace kiln::python {

namespace py = pybind11;

// kiln.tensor(data): copies; infers bool/int64/float32 from Python data and
// keeps NumPy's dtype.
Tensor tensor_from_data(py::handle data, std::optional<DType> dtype, const char* op);
// Zero-copy view of a NumPy array (kiln.from_numpy).
Tensor from_numpy(py::handle array);
// Zero-copy NumPy view of a CPU tensor (Tensor.numpy()).
py::object to_numpy(const Tensor& t);
py::object to_list(const Tensor& t);
py::object item(const Tensor& t);

}  // namespace kiln::python
