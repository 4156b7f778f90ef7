// CUDA kernels of the binary elementwise ops and where (Note [CUDA elementwise]): the launch
// shape around the shared functors (Note [Shared elementwise functors], ops/math/functors.h).
#include <cstring>
#include <type_traits>

#include "cuda/device_error.cuh"
#include "cuda/elementwise.cuh"
#include "ops/dispatch.h"
#include "ops/math/functors.h"

namespace kiln::cuda {

namespace {

// The op's shared functor (ops/math/functors.h) on one pair of elements, in the accumulation
// type. The host has checked that the op is defined on T (binary_kernel), so Unsupported never
// runs; an integer division by zero goes to the device's error record.
template <typename T>
struct ArithmeticFn {
  BinaryOp op;
  RecordZeroDivision sink;
  __device__ T operator()(acc_t<T> x, acc_t<T> y) const {
    return math::visit_binary<acc_t<T>>(op, sink, [x, y](auto fn) -> T {
      if constexpr (math::is_unsupported_v<decltype(fn)>) {
        return static_cast<T>(x);
      } else {
        return static_cast<T>(fn(x, y));
      }
    });
  }
};

// Note [Activations with the op fixed] (cuda/unary.cu) for the activation gradients: through
// ArithmeticFn's switch GELU's backward claimed the registers of every binary op and ran at
// two-thirds of PyTorch's bandwidth over a GPT-2 MLP (72 us for 25M bfloat16 elements on the
// H200, PyTorch 46); with the op a template argument it takes 55 (float32: 73 us for 300 MB,
// the card's bandwidth).
template <typename T, typename Fn>
struct FixedBinaryFn {
  Fn fn;
  __device__ T operator()(acc_t<T> x, acc_t<T> y) const { return static_cast<T>(fn(x, y)); }
};

template <typename T>
struct CompareFn {
  BinaryOp op;
  __device__ bool operator()(acc_t<T> x, acc_t<T> y) const {
    return math::visit_compare<acc_t<T>>(op, [x, y](auto fn) -> bool {
      if constexpr (math::is_unsupported_v<decltype(fn)>) {
        return false;
      } else {
        return fn(x, y);
      }
    });
  }
};

// Contiguous operands: V elements per 16-byte access, then the tail.
template <int V, typename T, typename Out, typename F>
__global__ void binary_flat_kernel(int64_t n, Out* out, In<T> a, In<T> b, F f) {
  const int64_t packs = n / V;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = first; p < packs; p += step) {
    const Pack<acc_t<T>, V> x = a.template pack<V>(p), y = b.template pack<V>(p);
    Pack<Out, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = f(x.v[k], y.v[k]);
    reinterpret_cast<Pack<Out, V>*>(out)[p] = r;
  }
  for (int64_t i = packs * V + first; i < n; i += step) out[i] = f(a.at(i), b.at(i));
}

template <typename T, typename Out, typename F>
__global__ void binary_strided_kernel(int64_t n, OffsetCalc<3> calc, Out* out, In<T> a, In<T> b,
                                      F f) {
  KILN_GRID_STRIDE(i, n) {
    int64_t off[3];
    calc.get(i, off);
    out[off[0]] = f(a.at(off[1]), b.at(off[2]));
  }
}

// A CPU operand is a 0-d scalar (see ops/elementwise.cpp): its value rides in
// the kernel's arguments instead of a host-to-device copy per op. With a half
// compute type it may come as float32, the accumulation type.
template <typename T>
In<T> operand(const Tensor& t) {
  using A = acc_t<T>;
  In<T> in;
  if (t.device().is_cpu()) {
    if (!std::is_same_v<A, T> && t.itemsize() == sizeof(A)) {
      std::memcpy(&in.value, t.data_ptr(), sizeof(A));
    } else {
      T v;
      std::memcpy(&v, t.data_ptr(), sizeof(T));
      in.value = static_cast<A>(v);
    }
  } else {
    in.ptr = static_cast<const T*>(t.data_ptr());
  }
  return in;
}

template <typename T, typename Out, typename F>
void launch_binary(const Tensor& out, const Tensor& a, const Tensor& b, F f, const char* name,
                   cudaStream_t stream) {
  const int64_t n = out.numel();
  // Strides of a scalar operand are irrelevant: stand in the output's.
  const Tensor& sa = a.device().is_cpu() ? out : a;
  const Tensor& sb = b.device().is_cpu() ? out : b;
  const OffsetCalc<3> calc = make_offset_calc<3>(out.sizes(), {&out, &sa, &sb}, name);
  Out* o = static_cast<Out*>(out.data_ptr());
  In<T> x = operand<T>(a), y = operand<T>(b);
  if (!calc.contiguous) {
    // A contiguous output whose operands are contiguous or a repeated contiguous block
    // (x + bias) still takes the flat, vectorized path.
    const int64_t pa = x.ptr ? flat_period(a) : n, pb = y.ptr ? flat_period(b) : n;
    if (!out.is_contiguous() || pa == 0 || pb == 0) {
      binary_strided_kernel<T, Out><<<grid_for(n), kThreads, 0, stream>>>(n, calc, o, x, y, f);
      return;
    }
    x.period = pa == n ? 0 : pa;
    y.period = pb == n ? 0 : pb;
  }
  constexpr int V = kVectorBytes / sizeof(T);
  if (is_aligned(o, sizeof(Out) * V) && is_aligned(x.ptr, sizeof(T) * V) &&
      is_aligned(y.ptr, sizeof(T) * V) && x.period % V == 0 && y.period % V == 0) {
    binary_flat_kernel<V, T, Out><<<flat_grid(n, V), kThreads, 0, stream>>>(n, o, x, y, f);
  } else {
    binary_flat_kernel<1, T, Out><<<flat_grid(n, 1), kThreads, 0, stream>>>(n, o, x, y, f);
  }
}

template <typename T>
__global__ void where_same_kernel(int64_t n, OffsetCalc<4> calc, T* out, const bool* cond,
                                  const T* a, const T* b) {
  KILN_GRID_STRIDE(i, n) {
    int64_t off[4];
    calc.get(i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

}  // namespace

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  if (out.numel() == 0) return;
  LaunchContext ctx(out);
  auto has = [](auto fn) { return !math::is_unsupported_v<decltype(fn)>; };
  if (op_kind(op) == BinaryKind::Compare) {
    dispatch_all(a.dtype(), name, [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      KILN_CHECK(math::visit_compare<acc_t<T>>(op, has), NotImplemented, "[", name,
                 "] not implemented for dtype ", a.dtype());
      launch_binary<T, bool>(out, a, b, CompareFn<T>{op}, name, ctx.stream);
    });
  } else {
    // Only integer division and modulo can reach the error record; other ops skip creating it.
    const bool divides =
        !is_floating(out.dtype()) &&
        (op == BinaryOp::floor_divide || op == BinaryOp::remainder || op == BinaryOp::fmod);
    const RecordZeroDivision sink{divides ? device_error_record(out.device().index) : nullptr,
                                  op_address(name)};
    // out, not a: a may be a float32 scalar (Note [Reduced-precision scalar operands]).
    dispatch_all(out.dtype(), name, [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      KILN_CHECK(math::visit_binary<acc_t<T>>(op, sink, has), NotImplemented, "[", name,
                 "] not implemented for dtype ", a.dtype());
      using A = acc_t<T>;
      if constexpr (std::is_same_v<A, float>) {
        if (op == BinaryOp::gelu_backward) {
          using Fn = math::ActivationGrad<A, BinaryOp::gelu_backward>;
          launch_binary<T, T>(out, a, b, FixedBinaryFn<T, Fn>{}, name, ctx.stream);
          return;
        }
        if (op == BinaryOp::gelu_tanh_backward) {
          using Fn = math::ActivationGrad<A, BinaryOp::gelu_tanh_backward>;
          launch_binary<T, T>(out, a, b, FixedBinaryFn<T, Fn>{}, name, ctx.stream);
          return;
        }
      }
      launch_binary<T, T>(out, a, b, ArithmeticFn<T>{op, sink}, name, ctx.stream);
    });
  }
  KILN_CUDA_CHECK_LAUNCH(name);
}

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  auto calc = make_offset_calc<4>(out.sizes(), {&out, &cond, &a, &b}, "where");
  dispatch_all(out.dtype(), "where", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    where_same_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(
        n, calc, static_cast<T*>(out.data_ptr()), cond.data<bool>(),
        static_cast<const T*>(a.data_ptr()), static_cast<const T*>(b.data_ptr()));
  });
  KILN_CUDA_CHECK_LAUNCH("where");
}

}  // namespace kiln::cuda
