// The scalar math of every unary and binary elementwise op (ops/op_table.h), written once and
// compiled for both devices.
//
// Note [Shared elementwise functors]
// Each op's math is one functor template over the compute type A (acc_t of the element type:
// float for float16/bfloat16): `A operator()(A x)` for unary ops, `A operator()(A x, A y)` for
// binary ones, `bool operator()(...)` for predicates and comparisons. `accepts` says which
// compute types the op is defined on; visit_unary / visit_predicate / visit_binary /
// visit_compare map a runtime op to its functor and call back `f(functor)`, or `f(Unsupported)`
// where the op is not defined on A. A backend is then only a loop or launch shape around `f`:
//  - the CPU instantiates its loop once per (op, dtype) with the functor as a compile-time
//    constant, so contiguous loops stay vectorized (ops/cpu/unary_kernels.cpp);
//  - CUDA calls the visitor inside one kernel per dtype, so the switch is uniform across a
//    launch and compile time stays small (Note [CUDA elementwise], cuda/unary.cu).
// The only effect a functor has besides its value is an integer division by zero, which it
// reports through the `Sink` the backend passes: the CPU raises at once, a CUDA kernel records
// it in the device's error record and kiln raises it at the next synchronization (Note
// [Deferred index errors] in ops/index.cpp), so both devices raise the same RuntimeError.
// tests/python/test_functor_parity.py sweeps every functor on both devices.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/activation_grad.h"
#include "ops/math/host_device.h"
#include "ops/op_table.h"
#include "ops/special_math.h"

