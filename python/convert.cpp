#include "python/convert.h"

#include <pybind11/numpy.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/flags.h"
#include "ops/backend.h"
#include "ops/copy.h"
#include "ops/dispatch.h"
#include "ops/export_trace.h"
#include "ops/math/convert.h"
#include "python/casters.h"

namespace kiln::python {

namespace {

bool dtype_from_numpy(const py::dtype& dt, DType* out) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  const char order = dt.byteorder();
  if (order == '>') return false;  // only native little-endian data is viewed
  switch (kind) {
    case 'b': *out = DType::Bool; return true;
    case 'u':
      if (size == 1) { *out = DType::UInt8; return true; }
      return false;
    case 'i':
      switch (size) {
        case 1: *out = DType::Int8; return true;
        case 2: *out = DType::Int16; return true;
        case 4: *out = DType::Int32; return true;
        case 8: *out = DType::Int64; return true;
      }
      return false;
    case 'f':
      switch (size) {
        case 2: *out = DType::Float16; return true;
        case 4: *out = DType::Float32; return true;
        case 8: *out = DType::Float64; return true;
      }
      return false;
  }
  return false;
}

// The most dims nested data may have, as in PyTorch.
constexpr size_t kMaxDims = 64;

// One flattened leaf of nested Python data.
struct Leaves {
  std::vector<Scalar> values;
  // The promoted dtype of the leaves, as PyTorch infers it: Python floats count as the default
  // dtype, ints as int64, bools as bool, NumPy scalars and 0-d tensors as their own dtype
  // ([np.float64(1), 2.0] -> float64, [np.float16(1), 2] -> float16).
  std::optional<DType> dtype;
  // The depth of the first scalar: every scalar must sit at it ([1, [2, 3]] is ragged).
  size_t scalar_depth = SIZE_MAX;
};

std::string type_name(py::handle h) { return py::str(py::type::of(h).attr("__name__")); }

void add_scalar(py::handle h, size_t depth, const Shape& shape, Leaves* leaves, const char* op) {
  KILN_CHECK(shape.size() == depth, Value, "[", op, "] expected a sequence at dim ", depth,
             " but got a scalar");
  Scalar s;
  KILN_CHECK(scalar_from_object(h, &s), Type, "[", op, "] new(): invalid data type '", type_name(h),
             "'");
  leaves->scalar_depth = depth;
  const DType own = s.is_floating()   ? default_dtype()
                    : s.is_integral() ? DType::Int64
                                      : DType::Bool;
  leaves->dtype = leaves->dtype ? promote_types(*leaves->dtype, own) : own;
  leaves->values.push_back(s);
}

// A leaf that carries its own dtype (a 0-d tensor, a NumPy scalar or 0-d array): its
// value as a Python number, then its dtype in the promotion.
void add_typed_scalar(py::handle number, std::optional<DType> own, size_t depth, const Shape& shape,
                      Leaves* leaves, const char* op) {
  const std::optional<DType> before = leaves->dtype;
  add_scalar(number, depth, shape, leaves, op);
  if (own) leaves->dtype = before ? promote_types(*before, *own) : *own;
}

// Flattens nested sequences into `shape` and `leaves`. Depth-first with an
// explicit stack rather than recursion, and at most kMaxDims deep, so no
// nesting can exhaust the C stack.
void walk(py::handle data, Shape* shape, Leaves* leaves, const char* op) {
  struct Frame {
    py::sequence seq;
    int64_t len;
    int64_t next;
  };
  std::vector<Frame> stack;
  // Pushes a sequence or adds a leaf; `h` sits at depth stack.size().
  auto visit = [&](py::handle h) {
    const size_t depth = stack.size();
    if (py::isinstance<TensorImpl>(h)) {
      Tensor t = h.cast<Tensor>();
      KILN_CHECK(t.numel() == 1 && t.dim() == 0, Value, "[", op,
                 "] only one element tensors can be converted to Python scalars; got a tensor of",
                 " shape ", t.sizes(), " inside a list (use kiln.stack for lists of tensors)");
      add_typed_scalar(item(t), t.dtype(), depth, *shape, leaves, op);
      return;
    }
    // Any sequence protocol object counts (range, array.array), but not text.
    const bool array_like = py::hasattr(h, "__array_interface__");
    const bool is_seq = (PySequence_Check(h.ptr()) || array_like) && !py::isinstance<py::str>(h) &&
                        !py::isinstance<py::bytes>(h) && !PyByteArray_Check(h.ptr());
    if (is_seq && array_like && py::len(h.attr("shape")) == 0) {
      DType own;  // NumPy scalar or 0-d array
      const bool known =
          py::hasattr(h, "dtype") && dtype_from_numpy(py::dtype::from_args(h.attr("dtype")), &own);
      add_typed_scalar(h.attr("item")(), known ? std::optional<DType>(own) : std::nullopt, depth,
                       *shape, leaves, op);
      return;
    }
    if (!is_seq) {
      add_scalar(h, depth, *shape, leaves, op);
      return;
    }
    KILN_CHECK(depth < leaves->scalar_depth, Value, "[", op, "] expected a scalar at dim ", depth,
               " but got a sequence (ragged nested sequence)");
    py::sequence seq = py::reinterpret_borrow<py::sequence>(h);
    const int64_t n = static_cast<int64_t>(py::len(seq));
    if (shape->size() == depth) {
      KILN_CHECK(depth < kMaxDims, Value, "[", op, "] too many dimensions '", type_name(h),
                 "' (at most ", kMaxDims, " are supported)");
      shape->push_back(n);
    } else {
      KILN_CHECK(shape->size() > depth && (*shape)[depth] == n, Value, "[", op,
                 "] expected sequence of length ", (*shape)[depth], " at dim ", depth, " (got ", n,
                 ")");
    }
    stack.push_back({std::move(seq), n, 0});
  };
  visit(data);
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next == top.len) {
      stack.pop_back();
      continue;
    }
    py::object next = top.seq[top.next++];
    visit(next);  // may push, which moves `top`
  }
}

}  // namespace

