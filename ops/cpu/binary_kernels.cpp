// CPU kernels of the binary elementwise ops (ops/op_table.h).
#include <cmath>
#include <type_traits>

#include "ops/cpu/convert.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

namespace {

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    return std::isnan(static_cast<acc_t<T>>(v));
  }
}

template <typename T>
T int_floor_div(T x, T y) {
  KILN_CHECK(y != 0, Runtime, "[floor_divide] ZeroDivisionError: integer division by zero");
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return static_cast<T>(-x);  // avoids INT_MIN / -1 overflow trap
    T q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return q;
  } else {
    return x / y;
  }
}

template <typename T>
T int_remainder(T x, T y) {
  KILN_CHECK(y != 0, Runtime, "[remainder] ZeroDivisionError: integer modulo by zero");
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return 0;
    T r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
  } else {
    return x % y;
  }
}

// C's truncated remainder: the result takes the sign of x.
template <typename T>
T int_fmod(T x, T y) {
  KILN_CHECK(y != 0, Runtime, "[fmod] ZeroDivisionError: integer modulo by zero");
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return 0;
  }
  return x % y;
}

template <typename T>
T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    KILN_CHECK(exp >= 0, Runtime, "[pow] Integers to negative integer powers are not allowed.");
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<T>(result * base);
    exp >>= 1;
    if (exp) base = static_cast<T>(base * base);
  }
  return result;
}

// Arithmetic ops over the numeric dtypes (bool allowed where PyTorch allows it).
template <typename T>
void arithmetic(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using A = acc_t<T>;
  switch (op) {
    case BinaryOp::add:
      if constexpr (std::is_same_v<T, bool>) {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(x || y); });
      } else {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(x + y); });
      }
    case BinaryOp::sub:
      return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(x - y); });
    case BinaryOp::mul:
      if constexpr (std::is_same_v<T, bool>) {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(x && y); });
      } else {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(x * y); });
      }
    case BinaryOp::div:
      if constexpr (std::is_integral_v<T>) break;  // the front end divides in float
      else return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(A(x) / A(y)); });
    case BinaryOp::floor_divide:
      if constexpr (std::is_integral_v<T>) {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return int_floor_div(x, y); });
      } else {
        return binary_loop<T, T, T>(out, a, b,
                                    [](T x, T y) { return T(std::floor(A(x) / A(y))); });
      }
    case BinaryOp::fmod:
      if constexpr (std::is_integral_v<T>) {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return int_fmod(x, y); });
      } else {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(std::fmod(A(x), A(y))); });
      }
    case BinaryOp::remainder:
      if constexpr (std::is_integral_v<T>) {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return int_remainder(x, y); });
      } else {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) {
          A r = std::fmod(A(x), A(y));
          if (r != 0 && ((r < 0) != (A(y) < 0))) r += A(y);
          return T(r);
        });
      }
    case BinaryOp::pow:
      if constexpr (std::is_integral_v<T>) {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return int_pow(x, y); });
      } else {
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(std::pow(A(x), A(y))); });
      }
    case BinaryOp::maximum:
      return binary_loop<T, T, T>(out, a, b, [](T x, T y) {
        if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;
        return A(x) > A(y) ? x : y;
      });
    case BinaryOp::minimum:
      return binary_loop<T, T, T>(out, a, b, [](T x, T y) {
        if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;
        return A(x) < A(y) ? x : y;
      });
    case BinaryOp::atan2:
      if constexpr (std::is_integral_v<T>) break;
      else return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(std::atan2(A(x), A(y))); });
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, "[", op_name(op), "] no CPU kernel for dtype ", a.dtype());
}

template <typename T>
void compare(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using A = acc_t<T>;
  switch (op) {
    case BinaryOp::eq:
      return binary_loop<bool, T, T>(out, a, b, [](T x, T y) { return A(x) == A(y); });
    case BinaryOp::ne:
      return binary_loop<bool, T, T>(out, a, b, [](T x, T y) { return A(x) != A(y); });
    case BinaryOp::lt:
      return binary_loop<bool, T, T>(out, a, b, [](T x, T y) { return A(x) < A(y); });
    case BinaryOp::le:
      return binary_loop<bool, T, T>(out, a, b, [](T x, T y) { return A(x) <= A(y); });
    case BinaryOp::gt:
      return binary_loop<bool, T, T>(out, a, b, [](T x, T y) { return A(x) > A(y); });
    case BinaryOp::ge:
      return binary_loop<bool, T, T>(out, a, b, [](T x, T y) { return A(x) >= A(y); });
    case BinaryOp::logical_and:
      return binary_loop<bool, T, T>(out, a, b, [](T x, T y) { return A(x) != 0 && A(y) != 0; });
    case BinaryOp::logical_or:
      return binary_loop<bool, T, T>(out, a, b, [](T x, T y) { return A(x) != 0 || A(y) != 0; });
    case BinaryOp::logical_xor:
      return binary_loop<bool, T, T>(out, a, b,
                                     [](T x, T y) { return (A(x) != 0) != (A(y) != 0); });
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, "[", op_name(op), "] no CPU kernel");
}

template <typename T>
void bitwise(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::bitwise_and:
      return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(x & y); });
    case BinaryOp::bitwise_or:
      return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(x | y); });
    case BinaryOp::bitwise_xor:
      return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return T(x ^ y); });
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, "[", op_name(op), "] no CPU kernel");
}

}  // namespace

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  switch (op_kind(op)) {
    case BinaryKind::Compare:
      return dispatch_all(a.dtype(), name, [&](auto tag) {
        compare<typename decltype(tag)::type>(op, out, a, b);
      });
    case BinaryKind::Integral:
      return dispatch_integral(a.dtype(), true, name, [&](auto tag) {
        bitwise<typename decltype(tag)::type>(op, out, a, b);
      });
    default:
      return dispatch_all(a.dtype(), name, [&](auto tag) {
        arithmetic<typename decltype(tag)::type>(op, out, a, b);
      });
  }
}

}  // namespace kiln::cpu
