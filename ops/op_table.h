// The elementwise op table: every unary and binary elementwise op appears
// here once, with how it treats dtypes. The enums drive the device kernel
// switches, the Python bindings (python/bind_elementwise.cpp) and the test
// harness (kiln._C._op_table()).
#pragma once

#include <cstdint>

namespace kiln {

// Result dtype policy of a unary op:
//   Float: integer/bool inputs compute in float32 (exp(int) -> float32)
//   Same:  output has the input dtype (neg, abs, floor)
//   Bool:  output is bool (isnan)
enum class UnaryKind : int8_t { Float, Same, Bool };

// Autocast policy, following PyTorch's CUDA lists (ops/autocast_policy.cpp
// merges this column into the one autocast table). Lower: fp16/bf16; Float32:
// always fp32; Promote: widest input. Binary ops compute in the widest input
// dtype anyway (result_type), so only those PyTorch lists carry a policy.
enum class AutocastPolicy : int8_t { Lower, Float32, Promote, None };

// _(name, kind, autocast). Simple ops take only the input; parametric ones
// read UnaryParams and get hand-written signatures (leaky_relu(x, slope)).
#define KILN_UNARY_SIMPLE_OPS(_)       \
  _(neg, Same, None)                   \
  _(abs, Same, None)                   \
  _(sign, Same, None)                  \
  _(exp, Float, Float32)               \
  _(exp2, Float, None)                 \
  _(log, Float, Float32)               \
  _(log2, Float, Float32)              \
  _(log10, Float, Float32)             \
  _(log1p, Float, Float32)             \
  _(expm1, Float, Float32)             \
  _(sqrt, Float, None)                 \
  _(rsqrt, Float, Float32)             \
  _(reciprocal, Float, Float32)        \
  _(sin, Float, None)                  \
  _(cos, Float, None)                  \
  _(tan, Float, Float32)               \
  _(tanh, Float, None)                 \
  _(sigmoid, Float, None)              \
  _(erf, Float, None)                  \
  _(square, Same, None)                \
  _(asin, Float, Float32)              \
  _(acos, Float, Float32)              \
  _(atan, Float, None)                 \
  _(sinh, Float, Float32)              \
  _(cosh, Float, Float32)              \
  _(asinh, Float, None)                \
  _(acosh, Float, None)                \
  _(atanh, Float, None)                \
  _(relu, Same, None)                  \
  _(silu, Float, None)                 \
  _(floor, Same, None)                 \
  _(ceil, Same, None)                  \
  _(round, Same, None)                 \
  _(trunc, Same, None)                 \
  _(logical_not, Bool, None)           \
  _(bitwise_not, Same, None)           \
  _(isnan, Bool, None)                 \
  _(isinf, Bool, None)                 \
  _(isfinite, Bool, None)              \
  _(signbit, Bool, None)               \
  _(lgamma, Float, None)               \
  _(digamma, Float, None)              \
  _(erfc, Float, None)                 \
  _(erfinv, Float, Float32)            \
  _(i0, Float, None)

#define KILN_UNARY_PARAM_OPS(_)        \
  _(gelu, Float, None)                 \
  _(gelu_tanh, Float, None)            \
  _(leaky_relu, Same, None)            \
  _(elu, Float, None)                  \
  _(softplus, Float, Float32)          \
  _(nan_to_num, Same, None)            \
  _(clamp, Same, None)                 \
  _(polygamma, Float, None)            \
  _(i1, Float, None)

#define KILN_UNARY_OPS(_) KILN_UNARY_SIMPLE_OPS(_) KILN_UNARY_PARAM_OPS(_)

enum class UnaryOp : int16_t {
#define KILN_UNARY_ENUM(name, kind, autocast) name,
  KILN_UNARY_OPS(KILN_UNARY_ENUM)
#undef KILN_UNARY_ENUM
};

// Parameters of the parametric unary ops (leaky_relu slope, elu alpha,
// softplus beta/threshold, clamp bounds, nan_to_num replacements, polygamma order).
struct UnaryParams {
  double a = 0, b = 0, c = 0;
  // clamp: which of a (min) / b (max) are given.
  bool has_a = false, has_b = false;
};

// Result dtype policy of a binary op:
//   Promote: result_type of the inputs (add, mul, maximum)
//   Float:   like Promote, then integers become float32 (true division)
//   Compare: computes in the promoted type, outputs bool
//   Integral: bitwise ops, integer/bool inputs only
enum class BinaryKind : int8_t { Promote, Float, Compare, Integral };

// _(name, kind, autocast)
#define KILN_BINARY_OPS(_)               \
  _(add, Promote, None)                  \
  _(sub, Promote, None)                  \
  _(mul, Promote, None)                  \
  _(div, Float, None)                    \
  _(floor_divide, Promote, None)         \
  _(remainder, Promote, None)            \
  _(fmod, Promote, None)                 \
  _(pow, Promote, Float32)               \
  _(maximum, Promote, None)              \
  _(minimum, Promote, None)              \
  _(atan2, Float, Promote)               \
  _(eq, Compare, None)                   \
  _(ne, Compare, None)                   \
  _(lt, Compare, None)                   \
  _(le, Compare, None)                   \
  _(gt, Compare, None)                   \
  _(ge, Compare, None)                   \
  _(logical_and, Compare, None)          \
  _(logical_or, Compare, None)           \
  _(logical_xor, Compare, None)          \
  _(bitwise_and, Integral, None)         \
  _(bitwise_or, Integral, None)          \
  _(bitwise_xor, Integral, None)         \
  _(nextafter, Promote, None)

// Fused activation gradients f(grad, x) (x: the input; for sigmoid, tanh and
// relu the saved result). Internal: backward rules use them when no graph of the
// backward is built (unary.cpp); they are not bound to Python and never autocast.
#define KILN_BINARY_GRAD_OPS(_)          \
  _(gelu_backward, Promote, None)        \
  _(gelu_tanh_backward, Promote, None)   \
  _(silu_backward, Promote, None)        \
  _(sigmoid_backward, Promote, None)     \
  _(tanh_backward, Promote, None)        \
  _(relu_backward, Promote, None)

enum class BinaryOp : int16_t {
#define KILN_BINARY_ENUM(name, kind, autocast) name,
  KILN_BINARY_OPS(KILN_BINARY_ENUM)
  KILN_BINARY_GRAD_OPS(KILN_BINARY_ENUM)
#undef KILN_BINARY_ENUM
};

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
UnaryKind op_kind(UnaryOp op);
BinaryKind op_kind(BinaryOp op);

}  // namespace kiln
