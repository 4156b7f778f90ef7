#include "ops/elementwise.h"

#include <string>

#include "autograd/function.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/promotion.h"
#include "core/shape.h"
#include "ops/backend.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/export_trace.h"
#include "ops/memory_format.h"
#include "ops/view.h"

namespace kiln {

Device common_device(std::initializer_list<Tensor> tensors, const char* op) {
  const Tensor* first = nullptr;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (t.dim() == 0 && t.device().is_cpu()) continue;
    if (!first) {
      first = &t;
      continue;
    }
    KILN_CHECK(t.device() == first->device(), Runtime, "[", op,
               "] Expected all tensors to be on the same device, but found at least two devices, ",
               first->device(), " and ", t.device(), "!");
  }
  if (first) return first->device();
  for (const Tensor& t : tensors)
    if (t.defined()) return t.device();
  return Device();
}

Tensor prepare_operand(const Tensor& t, DType dtype, const Shape& shape, Device device) {
  // Kernels only read the data: an operand that already fits is passed as is.
  if (t.dtype() == dtype && t.sizes() == shape && t.device() == device) return t;
  // A Python number has no autograd state to drop (`x * 2` runs this on every call).
  Tensor x = t.impl()->wrapped_number_ ? t : detach(t);
  if (x.device() != device) x = to_device(x, device);
  if (x.dtype() != dtype) x = to_dtype(x, dtype);
  if (x.sizes() != shape) x = expand(x, shape);
  return x;
}

namespace {
// Binary kernels of GPU backends take a CPU scalar operand by value
// (ops/backend.h), which saves a host-to-device copy on every `x * 2`.
//
// Note [Reduced-precision scalar operands]
// Arithmetic on float16/bfloat16 computes in float32 per element; a CPU scalar
// (a Python number) joins it as a float32 value rather than being rounded to the
// half type first, as PyTorch's opmath does: `x_half / 70000` must not divide by
// inf (70000 overflows float16), and `x_half * 1e-5` must not lose the scalar's
// precision. Binary kernels of both backends accept that one float32 operand.
Tensor prepare_binary_operand(BinaryOp op, const Tensor& t, DType dtype, const Shape& shape,
                              Device device) {
  const bool cpu_scalar = t.dim() == 0 && t.device().is_cpu();
  if (cpu_scalar && t.dtype() != dtype && (dtype == DType::Float16 || dtype == DType::BFloat16) &&
      op_kind(op) != BinaryKind::Compare) {
    Tensor s = t.dtype() == DType::Float32 ? detach(t) : to_dtype(detach(t), DType::Float32);
    return device.is_cpu() ? expand(s, shape) : s;
  }
  if (!device.is_cpu() && cpu_scalar) return t.dtype() == dtype ? t : to_dtype(detach(t), dtype);
  return prepare_operand(t, dtype, shape, device);
}
}  // namespace

DType binary_compute_dtype(BinaryOp op, const Tensor& a, const Tensor& b) {
  DType rt = result_type(a, b);
  switch (op_kind(op)) {
    case BinaryKind::Float:
      return to_floating(rt);
    case BinaryKind::Integral:
      KILN_CHECK(!is_floating(rt), NotImplemented, "[", op_name(op),
                 "] not implemented for floating dtypes, got ", a.dtype(), " and ", b.dtype());
      return rt;
    default:
      if (op == BinaryOp::sub) {
        KILN_CHECK(rt != DType::Bool, Runtime, "[sub] Subtraction, the `-` operator, with two bool "
                   "tensors is not supported. Use the `^` or `logical_xor()` operator instead.");
      }
      return rt;
  }
}

DType unary_compute_dtype(UnaryOp op, DType in) {
  switch (op_kind(op)) {
    case UnaryKind::Float:
      return to_floating(in);
    default:
      return in;
  }
}

namespace {
DType result_dtype(BinaryOp op, DType compute) {
  return op_kind(op) == BinaryKind::Compare ? DType::Bool : compute;
}
DType result_dtype(UnaryOp op, DType compute) {
  return op_kind(op) == UnaryKind::Bool ? DType::Bool : compute;
}
}  // namespace

