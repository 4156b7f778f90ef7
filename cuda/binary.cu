// CUDA kernels of the binary elementwise ops and where (Note [CUDA elementwise]).
#include <cmath>

#include "cuda/elementwise.cuh"
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
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) return T(0);
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
      case BinaryOp::pow: return pow(x, y);
      case BinaryOp::atan2: return atan2(x, y);
      default: return x;
    }
  } else {
    switch (op) {
      case BinaryOp::floor_divide: return int_floor_div(x, y);
      case BinaryOp::remainder: return int_remainder(x, y);
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

template <typename T>
__global__ void binary_same_kernel(BinaryOp op, int64_t n, OffsetCalc<3> calc, T* out,
                                   const T* a, const T* b) {
  using A = acc_t<T>;
  KILN_GRID_STRIDE(i, n) {
    int64_t off[3];
    calc.get(i, off);
    if constexpr (std::is_same_v<T, bool>) {
      const bool x = a[off[1]], y = b[off[2]];
      bool r = x;
      switch (op) {
        case BinaryOp::add: case BinaryOp::bitwise_or: case BinaryOp::maximum: r = x || y; break;
        case BinaryOp::mul: case BinaryOp::bitwise_and: case BinaryOp::minimum: r = x && y; break;
        case BinaryOp::bitwise_xor: r = x != y; break;
        default: break;
      }
      out[off[0]] = r;
    } else {
      out[off[0]] = static_cast<T>(
          arithmetic<A>(op, static_cast<A>(a[off[1]]), static_cast<A>(b[off[2]])));
    }
  }
}

template <typename T>
__global__ void binary_compare_kernel(BinaryOp op, int64_t n, OffsetCalc<3> calc, bool* out,
                                      const T* a, const T* b) {
  using A = acc_t<T>;
  KILN_GRID_STRIDE(i, n) {
    int64_t off[3];
    calc.get(i, off);
    out[off[0]] = compare<A>(op, static_cast<A>(a[off[1]]), static_cast<A>(b[off[2]]));
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
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  auto calc = make_offset_calc<3>(out.sizes(), {&out, &a, &b}, name);
  const BinaryKind kind = op_kind(op);
  if (kind == BinaryKind::Compare) {
    dispatch_all(a.dtype(), name, [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      binary_compare_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(
          op, n, calc, out.data<bool>(), static_cast<const T*>(a.data_ptr()),
          static_cast<const T*>(b.data_ptr()));
    });
  } else {
    const bool floating = is_floating(a.dtype());
    KILN_CHECK(!(floating && kind == BinaryKind::Integral), NotImplemented, "[", name,
               "] not implemented for dtype ", a.dtype());
    KILN_CHECK(floating || !(op == BinaryOp::div || op == BinaryOp::atan2), NotImplemented, "[",
               name, "] not implemented for dtype ", a.dtype());
    dispatch_all(a.dtype(), name, [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      binary_same_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(
          op, n, calc, static_cast<T*>(out.data_ptr()), static_cast<const T*>(a.data_ptr()),
          static_cast<const T*>(b.data_ptr()));
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