Tensor from_numpy(py::handle obj) {
  KILN_CHECK(py::isinstance<py::array>(obj), Type, "[from_numpy] expected np.ndarray (got ",
             std::string(py::str(py::type::of(obj).attr("__name__"))), ")");
  py::array arr = py::reinterpret_borrow<py::array>(obj);
  DType dt;
  KILN_CHECK(dtype_from_numpy(arr.dtype(), &dt), Type, "[from_numpy] can't convert np.ndarray of "
             "type numpy.", std::string(py::str(arr.dtype())),
             ". The only supported types are: float64, float32, float16, int64, int32, int16, "
             "int8, uint8, and bool.");
  const auto isz = static_cast<int64_t>(itemsize(dt));
  Shape sizes(arr.ndim()), strides(arr.ndim());
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
    sizes[i] = arr.shape(i);
    KILN_CHECK(arr.strides(i) >= 0, Value, "[from_numpy] At least one stride in the given numpy "
               "array is negative; this is not supported. Call .copy() on the array first.");
    KILN_CHECK(arr.strides(i) % isz == 0, Value, "[from_numpy] given numpy array strides not a "
               "multiple of the element byte size. Copy the numpy array to reallocate the memory.");
    strides[i] = arr.strides(i) / isz;
  }
  auto storage = std::make_shared<StorageImpl>();
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) span += (sizes[i] - 1) * strides[i];
  storage->nbytes = static_cast<size_t>(std::max<int64_t>(span, 0) * isz);
  storage->device = Device();
  // The storage keeps the array alive; releasing it needs the GIL.
  auto* owner = new py::object(py::reinterpret_borrow<py::object>(obj));
  storage->data = std::shared_ptr<void>(const_cast<void*>(arr.data()), [owner](void*) {
    py::gil_scoped_acquire gil;
    delete owner;
  });
  return make_tensor_from_storage(storage, sizes, strides, 0, dt);
}

