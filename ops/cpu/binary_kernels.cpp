// CPU kernels of the binary elementwise ops (ops/op_table.h).
#include <cmath>
#include <type_traits>

#include "ops/activation_grad.h"
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
  // Negative exponents (tensor exponents only; the front end rejects negative Python
  // integers): 1 / base^|e| truncated, as PyTorch's kernels give. Same rule in cuda/binary.cu.
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<T>(result * base);
    exp >>= 1;
    if (exp) base = static_cast<T>(base * base);
  }
  return result;
}

// out = f(a, b) with f computing in acc_t<T>. A float16/bfloat16 op may get one
// float32 operand: a CPU scalar kept at float precision (Note [Reduced-precision
// scalar operands], ops/elementwise.cpp).
template <typename T, typename F>
void arithmetic_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  using A = acc_t<T>;
  if constexpr (!std::is_same_v<A, T>) {
    if (b.dtype() == DType::Float32)
      return binary_loop<T, T, float>(out, a, b, [f](T x, float y) { return T(f(A(x), y)); });
    if (a.dtype() == DType::Float32)
      return binary_loop<T, float, T>(out, a, b, [f](float x, T y) { return T(f(x, A(y))); });
  }
  binary_loop<T, T, T>(out, a, b, [f](T x, T y) { return T(f(A(x), A(y))); });
}

// One activation gradient, the op a constant so the loop vectorizes.
template <typename T, BinaryOp Op>
void grad_loop(const Tensor& out, const Tensor& a, const Tensor& b) {
  using A = acc_t<T>;
  arithmetic_loop<T>(out, a, b, [](A g, A v) { return activation_grad::apply(Op, g, v); });
}

// Arithmetic ops over the numeric dtypes (bool allowed where PyTorch allows it).
template <typename T>
void arithmetic(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using A = acc_t<T>;
  switch (op) {
    case BinaryOp::add:
      if constexpr (std::is_same_v<T, bool>) {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return A(x || y); });
      } else {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return A(x + y); });
      }
    case BinaryOp::sub:
      return arithmetic_loop<T>(out, a, b, [](A x, A y) { return A(x - y); });
    case BinaryOp::mul:
      if constexpr (std::is_same_v<T, bool>) {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return A(x && y); });
      } else {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return A(x * y); });
      }
    case BinaryOp::div:
      if constexpr (std::is_integral_v<T>) break;  // the front end divides in float
      else return arithmetic_loop<T>(out, a, b, [](A x, A y) { return x / y; });
    case BinaryOp::floor_divide:
      if constexpr (std::is_integral_v<T>) {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return int_floor_div(x, y); });
      } else {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return A(std::floor(x / y)); });
      }
    case BinaryOp::fmod:
      if constexpr (std::is_integral_v<T>) {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return int_fmod(x, y); });
      } else {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return A(std::fmod(x, y)); });
      }
    case BinaryOp::remainder:
      if constexpr (std::is_integral_v<T>) {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return int_remainder(x, y); });
      } else {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) {
          A r = std::fmod(x, y);
          if (r != 0 && ((r < 0) != (y < 0))) r += y;
          return r;
        });
      }
    case BinaryOp::pow:
      if constexpr (std::is_integral_v<T>) {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return int_pow(x, y); });
      } else {
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return A(std::pow(x, y)); });
      }
    case BinaryOp::maximum:
      return arithmetic_loop<T>(out, a, b, [](A x, A y) {
        if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;
        return x > y ? x : y;
      });
    case BinaryOp::minimum:
      return arithmetic_loop<T>(out, a, b, [](A x, A y) {
        if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;
        return x < y ? x : y;
      });
    case BinaryOp::atan2:
      if constexpr (std::is_integral_v<T>) break;
      else return arithmetic_loop<T>(out, a, b, [](A x, A y) { return A(std::atan2(x, y)); });
    case BinaryOp::nextafter:
      // Steps in T itself: the front end admits float32 and float64 only.
      if constexpr (std::is_same_v<A, T> && std::is_floating_point_v<T>)
        return arithmetic_loop<T>(out, a, b, [](A x, A y) { return std::nextafter(x, y); });
      break;
    default:
      if constexpr (!std::is_integral_v<T>) {
        switch (op) {
          case BinaryOp::gelu_backward: return grad_loop<T, BinaryOp::gelu_backward>(out, a, b);
          case BinaryOp::gelu_tanh_backward:
            return grad_loop<T, BinaryOp::gelu_tanh_backward>(out, a, b);
          case BinaryOp::silu_backward: return grad_loop<T, BinaryOp::silu_backward>(out, a, b);
          case BinaryOp::sigmoid_backward:
            return grad_loop<T, BinaryOp::sigmoid_backward>(out, a, b);
          case BinaryOp::tanh_backward: return grad_loop<T, BinaryOp::tanh_backward>(out, a, b);
          case BinaryOp::relu_backward: return grad_loop<T, BinaryOp::relu_backward>(out, a, b);
          default: break;
        }
      }
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
    default:  // out, not a: a may be a float32 scalar (arithmetic_loop)
      return dispatch_all(out.dtype(), name, [&](auto tag) {
        arithmetic<typename decltype(tag)::type>(op, out, a, b);
      });
  }
}

}  // namespace kiln::cpu
