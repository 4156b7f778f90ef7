// CPU kernel entry points, one per kernel family, gathered into the CPU
// backend table (backend_cpu.cpp).
#pragma once

#include "ops/backend.h"

namespace kiln::cpu {

const Backend& backend();

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p);
void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void copy_kernel(const Tensor& dst, const Tensor& src);
void fill_kernel(const Tensor& dst, Scalar value);
void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void reduce_kernel(ReduceOp op, const Tensor& out, const Tensor& in);
void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b);
void row_gather_kernel(const Tensor& out, const Tensor& src, const Tensor& index);
void row_scatter_add_kernel(const Tensor& out, const Tensor& src, const Tensor& index);

}  // namespace kiln::cpu