namespace kiln::math {

template <typename A>
constexpr bool is_bool_v = std::is_same_v<A, bool>;
template <typename A>
constexpr bool is_int_v = std::is_integral_v<A> && !is_bool_v<A>;
template <typename A>
constexpr bool is_float_v = std::is_floating_point_v<A>;

// Domains: which compute types an op's functor accepts.
struct Floating {
  template <typename A>
  static constexpr bool accepts = is_float_v<A>;
};
struct Numeric {  // integers and floats, not bool
  template <typename A>
  static constexpr bool accepts = is_float_v<A> || is_int_v<A>;
};
struct Integral {  // integers and bool (bitwise ops)
  template <typename A>
  static constexpr bool accepts = std::is_integral_v<A>;
};
struct Any {
  template <typename A>
  static constexpr bool accepts = true;
};

template <typename A>
KILN_HD bool is_nan(A v) {
  if constexpr (is_float_v<A>) {
    using std::isnan;
    return isnan(v);
  } else {
    return false;
  }
}

// ------------------------------------------------------------------ unary (A -> A)

#define KILN_UNARY_FUNCTOR(Name, Domain, expr)       \
  template <typename A>                              \
  struct Name : Domain {                             \
    KILN_HD A operator()(A x) const { return expr; } \
  };

// Rounding is the identity on integers.
#define KILN_ROUNDING_FUNCTOR(Name, fn) \
  template <typename A>                 \
  struct Name : Numeric {               \
    KILN_HD A operator()(A x) const {   \
      if constexpr (is_float_v<A>) {    \
        using std::fn;                  \
        return fn(x);                   \
      } else {                          \
        return x;                       \
      }                                 \
    }                                   \
  };

// Plain libm calls: std:: on the host, CUDA's overloads on the device.
#define KILN_LIBM_FUNCTOR(Name, fn)   \
  template <typename A>               \
  struct Name : Floating {            \
    KILN_HD A operator()(A x) const { \
      using std::fn;                  \
      return fn(x);                   \
    }                                 \
  };

KILN_UNARY_FUNCTOR(Neg, Numeric, A(-x))
KILN_UNARY_FUNCTOR(Relu, Numeric, x > A(0) ? x : A(0))
KILN_UNARY_FUNCTOR(Rsqrt, Floating, A(1) / std::sqrt(x))
KILN_UNARY_FUNCTOR(Reciprocal, Floating, A(1) / x)
KILN_UNARY_FUNCTOR(Sigmoid, Floating, A(1) / (A(1) + std::exp(-x)))
KILN_UNARY_FUNCTOR(Silu, Floating, x / (A(1) + std::exp(-x)))
KILN_UNARY_FUNCTOR(Gelu, Floating, A(0.5) * x * (A(1) + std::erf(x * A(0.70710678118654752440))))
KILN_UNARY_FUNCTOR(
    GeluTanh, Floating,
    A(0.5) * x * (A(1) + std::tanh(A(0.79788456080286535588) * (x + A(0.044715) * x * x * x))))
KILN_UNARY_FUNCTOR(Erfinv, Floating, special_math::erfinv(x))
KILN_UNARY_FUNCTOR(Digamma, Floating, special_math::digamma(x))
KILN_UNARY_FUNCTOR(I0, Floating, special_math::i0(x))
KILN_UNARY_FUNCTOR(I1, Floating, special_math::i1(x))
KILN_LIBM_FUNCTOR(Exp, exp)
KILN_LIBM_FUNCTOR(Exp2, exp2)
KILN_LIBM_FUNCTOR(Log, log)
KILN_LIBM_FUNCTOR(Log2, log2)
KILN_LIBM_FUNCTOR(Log10, log10)
KILN_LIBM_FUNCTOR(Log1p, log1p)
KILN_LIBM_FUNCTOR(Expm1, expm1)
KILN_LIBM_FUNCTOR(Sqrt, sqrt)
KILN_LIBM_FUNCTOR(Sin, sin)
KILN_LIBM_FUNCTOR(Cos, cos)
KILN_LIBM_FUNCTOR(Tan, tan)
KILN_LIBM_FUNCTOR(Tanh, tanh)
KILN_LIBM_FUNCTOR(Erf, erf)
KILN_LIBM_FUNCTOR(Erfc, erfc)
KILN_LIBM_FUNCTOR(Lgamma, lgamma)
KILN_LIBM_FUNCTOR(Asin, asin)
KILN_LIBM_FUNCTOR(Acos, acos)
KILN_LIBM_FUNCTOR(Atan, atan)
KILN_LIBM_FUNCTOR(Sinh, sinh)
KILN_LIBM_FUNCTOR(Cosh, cosh)
KILN_LIBM_FUNCTOR(Asinh, asinh)
KILN_LIBM_FUNCTOR(Acosh, acosh)
KILN_LIBM_FUNCTOR(Atanh, atanh)
KILN_ROUNDING_FUNCTOR(Floor, floor)
KILN_ROUNDING_FUNCTOR(Ceil, ceil)
KILN_ROUNDING_FUNCTOR(Round, nearbyint)  // half to even, as PyTorch
KILN_ROUNDING_FUNCTOR(Trunc, trunc)

#undef KILN_LIBM_FUNCTOR
#undef KILN_ROUNDING_FUNCTOR
#undef KILN_UNARY_FUNCTOR

// Unsigned integers are their own absolute value and have no negative sign.
template <typename A>
struct Abs : Numeric {
  KILN_HD A operator()(A x) const {
    if constexpr (std::is_unsigned_v<A>) {
      return x;
    } else {
      return x < A(0) ? A(-x) : x;
    }
  }
};

template <typename A>
struct Sign : Numeric {
  KILN_HD A operator()(A x) const {
    if constexpr (std::is_unsigned_v<A>) {
      return A(x != A(0));
    } else {
      return A((A(0) < x) - (x < A(0)));
    }
  }
};

template <typename A>
struct Square : Numeric {
  KILN_HD A operator()(A x) const { return static_cast<A>(x * x); }
};

template <typename A>
struct BitwiseNot : Integral {
  KILN_HD A operator()(A x) const {
    if constexpr (is_bool_v<A>) {
      return !x;
    } else {
      return A(~x);
    }
  }
};

template <typename A>
struct Polygamma : Floating {
  int n;
  KILN_HD A operator()(A x) const { return special_math::polygamma(n, x); }
};

template <typename A>
struct LeakyRelu : Numeric {
  A slope;
  KILN_HD A operator()(A x) const { return x > A(0) ? x : A(x * slope); }
};

template <typename A>
struct Elu : Floating {
  A alpha;
  KILN_HD A operator()(A x) const { return x > A(0) ? x : alpha * std::expm1(x); }
};

template <typename A>
struct Softplus : Floating {
  A beta, threshold;
  KILN_HD A operator()(A x) const {
    return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
  }
};

template <typename A>
struct NanToNum : Numeric {
  A nan, posinf, neginf;
  KILN_HD A operator()(A x) const {
    if constexpr (is_float_v<A>) {
      using std::isinf;
      if (is_nan(x)) return nan;
      if (isinf(x)) return x > A(0) ? posinf : neginf;
    }
    return x;
  }
};

// An op's parameter (kept as a double) in the compute type. Integers go through int64, whose
// conversion to a narrower type wraps the same way on both devices (a double converts to
// uint8 by wrapping on x86 and by saturating on CUDA).
template <typename A>
KILN_HD A param(double v) {
  if constexpr (is_float_v<A> || is_bool_v<A>) {
    return static_cast<A>(v);
  } else {
    return static_cast<A>(static_cast<int64_t>(v));
  }
}

// nan_to_num's replacements only matter for floats; on integers (where the op is the identity)
// they may be out of range, and converting those would be undefined.
template <typename A>
KILN_HD A float_param(double v) {
  if constexpr (is_float_v<A>) {
    return static_cast<A>(v);
  } else {
    return A(0);
  }
}

// A NaN stays NaN; a missing bound does not clamp.
template <typename A>
struct Clamp : Numeric {
  A lo, hi;
  bool has_lo, has_hi;
  KILN_HD A operator()(A x) const {
    if (is_nan(x)) return x;
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return x;
  }
};

// ------------------------------------------------------------------ predicates (A -> bool)

template <typename A>
struct LogicalNot : Any {
  KILN_HD bool operator()(A x) const { return !(x != A(0)); }
};
template <typename A>
struct IsNan : Any {
  KILN_HD bool operator()(A x) const { return is_nan(x); }
};
template <typename A>
struct IsInf : Any {
  KILN_HD bool operator()(A x) const {
    if constexpr (is_float_v<A>) {
      using std::isinf;
      return isinf(x);
    } else {
      return false;
    }
  }
};
template <typename A>
struct IsFinite : Any {
  KILN_HD bool operator()(A x) const {
    if constexpr (is_float_v<A>) {
      using std::isfinite;
      return isfinite(x);
    } else {
      return true;
    }
  }
};
// Not std::signbit: GCC 12 fails (internal compiler error) vectorizing it over half types;
// 1 / -0 = -inf tells -0 apart. A negative NaN reads as unsigned.
template <typename A>
struct Signbit : Any {
  KILN_HD bool operator()(A x) const {
    if constexpr (is_float_v<A>) {
      return x < A(0) || (x == A(0) && A(1) / x < A(0));
    } else if constexpr (std::is_signed_v<A>) {
      return x < A(0);
    } else {
      return false;
    }
  }
};

// ------------------------------------------------------------------ integer helpers

// Python's floor division and remainder signs; x / -1 is -x and x % -1 is 0, so INT_MIN / -1
// never traps. y == 0 goes to the sink (Note [Shared elementwise functors]) and yields 0.
template <typename A, typename Sink>
KILN_HD A int_floor_div(A x, A y, const Sink& sink) {
  if (y == A(0)) {
    sink.zero_division();
    return A(0);
  }
  if constexpr (std::is_signed_v<A>) {
    if (y == A(-1)) return A(-x);
    A q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return q;
  } else {
    return x / y;
  }
}

template <typename A, typename Sink>
KILN_HD A int_remainder(A x, A y, const Sink& sink) {
  if (y == A(0)) {
    sink.zero_division();
    return A(0);
  }
  if constexpr (std::is_signed_v<A>) {
    if (y == A(-1)) return A(0);
    A r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
  } else {
    return x % y;
  }
}

// C's truncated remainder: the result takes the sign of x.
template <typename A, typename Sink>
KILN_HD A int_fmod(A x, A y, const Sink& sink) {
  if (y == A(0)) {
    sink.zero_division();
    return A(0);
  }
  if constexpr (std::is_signed_v<A>) {
    if (y == A(-1)) return A(0);
  }
  return A(x % y);
}

// PyTorch's integer power of a tensor exponent: a negative exponent gives 1 / base rounded
// towards zero (0, or +-1 for a base of +-1). A negative *scalar* exponent is refused by the
// front end (ops/binary.cpp), as PyTorch does.
template <typename A>
KILN_HD A int_pow(A base, A exp) {
  if constexpr (std::is_signed_v<A>) {
    if (exp < 0) {
      if (base == A(1)) return A(1);
      if (base == A(-1)) return (exp % 2) ? A(-1) : A(1);
      return A(0);
    }
  }
  A result = 1;
  while (exp) {
    if (exp & 1) result = A(result * base);
    exp >>= 1;
    if (exp) base = A(base * base);
  }
  return result;
}

// ------------------------------------------------------------------ binary (A, A -> A)

// On bool, add is `or` and mul is `and` (PyTorch's bool arithmetic).
template <typename A>
struct Add : Any {
  KILN_HD A operator()(A x, A y) const {
    if constexpr (is_bool_v<A>) {
      return x || y;
    } else {
      return A(x + y);
    }
  }
};
template <typename A>
struct Sub : Numeric {
  KILN_HD A operator()(A x, A y) const { return A(x - y); }
};
template <typename A>
struct Mul : Any {
  KILN_HD A operator()(A x, A y) const {
    if constexpr (is_bool_v<A>) {
      return x && y;
    } else {
      return A(x * y);
    }
  }
};
// Integers divide in float (the front end promotes them).
template <typename A>
struct Div : Floating {
  KILN_HD A operator()(A x, A y) const { return x / y; }
};

template <typename A, typename Sink>
struct FloorDivide : Numeric {
  Sink sink;
  KILN_HD A operator()(A x, A y) const {
    if constexpr (is_float_v<A>) {
      return std::floor(x / y);
    } else {
      return int_floor_div(x, y, sink);
    }
  }
};

// The result takes the sign of y (Python's %).
template <typename A, typename Sink>
struct Remainder : Numeric {
  Sink sink;
  KILN_HD A operator()(A x, A y) const {
    if constexpr (is_float_v<A>) {
      A r = std::fmod(x, y);
      if (r != A(0) && ((r < A(0)) != (y < A(0)))) r += y;
      return r;
    } else {
      return int_remainder(x, y, sink);
    }
  }
};

template <typename A, typename Sink>
struct Fmod : Numeric {
  Sink sink;
  KILN_HD A operator()(A x, A y) const {
    if constexpr (is_float_v<A>) {
      return std::fmod(x, y);
    } else {
      return int_fmod(x, y, sink);
    }
  }
};

template <typename A>
struct Pow : Numeric {
  KILN_HD A operator()(A x, A y) const {
    if constexpr (is_float_v<A>) {
      return std::pow(x, y);
    } else {
      return int_pow(x, y);
    }
  }
};

// NaN-aware extremes: a NaN on either side is the result (the first one if both are NaN).
template <typename A>
struct Maximum : Any {
  KILN_HD A operator()(A x, A y) const {
    if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;
    return x > y ? x : y;
  }
};
template <typename A>
struct Minimum : Any {
  KILN_HD A operator()(A x, A y) const {
    if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;
    return x < y ? x : y;
  }
};

template <typename A>
struct Atan2 : Floating {
  KILN_HD A operator()(A x, A y) const { return std::atan2(x, y); }
};
// Steps in A: the front end admits float32 and float64 only, where A is the element type.
template <typename A>
struct Nextafter : Floating {
  KILN_HD A operator()(A x, A y) const { return std::nextafter(x, y); }
};

// g * f'(v) of one activation (ops/activation_grad.h), the op a constant.
template <typename A, BinaryOp Op>
struct ActivationGrad : Floating {
  KILN_HD A operator()(A g, A v) const { return activation_grad::apply(Op, g, v); }
};

template <typename A>
struct BitwiseAnd : Integral {
  KILN_HD A operator()(A x, A y) const { return A(x & y); }
};
template <typename A>
struct BitwiseOr : Integral {
  KILN_HD A operator()(A x, A y) const { return A(x | y); }
};
template <typename A>
struct BitwiseXor : Integral {
  KILN_HD A operator()(A x, A y) const { return A(x ^ y); }
};

// ------------------------------------------------------------------ comparisons (-> bool)

#define KILN_COMPARE_FUNCTOR(Name, expr)                     \
  template <typename A>                                      \
  struct Name : Any {                                        \
    KILN_HD bool operator()(A x, A y) const { return expr; } \
  };
KILN_COMPARE_FUNCTOR(Eq, x == y)
KILN_COMPARE_FUNCTOR(Ne, x != y)
KILN_COMPARE_FUNCTOR(Lt, x < y)
KILN_COMPARE_FUNCTOR(Le, x <= y)
KILN_COMPARE_FUNCTOR(Gt, x > y)
KILN_COMPARE_FUNCTOR(Ge, x >= y)
KILN_COMPARE_FUNCTOR(LogicalAnd, x != A(0) && y != A(0))
KILN_COMPARE_FUNCTOR(LogicalOr, x != A(0) || y != A(0))
KILN_COMPARE_FUNCTOR(LogicalXor, (x != A(0)) != (y != A(0)))
#undef KILN_COMPARE_FUNCTOR

// ------------------------------------------------------------------ visitors

// What the visitors pass for an op its functor does not define on A. The host checks ops and
// dtypes before a launch, so a device kernel never calls it; the CPU raises NotImplementedError.
struct Unsupported {};
template <typename Fn>
constexpr bool is_unsupported_v = std::is_same_v<std::decay_t<Fn>, Unsupported>;

// f(fn) when fn's domain holds A, else f(Unsupported{}).
KILN_HD_TEMPLATE
template <typename A, typename Fn, typename F>
KILN_HD decltype(auto) accepted(F& f, const Fn& fn) {
  if constexpr (Fn::template accepts<A>) {
    return f(fn);
  } else {
    return f(Unsupported{});
  }
}

// The functor of a unary op with kind Same or Float, or Unsupported (predicates included).
KILN_HD_TEMPLATE
template <typename A, typename F>
KILN_HD decltype(auto) visit_unary(UnaryOp op, const UnaryParams& p, F&& f) {
  switch (op) {
    case UnaryOp::neg:
      return accepted<A>(f, Neg<A>{});
    case UnaryOp::abs:
      return accepted<A>(f, Abs<A>{});
    case UnaryOp::sign:
      return accepted<A>(f, Sign<A>{});
    case UnaryOp::exp:
      return accepted<A>(f, Exp<A>{});
    case UnaryOp::exp2:
      return accepted<A>(f, Exp2<A>{});
    case UnaryOp::log:
      return accepted<A>(f, Log<A>{});
    case UnaryOp::log2:
      return accepted<A>(f, Log2<A>{});
    case UnaryOp::log10:
      return accepted<A>(f, Log10<A>{});
    case UnaryOp::log1p:
      return accepted<A>(f, Log1p<A>{});
    case UnaryOp::expm1:
      return accepted<A>(f, Expm1<A>{});
    case UnaryOp::sqrt:
      return accepted<A>(f, Sqrt<A>{});
    case UnaryOp::rsqrt:
      return accepted<A>(f, Rsqrt<A>{});
    case UnaryOp::reciprocal:
      return accepted<A>(f, Reciprocal<A>{});
    case UnaryOp::sin:
      return accepted<A>(f, Sin<A>{});
    case UnaryOp::cos:
      return accepted<A>(f, Cos<A>{});
    case UnaryOp::tan:
      return accepted<A>(f, Tan<A>{});
    case UnaryOp::tanh:
      return accepted<A>(f, Tanh<A>{});
    case UnaryOp::sigmoid:
      return accepted<A>(f, Sigmoid<A>{});
    case UnaryOp::erf:
      return accepted<A>(f, Erf<A>{});
    case UnaryOp::square:
      return accepted<A>(f, Square<A>{});
    case UnaryOp::asin:
      return accepted<A>(f, Asin<A>{});
    case UnaryOp::acos:
      return accepted<A>(f, Acos<A>{});
    case UnaryOp::atan:
      return accepted<A>(f, Atan<A>{});
    case UnaryOp::sinh:
      return accepted<A>(f, Sinh<A>{});
    case UnaryOp::cosh:
      return accepted<A>(f, Cosh<A>{});
    case UnaryOp::asinh:
      return accepted<A>(f, Asinh<A>{});
    case UnaryOp::acosh:
      return accepted<A>(f, Acosh<A>{});
    case UnaryOp::atanh:
      return accepted<A>(f, Atanh<A>{});
    case UnaryOp::relu:
      return accepted<A>(f, Relu<A>{});
    case UnaryOp::silu:
      return accepted<A>(f, Silu<A>{});
    case UnaryOp::floor:
      return accepted<A>(f, Floor<A>{});
    case UnaryOp::ceil:
      return accepted<A>(f, Ceil<A>{});
    case UnaryOp::round:
      return accepted<A>(f, Round<A>{});
    case UnaryOp::trunc:
      return accepted<A>(f, Trunc<A>{});
    case UnaryOp::bitwise_not:
      return accepted<A>(f, BitwiseNot<A>{});
    case UnaryOp::lgamma:
      return accepted<A>(f, Lgamma<A>{});
    case UnaryOp::digamma:
      return accepted<A>(f, Digamma<A>{});
    case UnaryOp::erfc:
      return accepted<A>(f, Erfc<A>{});
    case UnaryOp::erfinv:
      return accepted<A>(f, Erfinv<A>{});
    case UnaryOp::i0:
      return accepted<A>(f, I0<A>{});
    case UnaryOp::gelu:
      return accepted<A>(f, Gelu<A>{});
    case UnaryOp::gelu_tanh:
      return accepted<A>(f, GeluTanh<A>{});
    case UnaryOp::leaky_relu:
      return accepted<A>(f, LeakyRelu<A>{{}, param<A>(p.a)});
    case UnaryOp::elu:
      return accepted<A>(f, Elu<A>{{}, static_cast<A>(p.a)});
    case UnaryOp::softplus:
      return accepted<A>(f, Softplus<A>{{}, static_cast<A>(p.a), static_cast<A>(p.b)});
    case UnaryOp::nan_to_num:
      return accepted<A>(
          f, NanToNum<A>{{}, float_param<A>(p.a), float_param<A>(p.b), float_param<A>(p.c)});
    case UnaryOp::clamp:
      return accepted<A>(f, Clamp<A>{{}, param<A>(p.a), param<A>(p.b), p.has_a, p.has_b});
    case UnaryOp::polygamma:
      return accepted<A>(f, Polygamma<A>{{}, static_cast<int>(p.a)});
    case UnaryOp::i1:
      return accepted<A>(f, I1<A>{});
    default:
      return f(Unsupported{});
  }
}

// The functor of a unary op with kind Bool.
KILN_HD_TEMPLATE
template <typename A, typename F>
KILN_HD decltype(auto) visit_predicate(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::logical_not:
      return f(LogicalNot<A>{});
    case UnaryOp::isnan:
      return f(IsNan<A>{});
    case UnaryOp::isinf:
      return f(IsInf<A>{});
    case UnaryOp::isfinite:
      return f(IsFinite<A>{});
    case UnaryOp::signbit:
      return f(Signbit<A>{});
    default:
      return f(Unsupported{});
  }
}

