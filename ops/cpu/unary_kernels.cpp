// CPU kernels of the unary elementwise ops (ops/op_table.h): the loop shape around the shared
// functors (Note [Shared elementwise functors], ops/math/functors.h). Half types compute in
// float (acc_t) and round once on store; each (op, dtype) gets its own loop with the functor
// inlined, so contiguous loops vectorize.
#include <type_traits>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/dispatch.h"
#include "ops/math/functors.h"

namespace kiln::cpu {

namespace {

[[noreturn]] void not_implemented(UnaryOp op, DType dt) {
  fail(ErrorKind::NotImplemented, "[", op_name(op), "] not implemented for dtype ", dt);
}

}  // namespace

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p) {
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
