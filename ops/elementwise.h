// Shared front-end steps of elementwise ops: device agreement, promotion to
// the compute dtype, broadcasting, output allocation and the in-place protocol.
#pragma once

#include <functional>
#include <initializer_list>

#include "core/tensor.h"
#include "ops/op_table.h"

namespace kiln {

// The device all operands agree on. 0-d CPU tensors (Python numbers) may mix
// with tensors on any device.
Device common_device(std::initializer_list<Tensor> tensors, const char* op);
// `t` converted to `dtype` (no autograd) and expanded to `shape` as a view.
Tensor prepare_operand(const Tensor& t, DType dtype, const Shape& shape, Device device);

// The dtype binary op `op` computes in, and the dtype of its result.
DType binary_compute_dtype(BinaryOp op, const Tensor& a, const Tensor& b);
DType unary_compute_dtype(UnaryOp op, DType in);

// Kernel calls without autograd.
Tensor unary_compute(UnaryOp op, const Tensor& x, const UnaryParams& p = {});
Tensor binary_compute(BinaryOp op, const Tensor& a, const Tensor& b);
// self <- op(self-or-operands) in place; checks shape and dtype castability.
void unary_compute_into(const Tensor& self, UnaryOp op, const Tensor& x, const UnaryParams& p);
void binary_compute_into(const Tensor& self, BinaryOp op, const Tensor& a, const Tensor& b);

// The in-place protocol: under autograd, `out_of_place(clone_of_self)` is
// computed and recorded, copied into self, and self takes over its history
// (the clone keeps saved values valid). Otherwise `in_place()` writes self
// directly. Bumps self's version either way.
const Tensor& apply_inplace(const Tensor& self, std::initializer_list<Tensor> others, const char* op,
                            const std::function<Tensor(const Tensor&)>& out_of_place,
                            const std::function<void()>& in_place);

// self <- fn(self) for in-place ops without an in-place kernel (clamp_, addcmul_, ...):
// fn runs out of place (on a clone under autograd) and the result is copied back.
const Tensor& assign_inplace(const Tensor& self, std::initializer_list<Tensor> others,
                             const char* op, const std::function<Tensor(const Tensor&)>& fn);

}  // namespace kiln
