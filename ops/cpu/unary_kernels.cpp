// CPU kernels of the unary elementwise ops (ops/op_table.h): the loop shape around the shared
// functors (Note [Shared elementwise functors], ops/math/functors.h). Half types compute in
// float (acc_t) and round once on store; each (op, dtype) gets its own loop with the functor
// inlined, so contiguous loops vectorize.
#include <type_traits>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"
#include "ops/dispatch.h"
#include "ops/math/functors.h"

namespace kiln::cpu {

namespace {

[[noreturn]] void not_implemented(UnaryOp op, DType dt) {
  fail(ErrorKind::NotImplemented, "[", op_name(op), "] not implemented for dtype ", dt);
}

// float32 exp, sigmoid and silu: math::Exp / Sigmoid / Silu with the vectorised exp_f32 in
// place of libm's (Note [Vectorised float exp]), their contiguous runs compiled for AVX2 too
// (Note [AVX2 clones of hot loops]). Float32 only: half types are memory-bound here, and
// float64 keeps libm.
float sigmoid_f32(float x) { return 1.f / (1.f + exp_f32(-x)); }
float silu_f32(float x) { return x / (1.f + exp_f32(-x)); }

KILN_AVX2_CLONES void exp_run(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i]);
}
KILN_AVX2_CLONES void sigmoid_run(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = sigmoid_f32(x[i]);
}
KILN_AVX2_CLONES void silu_run(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = silu_f32(x[i]);
}

bool float_exp_family(UnaryOp op, const Tensor& out, const Tensor& in) {
  if (in.dtype() != DType::Float32 || out.dtype() != DType::Float32) return false;
  switch (op) {
    case UnaryOp::exp:
      unary_loop_runs<float, float>(out, in, exp_run, exp_f32);
      return true;
    case UnaryOp::sigmoid:
      unary_loop_runs<float, float>(out, in, sigmoid_run, sigmoid_f32);
      return true;
    case UnaryOp::silu:
      unary_loop_runs<float, float>(out, in, silu_run, silu_f32);
      return true;
    default:
      return false;
  }
}

}  // namespace

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p) {
  if (float_exp_family(op, out, in)) return;
  const bool predicate = op_kind(op) == UnaryKind::Bool;
  dispatch_all(in.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    auto run = [&](auto fn) {
      if constexpr (math::is_unsupported_v<decltype(fn)>) {
        not_implemented(op, in.dtype());
      } else if constexpr (std::is_same_v<decltype(fn(A())), bool>) {
        unary_loop<bool, T>(out, in, [fn](T x) { return fn(A(x)); });
      } else {
        unary_loop<T, T>(out, in, [fn](T x) { return T(fn(A(x))); });
      }
    };
    if (predicate) {
      math::visit_predicate<A>(op, run);
    } else {
      math::visit_unary<A>(op, p, run);
    }
  });
}

}  // namespace kiln::cpu
