// CUDA kernels of the unary elementwise ops (Note [CUDA elementwise]): the launch shape around
// the shared functors (Note [Shared elementwise functors], ops/math/functors.h).
#include <type_traits>

#include "cuda/elementwise.cuh"
#include "ops/dispatch.h"
#include "ops/math/functors.h"

namespace kiln::cuda {

namespace {

// The op's shared functor (ops/math/functors.h) on one element, in the accumulation type. The
// host has checked that the op is defined on T (supported below), so Unsupported never runs.
template <typename T>
struct UnaryFn {
  UnaryOp op;
  UnaryParams p;
  __device__ T operator()(T x) const {
    using A = acc_t<T>;
    return math::visit_unary<A>(op, p, [x](auto fn) -> T {
      if constexpr (math::is_unsupported_v<decltype(fn)>) {
        return x;
      } else {
        return static_cast<T>(fn(static_cast<A>(x)));
      }
    });
  }
};

// Note [Activations with the op fixed]: UnaryFn switches on the op at run time over every
// unary op; the registers its heaviest cases claim are claimed by every launch, and GELU over a
// GPT-2 MLP ran at half PyTorch's bandwidth (70 against 37 us for 25M bfloat16 elements on
// the H200). The activations of a training step get kernels with the op's functor a template
// argument, so there is no switch at all.
template <typename T, typename Fn>
struct FixedUnaryFn {
  Fn fn;
  __device__ T operator()(T x) const { return static_cast<T>(fn(static_cast<acc_t<T>>(x))); }
};

template <typename T>
struct PredicateFn {
  UnaryOp op;
  __device__ bool operator()(T x) const {
    using A = acc_t<T>;
    return math::visit_predicate<A>(op, [x](auto fn) -> bool {
      if constexpr (math::is_unsupported_v<decltype(fn)>) {
        return false;
      } else {
        return fn(static_cast<A>(x));
      }
    });
  }
};

// Whether the shared functors define `op` on T (the check the CPU makes by raising).
template <typename T>
bool supported(UnaryOp op, bool predicate) {
  auto has = [](auto fn) { return !math::is_unsupported_v<decltype(fn)>; };
  return predicate ? math::visit_predicate<acc_t<T>>(op, has)
                   : math::visit_unary<acc_t<T>>(op, UnaryParams{}, has);
}

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
  if (out.numel() == 0) return;
  LaunchContext ctx(out);
  const bool predicate = op_kind(op) == UnaryKind::Bool;
  dispatch_all(in.dtype(), name, [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    KILN_CHECK(supported<T>(op, predicate), NotImplemented, "[", name,
               "] not implemented for dtype ", in.dtype());
    using A = acc_t<T>;
    if (predicate) {
      launch_unary<T, bool>(out, in, PredicateFn<T>{op}, name, ctx.stream);
    } else if constexpr (std::is_same_v<A, float>) {
      if (op == UnaryOp::gelu) {
        launch_unary<T, T>(out, in, FixedUnaryFn<T, math::Gelu<A>>{}, name, ctx.stream);
      } else if (op == UnaryOp::gelu_tanh) {
        launch_unary<T, T>(out, in, FixedUnaryFn<T, math::GeluTanh<A>>{}, name, ctx.stream);
      } else {
        launch_unary<T, T>(out, in, UnaryFn<T>{op, p}, name, ctx.stream);
      }
    } else {
      launch_unary<T, T>(out, in, UnaryFn<T>{op, p}, name, ctx.stream);
    }
  });
  KILN_CUDA_CHECK_LAUNCH(name);
}

}  // namespace kiln::cuda
