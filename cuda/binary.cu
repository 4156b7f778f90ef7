// CUDA kernels of the binary elementwise ops and where (Note [CUDA elementwise]).
#include <cmath>
#include <cstring>

#include "cuda/elementwise.cuh"
#include "ops/activation_grad.h"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

// Integer division by zero has no exception on the device: it yields 0
// (the CPU raises); the floor/remainder rules follow Python's signs.
template <typename T>
__device__ T int_floor_div(T x, T y) {
  if (y == 0) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (y == T(-1)) return T(-x);
    T q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return q;
  } else {
    return x / y;
  }
}

template <typename T>
__device__ T int_remainder(T x, T y) {
  if (y == 0) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (y == T(-1)) return T(0);
    T r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
  } else {
    return x % y;
  }
}

template <typename T>
__device__ T int_pow(T base, T exp) {
  // Negative exponents: as int_pow in ops/cpu/binary_kernels.cpp.
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return T(1);
      if (base == -1) return (exp & 1) ? T(-1) : T(1);
      return T(0);
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = T(result * base);
    exp >>= 1;
    if (exp) base = T(base * base);
  }
  return result;
}

template <typename A>
__device__ bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return isnan(v);
  } else {
    return false;
  }
}

// Arithmetic in the accumulation type A (float for half types).
template <typename A>
__device__ A arithmetic(BinaryOp op, A x, A y) {
  switch (op) {
    case BinaryOp::add: return x + y;
    case BinaryOp::sub: return x - y;
    case BinaryOp::mul: return x * y;
    case BinaryOp::maximum:
      if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;
      return x > y ? x : y;
    case BinaryOp::minimum:
      if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;
      return x < y ? x : y;
    default:
      break;
  }
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case BinaryOp::div: return x / y;
      case BinaryOp::floor_divide: return floor(x / y);
      case BinaryOp::remainder: {
        A r = fmod(x, y);
        if (r != A(0) && ((r < A(0)) != (y < A(0)))) r += y;
        return r;
      }
      case BinaryOp::fmod: return fmod(x, y);
      case BinaryOp::pow: return pow(x, y);
      case BinaryOp::atan2: return atan2(x, y);
      case BinaryOp::nextafter: return nextafter(x, y);  // float32/float64 only (front end)
      default: return activation_grad::apply(op, x, y);
    }
  } else {
    switch (op) {
      case BinaryOp::floor_divide: return int_floor_div(x, y);
      case BinaryOp::remainder: return int_remainder(x, y);
      case BinaryOp::fmod:
        if constexpr (std::is_signed_v<A>) {
          if (y == A(-1)) return A(0);
        }
        return y == A(0) ? A(0) : A(x % y);
      case BinaryOp::pow: return int_pow(x, y);
      case BinaryOp::bitwise_and: return x & y;
      case BinaryOp::bitwise_or: return x | y;
      case BinaryOp::bitwise_xor: return x ^ y;
      default: return x;
    }
  }
}

template <typename A>
__device__ bool compare(BinaryOp op, A x, A y) {
  switch (op) {
    case BinaryOp::eq: return x == y;
    case BinaryOp::ne: return x != y;
    case BinaryOp::lt: return x < y;
    case BinaryOp::le: return x <= y;
    case BinaryOp::gt: return x > y;
    case BinaryOp::ge: return x >= y;
    case BinaryOp::logical_and: return x != A(0) && y != A(0);
    case BinaryOp::logical_or: return x != A(0) || y != A(0);
    case BinaryOp::logical_xor: return (x != A(0)) != (y != A(0));
    default: return false;
  }
}

// The op on one pair of elements, in the accumulation type (bool: logical).
template <typename T>
struct ArithmeticFn {
  BinaryOp op;
  __device__ T operator()(acc_t<T> x, acc_t<T> y) const {
    if constexpr (std::is_same_v<T, bool>) {
      switch (op) {
        case BinaryOp::add: case BinaryOp::bitwise_or: case BinaryOp::maximum: return x || y;
        case BinaryOp::mul: case BinaryOp::bitwise_and: case BinaryOp::minimum: return x && y;
        case BinaryOp::bitwise_xor: return x != y;
        default: return x;
      }
    } else {
      return static_cast<T>(arithmetic<acc_t<T>>(op, x, y));
    }
  }
};

template <typename T>
struct CompareFn {
  BinaryOp op;
  __device__ bool operator()(acc_t<T> x, acc_t<T> y) const {
    return compare<acc_t<T>>(op, x, y);
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
  const BinaryKind kind = op_kind(op);
  if (kind == BinaryKind::Compare) {
    dispatch_all(a.dtype(), name, [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      launch_binary<T, bool>(out, a, b, CompareFn<T>{op}, name, ctx.stream);
    });
  } else {
    const bool floating = is_floating(out.dtype());
    KILN_CHECK(!(floating && kind == BinaryKind::Integral), NotImplemented, "[", name,
               "] not implemented for dtype ", a.dtype());
    KILN_CHECK(floating || !(op == BinaryOp::div || op == BinaryOp::atan2), NotImplemented, "[",
               name, "] not implemented for dtype ", a.dtype());
    // out, not a: a may be a float32 scalar (Note [Reduced-precision scalar operands]).
    dispatch_all(out.dtype(), name, [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      launch_binary<T, T>(out, a, b, ArithmeticFn<T>{op}, name, ctx.stream);
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
