// CUDA kernels of the unary elementwise ops (Note [CUDA elementwise]).
#include <cmath>

#include "cuda/elementwise.cuh"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

template <typename A>
__device__ A unary_floating(UnaryOp op, A x, const UnaryParams& p) {
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::abs: return x < A(0) ? -x : x;
    case UnaryOp::sign: return A((A(0) < x) - (x < A(0)));
    case UnaryOp::exp: return exp(x);
    case UnaryOp::exp2: return exp2(x);
    case UnaryOp::log: return log(x);
    case UnaryOp::log2: return log2(x);
    case UnaryOp::log10: return log10(x);
    case UnaryOp::log1p: return log1p(x);
    case UnaryOp::expm1: return expm1(x);
    case UnaryOp::sqrt: return sqrt(x);
    case UnaryOp::rsqrt: return A(1) / sqrt(x);
    case UnaryOp::reciprocal: return A(1) / x;
    case UnaryOp::sin: return sin(x);
    case UnaryOp::cos: return cos(x);
    case UnaryOp::tan: return tan(x);
    case UnaryOp::tanh: return tanh(x);
    case UnaryOp::sigmoid: return A(1) / (A(1) + exp(-x));
    case UnaryOp::erf: return erf(x);
    case UnaryOp::relu: return x > A(0) ? x : A(0);
    case UnaryOp::silu: return x / (A(1) + exp(-x));
    case UnaryOp::floor: return floor(x);
    case UnaryOp::ceil: return ceil(x);
    case UnaryOp::round: return rint(x);  // half to even, as PyTorch
    case UnaryOp::trunc: return trunc(x);
    case UnaryOp::gelu: return A(0.5) * x * (A(1) + erf(x * A(0.70710678118654752440)));
    case UnaryOp::gelu_tanh:
      return A(0.5) * x *
             (A(1) + tanh(A(0.79788456080286535588) * (x + A(0.044715) * x * x * x)));
    case UnaryOp::leaky_relu: return x > A(0) ? x : x * A(p.a);
    case UnaryOp::elu: return x > A(0) ? x : A(p.a) * expm1(x);
    case UnaryOp::softplus:
      return x * A(p.a) > A(p.b) ? x : log1p(exp(x * A(p.a))) / A(p.a);
    case UnaryOp::nan_to_num:
      if (isnan(x)) return A(p.a);
      if (isinf(x)) return x > A(0) ? A(p.b) : A(p.c);
      return x;
    case UnaryOp::clamp:
      if (isnan(x)) return x;
      if (p.has_a && x < A(p.a)) x = A(p.a);
      if (p.has_b && x > A(p.b)) x = A(p.b);
      return x;
    default:
      return x;  // not reached: the host checks the op
  }
}

template <typename T>
__device__ T unary_integral(UnaryOp op, T x, const UnaryParams& p) {
  switch (op) {
    case UnaryOp::neg: return T(-x);
    case UnaryOp::abs:
      if constexpr (std::is_unsigned_v<T>) return x;
      else return x < T(0) ? T(-x) : x;
    case UnaryOp::sign:
      if constexpr (std::is_unsigned_v<T>) return T(x != 0);
      else return T((T(0) < x) - (x < T(0)));
    case UnaryOp::relu: return x > T(0) ? x : T(0);
    case UnaryOp::leaky_relu: return x > T(0) ? x : T(x * p.a);
    case UnaryOp::bitwise_not: return T(~x);
    case UnaryOp::clamp:
      if (p.has_a && x < T(p.a)) x = T(p.a);
      if (p.has_b && x > T(p.b)) x = T(p.b);
      return x;
    default:
      return x;  // floor/ceil/round/trunc/nan_to_num are the identity on integers
  }
}

template <typename T>
__device__ bool unary_predicate(UnaryOp op, T v) {
  using A = acc_t<T>;
  A x = static_cast<A>(v);
  switch (op) {
    case UnaryOp::logical_not: return !(x != A(0));
    case UnaryOp::isnan:
      if constexpr (std::is_floating_point_v<A>) return isnan(x);
      return false;
    case UnaryOp::isinf:
      if constexpr (std::is_floating_point_v<A>) return isinf(x);
      return false;
    case UnaryOp::isfinite:
      if constexpr (std::is_floating_point_v<A>) return isfinite(x);
      return true;
    default:
      return false;
  }
}

template <typename T>
__global__ void unary_same_kernel(UnaryOp op, UnaryParams p, int64_t n, OffsetCalc<2> calc,
                                  T* out, const T* in) {
  using A = acc_t<T>;
  KILN_GRID_STRIDE(i, n) {
    int64_t off[2];
    calc.get(i, off);
    if constexpr (std::is_same_v<T, bool>) {
      out[off[0]] = !in[off[1]];  // bitwise_not of bool
    } else if constexpr (std::is_floating_point_v<A>) {
      out[off[0]] = static_cast<T>(unary_floating<A>(op, static_cast<A>(in[off[1]]), p));
    } else {
      out[off[0]] = unary_integral<T>(op, in[off[1]], p);
    }
  }
}

template <typename T>
__global__ void unary_bool_kernel(UnaryOp op, int64_t n, OffsetCalc<2> calc, bool* out,
                                  const T* in) {
  KILN_GRID_STRIDE(i, n) {
    int64_t off[2];
    calc.get(i, off);
    out[off[0]] = unary_predicate<T>(op, in[off[1]]);
  }
}

}  // namespace

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p) {
  const char* name = op_name(op);
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  auto calc = make_offset_calc<2>(out.sizes(), {&out, &in}, name);
  if (op_kind(op) == UnaryKind::Bool) {
    dispatch_all(in.dtype(), name, [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      unary_bool_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(op, n, calc, out.data<bool>(),
                                                         static_cast<const T*>(in.data_ptr()));
    });
  } else {
    if (in.dtype() == DType::Bool) {
      KILN_CHECK(op == UnaryOp::bitwise_not, NotImplemented, "[", name,
                 "] not implemented for dtype bool");
    } else if (!is_floating(in.dtype())) {
      KILN_CHECK(op_kind(op) != UnaryKind::Float, NotImplemented, "[", name,
                 "] not implemented for dtype ", in.dtype());
    } else {
      KILN_CHECK(op != UnaryOp::bitwise_not, NotImplemented, "[", name,
                 "] not implemented for dtype ", in.dtype());
    }
    dispatch_all(in.dtype(), name, [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      unary_same_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(op, p, n, calc,
                                                         static_cast<T*>(out.data_ptr()),
                                                         static_cast<const T*>(in.data_ptr()));
    });
  }
  KILN_CUDA_CHECK_LAUNCH(name);
}

}  // namespace kiln::cuda
