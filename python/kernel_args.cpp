// Note [Fast kernel launch]
// A RawKernel launch should cost the bare cudaLaunchKernel plus as little as possible. What
// kiln adds runs in C++ without a Python frame: RawKernel subclasses _C._KernelLauncher, whose
// __call__ is a METH_FASTCALL descriptor (as Note [Fast operators]: no pybind11 dispatcher, no
// bound method object); the kernel's parameter sizes are read from the driver once per kernel
// (ParamLayout); each argument is converted by a test of its type straight into a buffer on
// the stack (no std::vector, no Python object made per call); and the checks are comparisons
// against cached numbers, lock-free. Python numbers follow CuPy (int -> long long, float ->
// double, bool -> bool, complex -> complex<double>); a NumPy scalar passes its own bytes
// through the buffer protocol; a tensor passes its data pointer.
//
// The packing needs no GPU, so the argument errors are tested in CI and the packing is timed
// on any machine (_KernelLauncher._dry_run, benchmarks/custom_kernels.py --host-only).
#include "python/kernel_args.h"

#include <complex>
#include <cstring>

#include "core/error.h"
#include "core/tensor.h"
#include "python/casters.h"

namespace kiln::python {

namespace {

// Launch limits every GPU since compute capability 3.0 shares.
constexpr int64_t kMaxGrid[3] = {2147483647, 65535, 65535};
constexpr int64_t kMaxBlock[3] = {1024, 1024, 64};

// The TensorImpl of a kiln.Tensor object without touching its reference count (null for any
// other object): the Tensor caster's lookup (python/casters.h) minus the holder copy.
const TensorImpl* borrow_tensor_impl(PyObject* o) {
  const pybind11::detail::type_info* ti = tensor_type_info();
  PyTypeObject* type = Py_TYPE(o);
  if (type != ti->type && !PyType_IsSubtype(type, ti->type)) return nullptr;
  pybind11::detail::value_and_holder vh =
      reinterpret_cast<pybind11::detail::instance*>(o)->get_value_and_holder(ti, false);
  if (!vh.inst || !vh.holder_constructed()) return nullptr;
  return vh.holder<std::shared_ptr<TensorImpl>>().get();
}

template <typename T>
void store(KernelArg* a, T v, const char* what) {
  static_assert(sizeof(T) <= sizeof(a->bytes), "kernel argument too large");
  std::memcpy(a->bytes, &v, sizeof(T));
  a->size = sizeof(T);
  a->what = what;
}

void to_kernel_arg(PyObject* o, size_t index, const std::string& kernel, KernelArg* a) {
  if (const TensorImpl* t = borrow_tensor_impl(o)) {
    const Device d = t->storage_->device;
    a->tensor_device = d.type == DeviceType::CUDA ? d.index : -1;
    void* p = static_cast<char*>(t->storage_->data.get()) + t->offset_ * itemsize(t->dtype_);
    store<void*>(a, p, "tensor");
  } else if (PyBool_Check(o)) {
    store<bool>(a, o == Py_True, "Python bool (bool)");
  } else if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow)
      fail(ErrorKind::Type, "[RawKernel ", kernel, "] argument ", index,
           " is a Python int that does not fit in long long");
    store<long long>(a, v, "Python int (long long)");
  } else if (PyFloat_Check(o)) {
    store<double>(a, PyFloat_AS_DOUBLE(o), "Python float (double)");
  } else if (PyComplex_Check(o)) {
    store(a, std::complex<double>(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)),
          "Python complex (complex<double>)");
  } else if (PyObject_CheckBuffer(o)) {
    // NumPy scalars (and 0-d arrays) expose their value as a 0-d buffer of their own type.
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_ND) != 0) {
      PyErr_Clear();
      fail(ErrorKind::Type, "[RawKernel ", kernel, "] argument ", index, " of type ",
           Py_TYPE(o)->tp_name, " cannot be passed to a kernel");
    }
    const bool scalar = view.ndim == 0 && view.len > 0 &&
                        view.len <= static_cast<Py_ssize_t>(sizeof(a->bytes));
    if (scalar) {
      std::memcpy(a->bytes, view.buf, static_cast<size_t>(view.len));
      a->size = static_cast<size_t>(view.len);
      a->what = "NumPy scalar";
    }
    PyBuffer_Release(&view);
    KILN_CHECK(scalar, Type, "[RawKernel ", kernel, "] argument ", index, " of type ",
               Py_TYPE(o)->tp_name,
               " is not a scalar: kernels take kiln CUDA tensors, Python numbers and NumPy "
               "scalars");
  } else {
    fail(ErrorKind::Type, "[RawKernel ", kernel, "] argument ", index, " of type ",
         Py_TYPE(o)->tp_name,
         " cannot be passed to a kernel: kernels take kiln CUDA tensors, Python numbers and "
         "NumPy scalars");
  }
}

