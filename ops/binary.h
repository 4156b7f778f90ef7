// Binary elementwise ops (the table is ops/op_table.h), their in-place
// variants, and C++ operators for embedding code.
#pragma once

#include <optional>
#include <string>

#include "core/scalar.h"
#include "core/tensor.h"
#include "ops/op_table.h"

namespace kiln {

// Any binary op from the table, with broadcasting, promotion and autograd.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
const Tensor& binary_(BinaryOp op, const Tensor& self, const Tensor& other);

#define KILN_DECLARE_BINARY(name, kind, autocast)                  \
  Tensor name(const Tensor& a, const Tensor& b);                   \
  Tensor name(const Tensor& a, Scalar b);                          \
  const Tensor& name##_(const Tensor& self, const Tensor& other);  \
  const Tensor& name##_(const Tensor& self, Scalar other);
KILN_BINARY_OPS(KILN_DECLARE_BINARY)
#undef KILN_DECLARE_BINARY

// a + alpha * b, a - alpha * b (PyTorch's alpha=).
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha);
const Tensor& add_(const Tensor& self, const Tensor& other, Scalar alpha);
const Tensor& sub_(const Tensor& self, const Tensor& other, Scalar alpha);
// PyTorch's div(rounding_mode=): nullopt divides exactly, "trunc" rounds the quotient towards
// zero and "floor" down (floor_divide); the result dtype follows result_type for both.
Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& rounding_mode);
const Tensor& div_(const Tensor& self, const Tensor& other,
                   const std::optional<std::string>& rounding_mode);
// Scalar on the left: 2 - x, 1 / x, 2 ** x.
Tensor rsub(const Tensor& a, Scalar b);
Tensor rdiv(const Tensor& a, Scalar b);
Tensor rpow(const Tensor& a, Scalar b);

// where(cond, a, b): differentiable in a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// a + weight * (end - a).
Tensor lerp(const Tensor& a, const Tensor& end, const Tensor& weight);
const Tensor& lerp_(const Tensor& self, const Tensor& end, const Tensor& weight);
// input + value * t1 * t2 and input + value * t1 / t2.
Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, Scalar value = 1);
Tensor addcdiv(const Tensor& input, const Tensor& t1, const Tensor& t2, Scalar value = 1);
const Tensor& addcmul_(const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value = 1);
const Tensor& addcdiv_(const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value = 1);

// |a - b| <= atol + rtol * |b| elementwise (bool; equal values, infinities
// included, are close; NaNs only with equal_nan).
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
// Same shape and equal values.
bool equal(const Tensor& a, const Tensor& b);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
inline Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }

}  // namespace kiln
