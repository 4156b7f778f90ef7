// CPU kernels of the unary elementwise ops (ops/op_table.h). Half types
// compute in float (acc_t) and round once on store.
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/convert.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/dispatch.h"
#include "ops/special_math.h"

namespace kiln::cpu {

namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2_Pi = 0.79788456080286535588;

// Ops defined on floating inputs only (the front end has promoted integers).
template <typename T>
void floating_op(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p) {
  using A = acc_t<T>;
  auto run = [&](auto f) { unary_loop<T, T>(out, in, [f](T x) { return T(f(A(x))); }); };
  switch (op) {
    case UnaryOp::exp: return run([](A x) { return std::exp(x); });
    case UnaryOp::exp2: return run([](A x) { return std::exp2(x); });
    case UnaryOp::log: return run([](A x) { return std::log(x); });
    case UnaryOp::log2: return run([](A x) { return std::log2(x); });
    case UnaryOp::log10: return run([](A x) { return std::log10(x); });
    case UnaryOp::log1p: return run([](A x) { return std::log1p(x); });
    case UnaryOp::expm1: return run([](A x) { return std::expm1(x); });
    case UnaryOp::sqrt: return run([](A x) { return std::sqrt(x); });
    case UnaryOp::rsqrt: return run([](A x) { return A(1) / std::sqrt(x); });
    case UnaryOp::reciprocal: return run([](A x) { return A(1) / x; });
    case UnaryOp::sin: return run([](A x) { return std::sin(x); });
    case UnaryOp::cos: return run([](A x) { return std::cos(x); });
    case UnaryOp::tan: return run([](A x) { return std::tan(x); });
    case UnaryOp::tanh: return run([](A x) { return std::tanh(x); });
    case UnaryOp::sigmoid: return run([](A x) { return A(1) / (A(1) + std::exp(-x)); });
    case UnaryOp::erf: return run([](A x) { return std::erf(x); });
    case UnaryOp::erfc: return run([](A x) { return std::erfc(x); });
    case UnaryOp::erfinv: return run([](A x) { return special_math::erfinv(x); });
    case UnaryOp::lgamma: return run([](A x) { return std::lgamma(x); });
    case UnaryOp::digamma: return run([](A x) { return special_math::digamma(x); });
    case UnaryOp::polygamma: {
      const int n = static_cast<int>(p.a);
      return run([n](A x) { return special_math::polygamma(n, x); });
    }
    case UnaryOp::i0: return run([](A x) { return special_math::i0(x); });
    case UnaryOp::i1: return run([](A x) { return special_math::i1(x); });
    case UnaryOp::asin: return run([](A x) { return std::asin(x); });
    case UnaryOp::acos: return run([](A x) { return std::acos(x); });
    case UnaryOp::atan: return run([](A x) { return std::atan(x); });
    case UnaryOp::sinh: return run([](A x) { return std::sinh(x); });
    case UnaryOp::cosh: return run([](A x) { return std::cosh(x); });
    case UnaryOp::asinh: return run([](A x) { return std::asinh(x); });
    case UnaryOp::acosh: return run([](A x) { return std::acosh(x); });
    case UnaryOp::atanh: return run([](A x) { return std::atanh(x); });
    case UnaryOp::gelu:
      return run([](A x) { return A(0.5) * x * (A(1) + std::erf(x * A(kSqrt1_2))); });
    case UnaryOp::gelu_tanh:
      return run([](A x) {
        return A(0.5) * x * (A(1) + std::tanh(A(kSqrt2_Pi) * (x + A(0.044715) * x * x * x)));
      });
    case UnaryOp::silu: return run([](A x) { return x / (A(1) + std::exp(-x)); });
    case UnaryOp::elu: {
      const A alpha = A(p.a);
      return run([alpha](A x) { return x > 0 ? x : alpha * std::expm1(x); });
    }
    case UnaryOp::softplus: {
      const A beta = A(p.a), threshold = A(p.b);
      return run([beta, threshold](A x) {
        return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
      });
    }
    case UnaryOp::round:
      return run([](A x) { return std::nearbyint(x); });  // half to even, as PyTorch
    case UnaryOp::floor: return run([](A x) { return std::floor(x); });
    case UnaryOp::ceil: return run([](A x) { return std::ceil(x); });
    case UnaryOp::trunc: return run([](A x) { return std::trunc(x); });
    case UnaryOp::nan_to_num: {
      const A nan = A(p.a), posinf = A(p.b), neginf = A(p.c);
      return run([=](A x) {
        if (std::isnan(x)) return nan;
        if (std::isinf(x)) return x > 0 ? posinf : neginf;
        return x;
      });
    }
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, "[", op_name(op), "] not implemented for dtype ", in.dtype());
}

// Ops that keep any numeric dtype.
template <typename T>
void numeric_op(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p) {
  using A = acc_t<T>;
  switch (op) {
    case UnaryOp::neg:
      return unary_loop<T, T>(out, in, [](T x) { return T(-A(x)); });
    case UnaryOp::abs:
      return unary_loop<T, T>(out, in, [](T x) { return A(x) < 0 ? T(-A(x)) : x; });
    case UnaryOp::sign:
      return unary_loop<T, T>(out, in, [](T x) {
        A v = A(x);
        return T((A(0) < v) - (v < A(0)));
      });
    case UnaryOp::relu:
      return unary_loop<T, T>(out, in, [](T x) { return A(x) > 0 ? x : T(0); });
    case UnaryOp::square:
      return unary_loop<T, T>(out, in, [](T x) { return T(A(x) * A(x)); });
    case UnaryOp::leaky_relu: {
      const A slope = static_cast<A>(p.a);
      return unary_loop<T, T>(out, in, [slope](T x) { return A(x) > 0 ? x : T(A(x) * slope); });
    }
    case UnaryOp::clamp: {
      const A lo = static_cast<A>(p.a), hi = static_cast<A>(p.b);
      const bool has_lo = p.has_a, has_hi = p.has_b;
      return unary_loop<T, T>(out, in, [=](T x) {
        A v = A(x);
        if constexpr (!std::is_integral_v<A>) {
          if (std::isnan(v)) return x;
        }
        if (has_lo && v < lo) v = lo;
        if (has_hi && v > hi) v = hi;
        return T(v);
      });
    }
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    // Rounding is the identity on integers.
    if (op == UnaryOp::floor || op == UnaryOp::ceil || op == UnaryOp::round ||
        op == UnaryOp::trunc || op == UnaryOp::nan_to_num) {
      return unary_loop<T, T>(out, in, [](T x) { return x; });
    }
    if (op == UnaryOp::bitwise_not) return unary_loop<T, T>(out, in, [](T x) { return T(~x); });
  } else {
    return floating_op<T>(op, out, in, p);
  }
  fail(ErrorKind::NotImplemented, "[", op_name(op), "] not implemented for dtype ", in.dtype());
}

template <typename T>
void predicate_op(UnaryOp op, const Tensor& out, const Tensor& in) {
  using A = acc_t<T>;
  switch (op) {
    case UnaryOp::logical_not:
      return unary_loop<bool, T>(out, in, [](T x) { return !(A(x) != A(0)); });
    case UnaryOp::isnan:
      if constexpr (std::is_integral_v<A>) {
        return unary_loop<bool, T>(out, in, [](T) { return false; });
      } else {
        return unary_loop<bool, T>(out, in, [](T x) { return std::isnan(A(x)); });
      }
    case UnaryOp::isinf:
      if constexpr (std::is_integral_v<A>) {
        return unary_loop<bool, T>(out, in, [](T) { return false; });
      } else {
        return unary_loop<bool, T>(out, in, [](T x) { return std::isinf(A(x)); });
      }
    case UnaryOp::isfinite:
      if constexpr (std::is_integral_v<A>) {
        return unary_loop<bool, T>(out, in, [](T) { return true; });
      } else {
        return unary_loop<bool, T>(out, in, [](T x) { return std::isfinite(A(x)); });
      }
    case UnaryOp::signbit:
      if constexpr (std::is_integral_v<A>) {
        return unary_loop<bool, T>(out, in, [](T x) { return A(x) < A(0); });
      } else {
        // Not std::signbit: GCC 12 fails (internal compiler error) vectorizing it over
        // half types; 1 / -0 = -inf tells -0 apart. A negative NaN reads as unsigned.
        return unary_loop<bool, T>(out, in, [](T x) {
          const A v = A(x);
          return v < A(0) || (v == A(0) && A(1) / v < A(0));
        });
      }
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, "[", op_name(op), "] not implemented for dtype ", in.dtype());
}

}  // namespace

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p) {
  const char* name = op_name(op);
  if (op_kind(op) == UnaryKind::Bool) {
    return dispatch_all(in.dtype(), name,
                        [&](auto tag) { predicate_op<typename decltype(tag)::type>(op, out, in); });
  }
  if (in.dtype() == DType::Bool) {
    KILN_CHECK(op == UnaryOp::bitwise_not, NotImplemented, "[", name,
               "] not implemented for dtype bool");
    return unary_loop<bool, bool>(out, in, [](bool x) { return !x; });
  }
  dispatch_numeric(in.dtype(), name,
                   [&](auto tag) { numeric_op<typename decltype(tag)::type>(op, out, in, p); });
}

}  // namespace kiln::cpu
