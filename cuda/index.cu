// CUDA kernels of the indexing families: the device-side index check, offset take/put, row
// gather and scatter-add (embedding, nll_loss), scatter-multiply, and tril/triu. Indices come
// from index_check (Note [Deferred index errors] in ops/index.cpp) or from the front end's own
// tables: in range, or negative where a check failed, and such elements are skipped.
#include "cuda/device_error.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

// IndexCheck as the kernel reads it.
struct CheckArgs {
  uint64_t op;
  IndexErrorStyle style;
  bool allow_negative, has_allowed;
  int64_t size, dim, allowed, stride, invalid;
};

template <typename I>
__global__ void index_check_kernel(int64_t n, int64_t* out, const I* index, CheckArgs c,
                                   DeviceErrorRecord* rec) {
  KILN_GRID_STRIDE(i, n) {
    const int64_t v = static_cast<int64_t>(index[i]);
    if (c.has_allowed && v == c.allowed) {
      out[i] = v;
    } else if (v < c.size && v >= (c.allow_negative ? -c.size : 0)) {
      out[i] = (v < 0 ? v + c.size : v) * c.stride;
    } else {
      out[i] = c.invalid;
      record_index_error(rec, c.style, c.op, v, c.size, c.dim);
    }
  }
}

template <typename T>
__global__ void take_kernel(int64_t n, T* out, const T* in, const int64_t* offsets) {
  KILN_GRID_STRIDE(i, n) {
    const int64_t o = offsets[i];
    out[i] = o >= 0 ? in[o] : T(0);
  }
}

template <typename T>
__global__ void put_kernel(int64_t n, T* self, const int64_t* offsets, const T* values) {
  KILN_GRID_STRIDE(i, n) {
    if (offsets[i] >= 0) self[offsets[i]] = values[i];
  }
}

// Atomic accumulation for the dtypes the hardware adds atomically.
template <typename T>
__device__ void atomic_add(T* address, T value) {
  if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(address),
              static_cast<unsigned long long>(value));  // two's complement wraps the same
  } else {
    atomicAdd(address, value);
  }
}

template <typename T>
constexpr bool has_atomic_add = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16> ||
                                std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

template <typename T>
__global__ void put_add_kernel(int64_t n, T* self, const int64_t* offsets, const T* values) {
  KILN_GRID_STRIDE(i, n) {
    if (offsets[i] >= 0) atomic_add(self + offsets[i], values[i]);
  }
}

// a * b in T (half types multiply in float, bool is logical and).
template <typename T>
__device__ T multiply(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    return T(static_cast<float>(a) * static_cast<float>(b));
  } else {
    return a * b;
  }
}

template <typename To, typename From>
__device__ To bits_as(From from) {
  static_assert(sizeof(To) == sizeof(From), "bits_as reinterprets equal-sized values");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// *address *= value with a compare-and-swap loop on the word holding it (CUDA has no atomic
// multiply). One- and two-byte values swap the aligned 32-bit word around them.
template <typename T>
__device__ void atomic_mul(T* address, T value) {
  if constexpr (sizeof(T) == 8 || sizeof(T) == 4) {
    using Word = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned int>;
    Word* word = reinterpret_cast<Word*>(address);
    Word seen = *word, expected;
    do {
      expected = seen;
      T updated = multiply(bits_as<T>(expected), value);
      seen = atomicCAS(word, expected, bits_as<Word>(updated));
    } while (seen != expected);
  } else {
    const auto at = reinterpret_cast<uintptr_t>(address);
    unsigned int* word = reinterpret_cast<unsigned int*>(at & ~uintptr_t(3));
    const unsigned int shift = (at & 3) * 8, mask = ((1u << (sizeof(T) * 8)) - 1) << shift;
    using Bits = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned char>;
    unsigned int seen = *word, expected;
    do {
      expected = seen;
      const T old = bits_as<T>(static_cast<Bits>((expected & mask) >> shift));
      const unsigned int bits = bits_as<Bits>(multiply(old, value));
      seen = atomicCAS(word, expected, (expected & ~mask) | (bits << shift));
    } while (seen != expected);
  }
}

template <typename T>
__global__ void put_mul_kernel(int64_t n, T* self, const int64_t* offsets, const T* values) {
  KILN_GRID_STRIDE(i, n) {
    if (offsets[i] >= 0) atomic_mul(self + offsets[i], values[i]);
  }
}

template <typename T>
__global__ void row_gather_kernel(int64_t n, int64_t width, T* out, const T* src,
                                  const int64_t* index) {
  KILN_GRID_STRIDE(i, n) {
    const int64_t row = index[i / width];
    out[i] = row >= 0 ? src[row * width + i % width] : T(0);
  }
}

template <typename T>
__global__ void row_scatter_add_kernel(int64_t n, int64_t width, T* out, const T* src,
                                       const int64_t* index) {
  KILN_GRID_STRIDE(i, n) {
    const int64_t row = index[i / width];
    if (row >= 0) atomic_add(out + row * width + i % width, src[i]);
  }
}

template <typename T>
__global__ void triangle_kernel(int64_t n, int64_t rows, int64_t cols, int64_t diagonal,
                                bool upper, T* out, const T* in) {
  KILN_GRID_STRIDE(i, n) {
    const int64_t col = i % cols, row = (i / cols) % rows;
    const bool keep = upper ? col - row >= diagonal : col - row <= diagonal;
    out[i] = keep ? in[i] : T(0);
  }
}

void index_check_host(const Tensor& out, const Tensor& index, const IndexCheck& check) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  CheckArgs c;
  c.op = op_address(check.op);
  c.style = check.style;
  c.allow_negative = check.allow_negative;
  c.has_allowed = check.has_allowed;
  c.size = check.size;
  c.dim = check.dim;
  c.allowed = check.allowed;
  c.stride = check.stride;
  c.invalid = check.invalid;
  DeviceErrorRecord* rec = device_error_record(out.device().index);
  int64_t* dst = out.data<int64_t>();
  if (index.dtype() == DType::Int32) {
    index_check_kernel<int32_t>
        <<<grid_for(n), kThreads, 0, ctx.stream>>>(n, dst, index.data<int32_t>(), c, rec);
  } else {
    KILN_CHECK(index.dtype() == DType::Int64, Runtime, "[", check.op,
               "] index_check expects int32 or int64 indices, got ", index.dtype());
    index_check_kernel<int64_t>
        <<<grid_for(n), kThreads, 0, ctx.stream>>>(n, dst, index.data<int64_t>(), c, rec);
  }
  KILN_CUDA_CHECK_LAUNCH(check.op);
}

