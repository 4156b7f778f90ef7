// Fused cross entropy with class targets over the rows of contiguous [rows, classes] logits
// (Note [Fused nn kernels]). Forward: one block per row, an online logsumexp (running max,
// rescaled sum) in one read (16-byte loads where rows are aligned), then the target's logit. Backward: one block per row writes
// grad_loss * weight[t] * (softmax - onehot) from the saved logsumexp in one read.
// A target out of range counts as ignored; the forward records it (Note [Deferred index
// errors] in ops/index.cpp), so the front end reads no target on the host.
#include <type_traits>

#include "cuda/check.h"
#include "cuda/device_error.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "cuda/row_kernels.cuh"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

// L, the loss and weight dtype, is T or (half T under autocast) float. V > 1: every row is
// 16-byte aligned and cols a multiple of V, read V elements per load.
template <typename T, typename L, int V>
__global__ void cross_entropy_forward_kernel(L* loss, acc_t<T>* lse, const T* logits,
                                             const int64_t* target, const L* weight, int64_t rows,
                                             int64_t cols, int64_t ignore_index,
                                             DeviceErrorRecord* rec, uint64_t op) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * cols;
    A row_max;
    const A s = row_online_sum_exp<V>(x, cols, scratch, row_max);
    if (threadIdx.x != 0) continue;
    const A l = row_max + log_acc(s);
    lse[r] = l;
    const int64_t t = target[r];
    if (t == ignore_index) {
      loss[r] = static_cast<L>(A(0));
    } else if (t < 0 || t >= cols) {
      loss[r] = static_cast<L>(A(0));
      record_index_error(rec, IndexErrorStyle::Classes, op, t, cols, 1);
    } else {
      const A w = weight ? static_cast<A>(weight[t]) : A(1);
      loss[r] = static_cast<L>(w * (l - static_cast<A>(x[t])));
    }
  }
}

template <typename T, typename L, int V>
__global__ void cross_entropy_backward_kernel(T* grad_logits, const L* grad_loss, const T* logits,
                                              const acc_t<T>* lse, const int64_t* target,
                                              const L* weight, int64_t rows, int64_t cols,
                                              int64_t ignore_index) {
  using A = acc_t<T>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * cols;
    T* gi = grad_logits + r * cols;
    const int64_t t = target[r];
    const bool skip = t == ignore_index || t < 0 || t >= cols;
    const A scale =
        skip ? A(0) : static_cast<A>(grad_loss[r]) * (weight ? static_cast<A>(weight[t]) : A(1));
    const A l = lse[r];
    for (int64_t c = threadIdx.x; c * V < cols; c += blockDim.x) {
      Pack<T, V> in, out;
      if (!skip) in = reinterpret_cast<const Pack<T, V>*>(x)[c];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int64_t j = c * V + i;
        const A p = skip ? A(0) : exp_acc(static_cast<A>(in.v[i]) - l) - (j == t ? A(1) : A(0));
        out.v[i] = static_cast<T>(scale * p);
      }
      reinterpret_cast<Pack<T, V>*>(gi)[c] = out;
    }
  }
}

// Runs f(T{}, L{}) for the logits' dtype T and the loss dtype L (T, or float for half T).
template <typename F>
void dispatch_logits_and_loss(const Tensor& logits, DType loss_dtype, const char* op, F&& f) {
  dispatch_floating(logits.dtype(), op, [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    if (loss_dtype == logits.dtype()) {
      f(T{}, T{});
    } else if constexpr (!std::is_same_v<acc_t<T>, T>) {
      f(T{}, acc_t<T>{});
    } else {
      fail(ErrorKind::Runtime, "[", op, "] loss dtype ", loss_dtype, " for ", logits.dtype(),
           " logits");
    }
  });
}

void cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                           const Tensor& target, const Tensor& weight, int64_t ignore_index) {
  const int64_t rows = logits.size(0), cols = logits.size(1);
  if (rows == 0) return;
  LaunchContext ctx(logits);
  DeviceErrorRecord* rec = device_error_record(logits.device().index);
  dispatch_logits_and_loss(logits, loss.dtype(), "cross_entropy", [&](auto t_tag, auto l_tag) {
    using T = decltype(t_tag);
    using L = decltype(l_tag);
    using A = acc_t<T>;
    constexpr int kVec = 16 / sizeof(T);
    const auto launch = [&](auto kernel, int v) {
      kernel<<<row_blocks(rows), threads_for(cols / v, 8), 0, ctx.stream>>>(
          static_cast<L*>(loss.data_ptr()), static_cast<A*>(lse.data_ptr()),
          static_cast<const T*>(logits.data_ptr()),
          static_cast<const int64_t*>(target.data_ptr()), ptr_or_null<L>(weight), rows, cols,
          ignore_index, rec, op_address("cross_entropy"));
    };
    if (vector_width<T>(logits.data_ptr(), cols) == kVec) {
      launch(cross_entropy_forward_kernel<T, L, kVec>, kVec);
    } else {
      launch(cross_entropy_forward_kernel<T, L, 1>, 1);
    }
  });
  KILN_CUDA_CHECK_LAUNCH("cross_entropy");
}

void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss,
                            const Tensor& logits, const Tensor& lse, const Tensor& target,
                            const Tensor& weight, int64_t ignore_index) {
  const int64_t rows = logits.size(0), cols = logits.size(1);
  if (rows == 0 || cols == 0) return;
  LaunchContext ctx(logits);
  dispatch_logits_and_loss(logits, grad_loss.dtype(), "cross_entropy_backward",
                           [&](auto t_tag, auto l_tag) {
    using T = decltype(t_tag);
    using L = decltype(l_tag);
    using A = acc_t<T>;
    constexpr int kVec = 16 / sizeof(T);
    const auto launch = [&](auto kernel, int v) {
      kernel<<<row_blocks(rows), threads_for(cols / v, 8), 0, ctx.stream>>>(
          static_cast<T*>(grad_logits.data_ptr()), static_cast<const L*>(grad_loss.data_ptr()),
          static_cast<const T*>(logits.data_ptr()), static_cast<const A*>(lse.data_ptr()),
          static_cast<const int64_t*>(target.data_ptr()), ptr_or_null<L>(weight), rows, cols,
          ignore_index);
    };
    if (vector_width<T>(logits.data_ptr(), cols) == kVec &&
        vector_width<T>(grad_logits.data_ptr(), cols) == kVec) {
      launch(cross_entropy_backward_kernel<T, L, kVec>, kVec);
    } else {
      launch(cross_entropy_backward_kernel<T, L, 1>, 1);
    }
  });
  KILN_CUDA_CHECK_LAUNCH("cross_entropy_backward");
}

}  // namespace

void install_cross_entropy_kernels(Backend& b) {
  b.cross_entropy_forward = cross_entropy_forward;
  b.cross_entropy_backward = cross_entropy_backward;
}

}  // namespace kiln::cuda