// The functor of a binary op with kind Promote, Float or Integral. `sink` receives integer
// divisions by zero (Note [Shared elementwise functors]).
KILN_HD_TEMPLATE
template <typename A, typename Sink, typename F>
KILN_HD decltype(auto) visit_binary(BinaryOp op, const Sink& sink, F&& f) {
  switch (op) {
    case BinaryOp::add:
      return accepted<A>(f, Add<A>{});
    case BinaryOp::sub:
      return accepted<A>(f, Sub<A>{});
    case BinaryOp::mul:
      return accepted<A>(f, Mul<A>{});
    case BinaryOp::div:
      return accepted<A>(f, Div<A>{});
    case BinaryOp::floor_divide:
      return accepted<A>(f, FloorDivide<A, Sink>{{}, sink});
    case BinaryOp::remainder:
      return accepted<A>(f, Remainder<A, Sink>{{}, sink});
    case BinaryOp::fmod:
      return accepted<A>(f, Fmod<A, Sink>{{}, sink});
    case BinaryOp::pow:
      return accepted<A>(f, Pow<A>{});
    case BinaryOp::maximum:
      return accepted<A>(f, Maximum<A>{});
    case BinaryOp::minimum:
      return accepted<A>(f, Minimum<A>{});
    case BinaryOp::atan2:
      return accepted<A>(f, Atan2<A>{});
    case BinaryOp::nextafter:
      return accepted<A>(f, Nextafter<A>{});
    case BinaryOp::bitwise_and:
      return accepted<A>(f, BitwiseAnd<A>{});
    case BinaryOp::bitwise_or:
      return accepted<A>(f, BitwiseOr<A>{});
    case BinaryOp::bitwise_xor:
      return accepted<A>(f, BitwiseXor<A>{});
#define KILN_GRAD_CASE(name, kind, autocast) \
  case BinaryOp::name:                       \
    return accepted<A>(f, ActivationGrad<A, BinaryOp::name>{});
      KILN_BINARY_GRAD_OPS(KILN_GRAD_CASE)
#undef KILN_GRAD_CASE
    default:
      return f(Unsupported{});
  }
}

// The functor of a binary op with kind Compare.
KILN_HD_TEMPLATE
template <typename A, typename F>
KILN_HD decltype(auto) visit_compare(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::eq:
      return f(Eq<A>{});
    case BinaryOp::ne:
      return f(Ne<A>{});
    case BinaryOp::lt:
      return f(Lt<A>{});
    case BinaryOp::le:
      return f(Le<A>{});
    case BinaryOp::gt:
      return f(Gt<A>{});
    case BinaryOp::ge:
      return f(Ge<A>{});
    case BinaryOp::logical_and:
      return f(LogicalAnd<A>{});
    case BinaryOp::logical_or:
      return f(LogicalOr<A>{});
    case BinaryOp::logical_xor:
      return f(LogicalXor<A>{});
    default:
      return f(Unsupported{});
  }
}

// A sink for contexts where no integer division can reach it (or that check beforehand).
struct NoSink {
  KILN_HD void zero_division() const {}
};

}  // namespace kiln::math