int64_t dim_value(PyObject* v, const char* what, const std::string& kernel) {
  KILN_CHECK(PyLong_Check(v) && !PyBool_Check(v), Type, "[RawKernel ", kernel, "] ", what,
             " must hold ints, got ", Py_TYPE(v)->tp_name);
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  // Out of int64: reported by the range check as the clamped value.
  return overflow ? (overflow > 0 ? INT64_MAX : INT64_MIN) : x;
}

// grid / block: an int or a tuple (list) of 1 to 3 ints; missing dims are 1.
void to_dims(PyObject* h, int64_t* out, const char* what, const std::string& kernel) {
  if (PyLong_Check(h) && !PyBool_Check(h)) {
    out[0] = dim_value(h, what, kernel);
    return;
  }
  const bool tuple = PyTuple_Check(h);
  KILN_CHECK(tuple || PyList_Check(h), Type, "[RawKernel ", kernel, "] ", what,
             " must be an int or a tuple of 1 to 3 ints, got ", Py_TYPE(h)->tp_name);
  const Py_ssize_t n = tuple ? PyTuple_GET_SIZE(h) : PyList_GET_SIZE(h);
  KILN_CHECK(n >= 1 && n <= 3, Value, "[RawKernel ", kernel, "] ", what,
             " must have 1 to 3 dimensions, got ", n);
  for (Py_ssize_t i = 0; i < n; ++i)
    out[i] = dim_value(tuple ? PyTuple_GET_ITEM(h, i) : PyList_GET_ITEM(h, i), what, kernel);
}

}  // namespace

PyObject* parse_launch_call(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                            LaunchDims* dims, const std::string& kernel) {
  static const char* kNames[5] = {"grid", "block", "args", "shared_mem", "stream"};
  PyObject* given[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  KILN_CHECK(nargs <= 5, Type, "[RawKernel ", kernel,
             "] takes grid, block, args, shared_mem=0, stream=None; got ", nargs,
             " positional arguments");
  for (Py_ssize_t i = 0; i < nargs; ++i) given[i] = args[i];
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int slot = -1;
    for (int j = 0; j < 5 && slot < 0; ++j)
      if (PyUnicode_CompareWithASCIIString(key, kNames[j]) == 0) slot = j;
    KILN_CHECK(slot >= 0, Type, "[RawKernel ", kernel, "] got an unexpected keyword argument '",
               PyUnicode_AsUTF8(key), "'");
    KILN_CHECK(given[slot] == nullptr, Type, "[RawKernel ", kernel,
               "] got multiple values for argument '", kNames[slot], "'");
    given[slot] = args[nargs + k];
  }
  for (int j = 0; j < 3; ++j)
    KILN_CHECK(given[j] != nullptr, Type, "[RawKernel ", kernel,
               "] missing required argument '", kNames[j], "'");
  to_dims(given[0], dims->grid, "grid", kernel);
  to_dims(given[1], dims->block, "block", kernel);
  if (given[3] != nullptr) {
    PyObject* s = given[3];
    KILN_CHECK(PyLong_Check(s) && !PyBool_Check(s), Type, "[RawKernel ", kernel,
               "] shared_mem must be an int, got ", Py_TYPE(s)->tp_name);
    dims->shared_mem = dim_value(s, "shared_mem", kernel);
  }
  if (given[4] != nullptr && given[4] != Py_None) {
    // A kiln.cuda.Stream, or a raw cudaStream_t as an int.
    PyObject* stream = given[4];
    PyObject* handle = PyObject_GetAttrString(stream, "cuda_stream");
    if (handle == nullptr) {
      PyErr_Clear();
      Py_INCREF(stream);
      handle = stream;
    }
    const bool ok = PyLong_Check(handle) && !PyBool_Check(handle);
    void* p = ok ? PyLong_AsVoidPtr(handle) : nullptr;
    Py_DECREF(handle);
    if (ok && PyErr_Occurred()) PyErr_Clear();
    KILN_CHECK(ok, Type, "[RawKernel ", kernel, "] stream must be a kiln.cuda.Stream or None, got ",
               Py_TYPE(stream)->tp_name);
    dims->has_stream = true;
    dims->stream = p;
  }
  PyObject* seq = given[2];
  KILN_CHECK(PyTuple_Check(seq) || PyList_Check(seq), Type, "[RawKernel ", kernel,
             "] args must be a tuple, got ", Py_TYPE(seq)->tp_name);
  return seq;
}