void index_take_kernel(const Tensor& out, const Tensor& in, const Tensor& offsets) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  dispatch_all(in.dtype(), "index", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    take_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(
        n, static_cast<T*>(out.data_ptr()), static_cast<const T*>(in.data_ptr()),
        offsets.data<int64_t>());
  });
  KILN_CUDA_CHECK_LAUNCH("index");
}

void index_put_kernel(PutOp op, const Tensor& self, const Tensor& offsets, const Tensor& values) {
  const int64_t n = values.numel();
  if (n == 0) return;
  LaunchContext ctx(self);
  dispatch_all(self.dtype(), "index_put_", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    T* dst = static_cast<T*>(self.data_ptr());
    const T* src = static_cast<const T*>(values.data_ptr());
    if (op == PutOp::Assign) {
      put_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(n, dst, offsets.data<int64_t>(), src);
    } else if (op == PutOp::Mul) {
      put_mul_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(n, dst, offsets.data<int64_t>(),
                                                                  src);
    } else if constexpr (has_atomic_add<T>) {
      put_add_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(n, dst, offsets.data<int64_t>(),
                                                                  src);
    } else {
      fail(ErrorKind::NotImplemented, "[index_put_] accumulate=True is not implemented on CUDA "
           "for dtype ", self.dtype());
    }
  });
  KILN_CUDA_CHECK_LAUNCH("index_put_");
}

void row_gather_kernel_host(const Tensor& out, const Tensor& src, const Tensor& index) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  dispatch_all(src.dtype(), "embedding", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    row_gather_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(
        n, out.size(1), static_cast<T*>(out.data_ptr()), static_cast<const T*>(src.data_ptr()),
        index.data<int64_t>());
  });
  KILN_CUDA_CHECK_LAUNCH("embedding");
}

void row_scatter_add_kernel_host(const Tensor& out, const Tensor& src, const Tensor& index) {
  const int64_t n = src.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  dispatch_floating(out.dtype(), "embedding_backward", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    row_scatter_add_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(
        n, src.size(1), static_cast<T*>(out.data_ptr()), static_cast<const T*>(src.data_ptr()),
        index.data<int64_t>());
  });
  KILN_CUDA_CHECK_LAUNCH("embedding_backward");
}

void triangle_kernel_host(const Tensor& out, const Tensor& in, int64_t diagonal, bool upper) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchContext ctx(out);
  const int64_t rows = out.size(-2), cols = out.size(-1);
  dispatch_all(out.dtype(), upper ? "triu" : "tril", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    triangle_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(
        n, rows, cols, diagonal, upper, static_cast<T*>(out.data_ptr()),
        static_cast<const T*>(in.data_ptr()));
  });
  KILN_CUDA_CHECK_LAUNCH(upper ? "triu" : "tril");
}

}  // namespace

void install_index_kernels(Backend& b) {
  b.index_take = index_take_kernel;
  b.index_put = index_put_kernel;
  b.index_check = index_check_host;
  b.row_gather = row_gather_kernel_host;
  b.row_scatter_add = row_scatter_add_kernel_host;
  b.triangle = triangle_kernel_host;
}

}  // namespace kiln::cuda