// Note [Layout-preserving elementwise]
// An elementwise op on a channels-last tensor answers in channels-last, as
// PyTorch's do, so conv -> batch norm -> relu -> conv stays in the layout the
// cuDNN/batch-norm/pooling kernels read without copies. The kernel runs on
// the operands permuted into memory order ([N, H, W, C]), where the output is
// plain contiguous and a channels-last operand is flat; the result is the
// output permuted back. Contiguous inputs (the common case) skip all of it.
namespace {

// The format the output of an op on these operands takes: that of the first
// operand with the output's shape that is contiguous or channels-last (as
// PyTorch's TensorIterator, whose first input's strides order the output).
MemoryFormat output_format(std::initializer_list<const Tensor*> operands, const Shape& shape) {
  for (const Tensor* t : operands) {
    if (t->sizes() != shape) continue;
    if (t->is_contiguous()) return MemoryFormat::Contiguous;
    const MemoryFormat f = suggest_memory_format(*t);
    if (f != MemoryFormat::Contiguous) return f;
  }
  return MemoryFormat::Contiguous;
}

// t viewed in memory order for format f; operands of another rank (CPU scalars) pass as they are.
Tensor in_memory_order(const Tensor& t, const std::vector<int64_t>& order) {
  if (t.dim() != static_cast<int64_t>(order.size())) return t;
  return permute(detach(t), order);
}

}  // namespace

Tensor unary_compute(UnaryOp op, const Tensor& x, const UnaryParams& p) {
  const char* name = op_name(op);
  DType ct = unary_compute_dtype(op, x.dtype());
  Tensor in = prepare_operand(x, ct, x.sizes(), x.device());
  const MemoryFormat f = output_format({&in}, in.sizes());
  if (f != MemoryFormat::Contiguous) {
    const std::vector<int64_t> order = memory_order(f, in.dim());
    Tensor in_m = in_memory_order(in, order);
    Tensor out_m = make_tensor(in_m.sizes(), result_dtype(op, ct), x.device());
    require_kernel(backend(x.device()).unary, name, x.device())(op, out_m, in_m, p);
    return from_memory_order(out_m, order);
  }
  Tensor out = make_tensor(x.sizes(), result_dtype(op, ct), x.device());
  require_kernel(backend(out.device()).unary, name, out.device())(op, out, in, p);
  return out;
}

Tensor binary_compute(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  Device dev = common_device({a, b}, name);
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType ct = binary_compute_dtype(op, a, b);
  Tensor x = prepare_binary_operand(op, a, ct, shape, dev);
  Tensor y = prepare_binary_operand(op, b, ct, shape, dev);
  const MemoryFormat f = output_format({&a, &b}, shape);
  if (f != MemoryFormat::Contiguous) {
    const std::vector<int64_t> order = memory_order(f, static_cast<int64_t>(shape.size()));
    Tensor x_m = in_memory_order(x, order), y_m = in_memory_order(y, order);
    Shape shape_m;
    for (int64_t d : order) shape_m.push_back(shape[static_cast<size_t>(d)]);
    Tensor out_m = make_tensor(shape_m, result_dtype(op, ct), dev);
    require_kernel(backend(dev).binary, name, dev)(op, out_m, x_m, y_m);
    return from_memory_order(out_m, order);
  }
  Tensor out = make_tensor(shape, result_dtype(op, ct), dev);
  require_kernel(backend(dev).binary, name, dev)(op, out, x, y);
  return out;
}

namespace {
void check_into(const Tensor& self, DType result, const Shape& shape, const char* op) {
  // PyTorch's wording and ScalarType names, which users match on.
  KILN_CHECK(can_cast(result, self.dtype()), Runtime, "[", op, "] result type ",
             scalar_type_name(result), " can't be cast to the desired output type ",
             scalar_type_name(self.dtype()));
  KILN_CHECK(shape == self.sizes(), Runtime, "[", op, "] output with shape ", self.sizes(),
             " doesn't match the broadcast shape ", shape);
}
}  // namespace

void unary_compute_into(const Tensor& self, UnaryOp op, const Tensor& x, const UnaryParams& p) {
  DType ct = unary_compute_dtype(op, x.dtype());
  // Errors name the in-place op the user called (exp_), not exp.
  check_into(self, result_dtype(op, ct), x.sizes(), str_cat(op_name(op), "_").c_str());
  if (result_dtype(op, ct) == self.dtype() && x.is_same(self)) {
    require_kernel(backend(self.device()).unary, op_name(op), self.device())(op, self, self, p);
  } else {
    backend(self.device()).copy(self, unary_compute(op, x, p));
  }
}