int pack_args(PyObject* seq, const ParamLayout& layout, const std::string& kernel,
              bool check_devices, PackedArgs* out) {
  const bool tuple = PyTuple_Check(seq);
  const size_t n = out->size();
  if (layout.known)
    KILN_CHECK(n == layout.sizes.size(), Type, "[RawKernel ", kernel, "] the kernel takes ",
               layout.sizes.size(), " argument", layout.sizes.size() == 1 ? "" : "s", ", got ",
               n);
  int device = -1;
  for (size_t i = 0; i < n; ++i) {
    PyObject* o = tuple ? PyTuple_GET_ITEM(seq, i) : PyList_GET_ITEM(seq, i);
    KernelArg& a = (*out)[i];
    to_kernel_arg(o, i, kernel, &a);
    if (a.tensor_device == -1 && check_devices)
      fail(ErrorKind::Value, "[RawKernel ", kernel, "] argument ", i,
           " is a CPU tensor: kernels take CUDA tensors (move it with .cuda())");
    if (a.tensor_device >= 0) {
      if (device < 0) device = a.tensor_device;
      KILN_CHECK(a.tensor_device == device, Value, "[RawKernel ", kernel, "] argument ", i,
                 " is on cuda:", a.tensor_device, " but the kernel launches on cuda:", device,
                 " (the device of its first tensor argument)");
    }
    if (layout.known)
      KILN_CHECK(a.size == layout.sizes[i], Type, "[RawKernel ", kernel, "] argument ", i,
                 " is a ", a.what, " (", a.size, " bytes) but the kernel's parameter ", i,
                 " takes ", layout.sizes[i], " bytes",
                 a.tensor_device != -2 ? ": a tensor passes a pointer"
                                       : ": pass a NumPy scalar of the parameter's type, such as "
                                         "numpy.int32(n) or numpy.float32(x)");
  }
  return device;
}

void check_launch_dims(const LaunchDims& d, const std::string& kernel) {
  static const char* kAxis[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    KILN_CHECK(d.grid[i] >= 1 && d.grid[i] <= kMaxGrid[i], Value, "[RawKernel ", kernel,
               "] grid.", kAxis[i], " must be in [1, ", kMaxGrid[i], "], got ", d.grid[i]);
    KILN_CHECK(d.block[i] >= 1 && d.block[i] <= kMaxBlock[i], Value, "[RawKernel ", kernel,
               "] block.", kAxis[i], " must be in [1, ", kMaxBlock[i], "], got ", d.block[i]);
  }
  KILN_CHECK(d.shared_mem >= 0, Value, "[RawKernel ", kernel,
             "] shared_mem must be non-negative, got ", d.shared_mem);
}

}  // namespace kiln::python