Tensor tensor_from_data(py::handle data, std::optional<DType> dtype, const char* op) {
  if (py::isinstance<TensorImpl>(data)) {
    Tensor t = data.cast<Tensor>();
    return to_dtype(clone(detach(t)), dtype.value_or(t.dtype()));
  }
  // NumPy scalars keep their dtype, like arrays (np.float64(1) -> float64).
  if (!py::isinstance<py::array>(data) && py::hasattr(data, "__array_interface__") &&
      py::hasattr(data, "dtype")) {
    return tensor_from_data(py::module_::import("numpy").attr("asarray")(data), dtype, op);
  }
  if (py::isinstance<py::array>(data)) {
    py::array arr = py::reinterpret_borrow<py::array>(data);
    // kiln.tensor copies, so byte-swapped data is converted rather than refused.
    if (arr.dtype().byteorder() == '>') {
      arr = arr.attr("astype")(arr.dtype().attr("newbyteorder")("="));
    }
    // Likewise reversed views are copied (from_numpy must refuse them).
    for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
      if (arr.strides(i) < 0) {
        arr = py::module_::import("numpy").attr("ascontiguousarray")(arr);
        break;
      }
    }
    Tensor view = from_numpy(arr);
    Tensor out = make_tensor(view.sizes(), dtype.value_or(view.dtype()), Device());
    backend(Device()).copy(out, view);
    return out;
  }
  Shape shape;
  Leaves leaves;
  walk(data, &shape, &leaves, op);
  DType dt = dtype.value_or(leaves.dtype.value_or(default_dtype()));
  Tensor out = make_tensor(shape, dt, Device(), op);
  // A sequence whose length changed while it was read would leave the counts apart.
  KILN_CHECK(static_cast<int64_t>(leaves.values.size()) == out.numel(), Value, "[", op,
             "] nested sequences of shape ", shape, " gave ", leaves.values.size(),
             " elements; was one modified while it was read?");
  // PyTorch checks Python numbers against integer dtypes only: floating ones round
  // out-of-range values to infinity.
  const bool check = is_integral(dt, false);
  dispatch_all(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (size_t i = 0; i < leaves.values.size(); ++i) {
      const Scalar& s = leaves.values[i];
      if (check) check_scalar_fits(s, dt, op);
      p[i] = s.is_floating() ? math::convert<T>(s.to_double()) : math::convert<T>(s.to_int());
    }
  });
  return out;
}

py::object to_numpy(const Tensor& t) {
  tracing::check_host_read(t, ".numpy()");
  KILN_CHECK(t.device().is_cpu(), Type, "[numpy] can't convert ", t.device(),
             " device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory "
             "first.");
  KILN_CHECK(!t.requires_grad(), Runtime, "[numpy] Can't call numpy() on Tensor that requires "
             "grad. Use tensor.detach().numpy() instead.");
  KILN_CHECK(t.dtype() != DType::BFloat16, Type, "[numpy] Got unsupported ScalarType BFloat16 "
             "(NumPy has no bfloat16); convert with .float() first.");
  std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) {
    // A stride whose bytes overflow (x[::2**61], as_strided) belongs to a dim of
    // at most one element or to a tensor with none: NumPy never applies it.
    int64_t bytes;
    strides.push_back(mul_overflows(s, static_cast<int64_t>(t.itemsize()), &bytes) ? 0 : bytes);
  }
  // The capsule keeps the storage alive as long as the array exists.
  auto* keep = new Storage(t.storage());
  py::capsule base(keep, [](void* p) { delete static_cast<Storage*>(p); });
  return py::array(py::dtype(dtype_name(t.dtype())), shape, strides, t.data_ptr(), base);
}

py::object item(const Tensor& t) {
  tracing::check_host_read(t, ".item() (or bool/int/float of a tensor)");
  KILN_CHECK(t.numel() == 1, Runtime, "[item] a Tensor with ", t.numel(),
             " elements cannot be converted to Scalar");
  Tensor c = t.device().is_cpu() ? t : to_device(detach(t), Device());
  return dispatch_all(c.dtype(), "item", [&](auto tag) -> py::object {
    using T = typename decltype(tag)::type;
    T v = *c.data<T>();
    if constexpr (std::is_same_v<T, bool>) {
      return py::bool_(v);
    } else if constexpr (std::is_integral_v<T>) {
      return py::int_(static_cast<int64_t>(v));
    } else {
      return py::float_(static_cast<double>(v));
    }
  });
}

py::object to_list(const Tensor& t) {
  tracing::check_host_read(t, ".tolist()");
  Tensor c = t.device().is_cpu() ? t : to_device(detach(t), Device());
  return dispatch_all(c.dtype(), "tolist", [&](auto tag) -> py::object {
    using T = typename decltype(tag)::type;
    auto leaf = [](T v) -> py::object {
      if constexpr (std::is_same_v<T, bool>) {
        return py::bool_(v);
      } else if constexpr (std::is_integral_v<T>) {
        return py::int_(static_cast<int64_t>(v));
      } else {
        return py::float_(static_cast<double>(v));
      }
    };
    const char* base = static_cast<const char*>(c.data_ptr());
    std::function<py::object(int64_t, int64_t)> rec = [&](int64_t d, int64_t off) -> py::object {
      if (d == c.dim()) return leaf(*reinterpret_cast<const T*>(base + off * sizeof(T)));
      py::list l(c.sizes()[d]);
      for (int64_t i = 0; i < c.sizes()[d]; ++i)
        l[i] = rec(d + 1, off + i * c.strides()[d]);
      return std::move(l);
    };
    return rec(0, 0);
  });
}

}  // namespace kiln::python
