// pybind11 conversions for kiln's core types.
//
// Note [Python Tensor identity]: kiln.Tensor is TensorImpl bound with a
// shared_ptr holder, so a C++ function returning a Tensor whose impl already
// has a Python object returns that same object (x.grad is x.grad, Parameter
// subclasses survive round trips). kiln::Tensor, the C++ handle, converts
// through that holder; an undefined Tensor is None.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/device.h"
#include "core/dtype.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln::python {

// The Python objects kiln.float32 etc. (one object per dtype, so `is` works).
pybind11::object dtype_object(DType t);
// Accepts a kiln.dtype; returns false for anything else.
bool dtype_from_object(pybind11::handle h, DType* out);
pybind11::object device_object(Device d);
// Accepts kiln.device, "cuda:0"-style strings and device ordinals.
bool device_from_object(pybind11::handle h, Device* out);
// Python bool/int/float (and NumPy scalars, 1-element tensors) as a Scalar.
bool scalar_from_object(pybind11::handle h, Scalar* out);

// kiln.Tensor's pybind11 type record, set once by PYBIND11_MODULE right after
// the class is created (before any Tensor crosses the binding).
inline pybind11::detail::type_info*& tensor_type_info_slot() {
  static pybind11::detail::type_info* info = nullptr;
  return info;
}
inline const pybind11::detail::type_info* tensor_type_info() { return tensor_type_info_slot(); }

}  // namespace kiln::python

namespace pybind11::detail {

// Tensors cross the binding on every op, so the caster goes straight to the
// instance's holder through the Tensor class's type_info, cached once the class
// is registered, instead of pybind11's generic per-call type lookups.
template <>
struct type_caster<kiln::Tensor> {
  PYBIND11_TYPE_CASTER(kiln::Tensor, const_name("Tensor"));
  bool load(handle src, bool) {
    const type_info* ti = kiln::python::tensor_type_info();
    PyTypeObject* type = Py_TYPE(src.ptr());
    if (type != ti->type && !PyType_IsSubtype(type, ti->type)) return false;
    value_and_holder vh =
        reinterpret_cast<instance*>(src.ptr())->get_value_and_holder(ti, false);
    if (!vh.inst || !vh.holder_constructed()) return false;
    value = kiln::Tensor(vh.holder<std::shared_ptr<kiln::TensorImpl>>());
    return true;
  }
  // Returns the impl's existing Python object when it has one (Note [Python Tensor identity]).
  static handle cast(const kiln::Tensor& t, return_value_policy, handle) {
    if (!t.defined()) return none().release();
    const std::shared_ptr<kiln::TensorImpl>& holder = t.impl_ptr();
    return type_caster_generic::cast(holder.get(), return_value_policy::take_ownership, handle(),
                                     kiln::python::tensor_type_info(), nullptr, nullptr, &holder);
  }
};

// Shapes cross as lists of ints, as std::vector<int64_t> does.
template <>
struct type_caster<kiln::Shape> : list_caster<kiln::Shape, int64_t> {};

template <>
struct type_caster<kiln::DType> {
  PYBIND11_TYPE_CASTER(kiln::DType, const_name("dtype"));
  bool load(handle src, bool) { return kiln::python::dtype_from_object(src, &value); }
  static handle cast(kiln::DType t, return_value_policy, handle) {
    return kiln::python::dtype_object(t).release();
  }
};

template <>
struct type_caster<kiln::Device> {
  PYBIND11_TYPE_CASTER(kiln::Device, const_name("device"));
  bool load(handle src, bool) { return kiln::python::device_from_object(src, &value); }
  static handle cast(const kiln::Device& d, return_value_policy, handle) {
    return kiln::python::device_object(d).release();
  }
};

template <>
struct type_caster<kiln::Scalar> {
  PYBIND11_TYPE_CASTER(kiln::Scalar, const_name("Number"));
  bool load(handle src, bool) { return kiln::python::scalar_from_object(src, &value); }
  static handle cast(const kiln::Scalar& s, return_value_policy, handle) {
    if (s.is_bool()) return pybind11::bool_(s.to_int() != 0).release();
    if (s.is_integral()) return pybind11::int_(s.to_int()).release();
    return pybind11::float_(s.to_double()).release();
  }
};

}  // namespace pybind11::detail
