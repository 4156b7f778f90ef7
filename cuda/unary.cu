// CUDA kernels of the unary elementwise ops (Note [CUDA elementwise]).
#include <cmath>

#include "cuda/elementwise.cuh"
#include "ops/dispatch.h"
#include "ops/special_math.h"

namespace kiln::cuda {

namespace {

template <typename A>
__device__ __forceinline__ A unary_floating(UnaryOp op, A x, const UnaryParams& p) {
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
    case UnaryOp::erfc: return erfc(x);
    case UnaryOp::erfinv: return special_math::erfinv(x);
    case UnaryOp::lgamma: return lgamma(x);
    case UnaryOp::digamma: return special_math::digamma(x);
    case UnaryOp::polygamma: return special_math::polygamma(static_cast<int>(p.a), x);
    case UnaryOp::i0: return special_math::i0(x);
    case UnaryOp::i1: return special_math::i1(x);
    case UnaryOp::square: return x * x;
    case UnaryOp::asin: return asin(x);
    case UnaryOp::acos: return acos(x);
    case UnaryOp::atan: return atan(x);
    case UnaryOp::sinh: return sinh(x);
    case UnaryOp::cosh: return cosh(x);
    case UnaryOp::asinh: return asinh(x);
    case UnaryOp::acosh: return acosh(x);
    case UnaryOp::atanh: return atanh(x);
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
    case UnaryOp::square: return T(x * x);
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
    case UnaryOp::signbit:
      if constexpr (std::is_floating_point_v<A>) return signbit(x);
      else if constexpr (std::is_signed_v<A>) return x < A(0);
      return false;
    default:
      return false;
  }
}

template <typename T>
struct UnaryFn {
  UnaryOp op;
  UnaryParams p;
  __device__ T operator()(T x) const {
    using A = acc_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      return !x;  // bitwise_not of bool
    } else if constexpr (std::is_floating_point_v<A>) {
      return static_cast<T>(unary_floating<A>(op, static_cast<A>(x), p));
    } else {
      return unary_integral<T>(op, x, p);
    }
  }
};

// Note [Activations with the op fixed]: UnaryFn switches on the op at run time over every
// unary op; the registers its heaviest cases claim are claimed by every launch, and GELU over a
// GPT-2 MLP ran at half PyTorch's bandwidth (70 against 37 us for 25M bfloat16 elements on
// the H200). The activations of a training step get kernels with the op a template argument,
// so the switch folds to the one case.
template <typename T, UnaryOp Op>
struct FixedUnaryFn {
  UnaryParams p;
  __device__ T operator()(T x) const {
    using A = acc_t<T>;
    return static_cast<T>(unary_floating<A>(Op, static_cast<A>(x), p));
  }
};

template <typename T>
struct PredicateFn {
  UnaryOp op;
  __device__ bool operator()(T x) const { return unary_predicate<T>(op, x); }
};

// Contiguous operands: V elements per 16-byte access, then the tail.
template <int V, typename T, typename Out, typename F>
__global__ void unary_flat_kernel(int64_t n, Out* out, const T* in, F f) {
  const int64_t packs = n / V;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = first; p < packs; p += step) {
    const Pack<T, V> x = reinterpret_cast<const Pack<T, V>*>(in)[p];
    Pack<Out, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = f(x.v[k]);
    reinterpret_cast<Pack<Out, V>*>(out)[p] = r;
  }
  for (int64_t i = packs * V + first; i < n; i += step) out[i] = f(in[i]);
}

template <typename T, typename Out, typename F>
__global__ void unary_strided_kernel(int64_t n, OffsetCalc<2> calc, Out* out, const T* in, F f) {
  KILN_GRID_STRIDE(i, n) {
    int64_t off[2];
    calc.get(i, off);
    out[off[0]] = f(in[off[1]]);
  }
}

template <typename T, typename Out, typename F>
void launch_unary(const Tensor& out, const Tensor& in, F f, const char* name,
                  cudaStream_t stream) {
  const int64_t n = out.numel();
  const OffsetCalc<2> calc = make_offset_calc<2>(out.sizes(), {&out, &in}, name);
  Out* o = static_cast<Out*>(out.data_ptr());
  const T* x = static_cast<const T*>(in.data_ptr());
  constexpr int V = kVectorBytes / sizeof(T);
  if (!calc.contiguous) {
    unary_strided_kernel<T, Out><<<grid_for(n), kThreads, 0, stream>>>(n, calc, o, x, f);
  } else if (is_aligned(o, sizeof(Out) * V) && is_aligned(x, sizeof(T) * V)) {
    unary_flat_kernel<V, T, Out><<<flat_grid(n, V), kThreads, 0, stream>>>(n, o, x, f);
  } else {
    unary_flat_kernel<1, T, Out><<<flat_grid(n, 1), kThreads, 0, stream>>>(n, o, x, f);
  }
}

}  // namespace

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p) {
  const char* name = op_name(op);
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  if (op_kind(op) == UnaryKind::Bool) {
    dispatch_all(in.dtype(), name, [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      launch_unary<T, bool>(out, in, PredicateFn<T>{op}, name, ctx.stream);
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
    const bool fixed = (op == UnaryOp::gelu || op == UnaryOp::gelu_tanh) &&
                       (in.dtype() == DType::Float32 || in.dtype() == DType::BFloat16 ||
                        in.dtype() == DType::Float16);
    if (fixed) {
      dispatch_floating(in.dtype(), name, [&](auto tag) {
        using T = device_t<typename decltype(tag)::type>;
        if constexpr (!std::is_same_v<T, double>) {
          if (op == UnaryOp::gelu) {
            launch_unary<T, T>(out, in, FixedUnaryFn<T, UnaryOp::gelu>{p}, name, ctx.stream);
          } else {
            launch_unary<T, T>(out, in, FixedUnaryFn<T, UnaryOp::gelu_tanh>{p}, name, ctx.stream);
          }
        }
      });
    } else {
      dispatch_all(in.dtype(), name, [&](auto tag) {
        using T = device_t<typename decltype(tag)::type>;
        launch_unary<T, T>(out, in, UnaryFn<T>{op, p}, name, ctx.stream);
      });
    }
  }
  KILN_CUDA_CHECK_LAUNCH(name);
}

}  // namespace kiln::cuda