void binary_compute_into(const Tensor& self, BinaryOp op, const Tensor& a, const Tensor& b) {
  const std::string inplace_name = str_cat(op_name(op), "_");
  const char* name = inplace_name.c_str();
  Device dev = common_device({self, a, b}, name);
  // A CPU scalar may be an input to a CUDA op, never its output.
  KILN_CHECK(self.device() == dev, Runtime, "[", name, "] Expected all tensors to be on the same "
             "device, but found at least two devices, ", self.device(), " and ", dev, "!");
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType ct = binary_compute_dtype(op, a, b);
  check_into(self, result_dtype(op, ct), shape, name);
  if (result_dtype(op, ct) == self.dtype()) {
    Tensor x = prepare_binary_operand(op, a, ct, shape, dev);
    Tensor y = prepare_binary_operand(op, b, ct, shape, dev);
    // x.add_(x.t()): read the aliased operand from a copy, or the kernel
    // would read elements it has already overwritten.
    if (overlaps_differently(self, x)) x = clone(x);
    if (overlaps_differently(self, y)) y = clone(y);
    require_kernel(backend(dev).binary, name, dev)(op, self, x, y);
  } else {
    backend(dev).copy(self, binary_compute(op, a, b));
  }
}

namespace {
void check_assignable(const Tensor& self, const Tensor& result, const char* op) {
  KILN_CHECK(result.sizes() == self.sizes(), Runtime, "[", op, "] output with shape ",
             self.sizes(), " doesn't match the broadcast shape ", result.sizes());
  KILN_CHECK(can_cast(result.dtype(), self.dtype()), Runtime, "[", op, "] result type ",
             scalar_type_name(result.dtype()), " can't be cast to the desired output type ",
             scalar_type_name(self.dtype()));
}

// Note [Overwritten history]: an in-place op whose new value does not depend
// differentiably on its inputs (fill_, zero_, copy_ of a constant, lt_, the
// random fills) still cuts the tensor's old history: the overwritten values
// get a zero gradient, as in PyTorch, instead of the old grad_fn passing the
// gradient on as if nothing had been written. `value` holds the new value;
// the returned alias of it carries a node that sends zeros to every input.
Tensor overwritten_history(const Tensor& value, const std::vector<Tensor>& inputs,
                           const char* op) {
  struct Meta {
    Shape shape;
    DType dtype;
    Device device;
    bool grad;
  };
  std::vector<Meta> metas;
  for (const Tensor& t : inputs) {
    if (t.defined())
      metas.push_back({t.sizes(), t.dtype(), t.device(), t.requires_grad()});
    else
      metas.push_back({{}, DType::Float32, Device(), false});
  }
  Tensor out = detach(value);
  std::string name(op);
  if (!name.empty() && name.back() == '_') name.pop_back();
  record(name, inputs, {out}, [metas](const std::vector<Tensor>&, Node&) -> std::vector<Tensor> {
    std::vector<Tensor> grads;
    for (const Meta& m : metas)
      grads.push_back(m.grad ? zeros(m.shape, m.dtype, m.device) : Tensor());
    return grads;
  });
  return out;
}
}  // namespace

const Tensor& apply_inplace(const Tensor& self, std::initializer_list<Tensor> others, const char* op,
                            const std::function<Tensor(const Tensor&)>& out_of_place,
                            const std::function<void()>& in_place) {
  profiler::RecordScope profile(op);  // every in-place op passes here (Note [Profiler events])
  profile.inputs(self);
  tracing::check_not_inplace(op);  // also for tensors without grad (Note [Export tracing])
  KILN_CHECK(!has_internal_overlap(self), Runtime, "[", op, "] unsupported operation: more than "
             "one element of the written-to tensor (shape ", self.sizes(), ", strides ",
             self.strides(), ") refers to a single memory location. Please clone() the tensor "
             "before performing the operation.");
  bool grad = GradMode::is_enabled() && self.requires_grad();
  for (const Tensor& o : others) grad = grad || needs_grad({o});
  if (grad) {
    check_inplace(self, op);
    // Always a clone: the out-of-place op may save its input for backward,
    // and self is about to be overwritten (x.mul_(w) with only w requiring grad).
    Tensor result = out_of_place(clone(self));
    check_assignable(self, result, op);
    std::vector<Tensor> inputs{self};
    inputs.insert(inputs.end(), others.begin(), others.end());
    // Recorded before self is written, so the node's edges are self's old history.
    Tensor history = result.requires_grad() ? result : overwritten_history(self, inputs, op);
    {
      GradModeGuard no_grad(false);
      backend(self.device()).copy(self, result);
    }
    self.bump_version();
    rebase_history(self, history, op);
    return self;
  }
  const auto before = self.version();
  in_place();
  // One bump per op, also when in_place() wrote through another in-place op (x[i] = v).
  if (self.version() == before) self.bump_version();
  return self;
}

const Tensor& assign_inplace(const Tensor& self, std::initializer_list<Tensor> others,
                             const char* op, const std::function<Tensor(const Tensor&)>& fn) {
  return apply_inplace(self, others, op, fn, [&] {
    Tensor result = fn(self);
    check_assignable(self, result, op);
    backend(self.device()).copy(self, result);
  });
}

}  // namespace kiln
