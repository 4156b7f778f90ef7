// CPU kernels of the binary elementwise ops (ops/op_table.h): the loop shape around the shared
// functors (Note [Shared elementwise functors], ops/math/functors.h).
#include <type_traits>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/dispatch.h"
#include "ops/math/functors.h"

namespace kiln::cpu {

namespace {

// The CPU raises an integer division by zero where it happens; the parallel loop rethrows it
// after its OpenMP region (Note [Parallel elementwise loops]).
struct RaiseZeroDivision {
  BinaryOp op;
  void zero_division() const { fail(ErrorKind::Runtime, zero_division_message(op_name(op))); }
};

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

[[noreturn]] void no_kernel(BinaryOp op, DType dt) {
  fail(ErrorKind::NotImplemented, "[", op_name(op), "] no CPU kernel for dtype ", dt);
}

}  // namespace

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  if (op_kind(op) == BinaryKind::Compare) {
    return dispatch_all(a.dtype(), name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      math::visit_compare<A>(op, [&](auto fn) {
        if constexpr (math::is_unsupported_v<decltype(fn)>) {
          no_kernel(op, a.dtype());
        } else {
          binary_loop<bool, T, T>(out, a, b, [fn](T x, T y) { return fn(A(x), A(y)); });
        }
      });
    });
  }
  // out, not a: a may be a float32 scalar (arithmetic_loop).
  dispatch_all(out.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    math::visit_binary<acc_t<T>>(op, RaiseZeroDivision{op}, [&](auto fn) {
      if constexpr (math::is_unsupported_v<decltype(fn)>) {
        no_kernel(op, a.dtype());
      } else {
        arithmetic_loop<T>(out, a, b, fn);
      }
    });
  });
}

}  // namespace kiln::cpu
